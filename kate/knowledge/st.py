"""ST, scenario trajectories: per user turn of a solved dialogue, the question and its correct calls.

No model is involved. A turn without user text (a BFCL miss_func turn, where a function arrives)
gives no entry. A turn whose correct behaviour is not to call gives an entry with no calls.
"""

from __future__ import annotations

from collections.abc import Iterable

from kate.knowledge.entries import KnowledgeEntry, calls_payload, tool_names_of, turn_id
from kate.knowledge.trajectory import Trajectory


def _results(turn, limit: int | None) -> list[str] | None:
    if turn.results is None:
        return None
    return [r if limit is None or len(r) <= limit else r[:limit] + " ..." for r in turn.results]


def st_entries(trajectories: Iterable[Trajectory], *, result_chars: int | None = 300) -> list[KnowledgeEntry]:
    """One ST entry per user turn. ``result_chars`` caps each stored tool result (None: no cap)."""
    out = []
    for trajectory in trajectories:
        for number, turn in enumerate(trajectory.turns):
            if not turn.user.strip():
                continue
            payload = {"question": turn.user, "calls": calls_payload(turn.calls), "turn": number}
            results = _results(turn, result_chars)
            if results is not None:
                payload["results"] = results
            if turn.answer is not None:
                payload["answer"] = turn.answer
            out.append(
                KnowledgeEntry(
                    id=f"ST:{turn_id(trajectory.id, number)}",
                    type="ST",
                    text=turn.user,
                    payload=payload,
                    api_classes=trajectory.classes_of(turn.calls),
                    tool_names=tool_names_of(turn.calls),
                    source_ids=(trajectory.id, turn_id(trajectory.id, number)),
                    source=trajectory.source,
                )
            )
    return out
