"""When does the width vote answer without a call? From an arm's stored records (no model): per category,
the voted steps, those where the vote chose no call, and those where it chose no call although the samples
with calls that fit the tools, taken together, outnumbered the no-call samples (every no-call sample is one
candidate whatever its text, ``kate/sampling/vote.py``, while call samples split by argument set).
``bench/vote_choices.py`` runs it on a run folder."""

from __future__ import annotations

from collections import defaultdict


def pooled_no_call(vote: dict) -> tuple[bool, bool]:
    """(chose no call, chose no call although the valid call samples together outnumbered the no-call ones)."""
    if vote["chosen"]["kind"] != "no_call":
        return False, False
    candidates = vote["candidates"]
    calls = sum(c["votes"] for c in candidates if c["kind"] == "call" and c.get("valid", True))
    no_call = sum(c["votes"] for c in candidates if c["kind"] == "no_call")
    return True, calls > no_call


def voted_steps(record: dict) -> list[dict]:
    """The votes of a record: one for a single-turn entry, one per step of a dialogue."""
    if record["category"].startswith("multi_turn"):
        return [s["vote"] for t in record.get("turns") or [] for s in t.get("steps") or [] if s.get("vote")]
    return [record["vote"]] if record.get("vote") else []


def count(records: list[dict]) -> dict[str, dict]:
    table: dict[str, dict] = defaultdict(lambda: {"records": 0, "steps": 0, "no_call": 0, "pooled": 0,
                                                  "pooled_right": 0, "turns": 0, "turns_without_call": 0})
    for record in records:
        row = table[record["category"]]
        row["records"] += 1
        for vote in voted_steps(record):
            chose, pooled = pooled_no_call(vote)
            row["steps"] += 1
            row["no_call"] += chose
            row["pooled"] += pooled
            row["pooled_right"] += pooled and not record["category"].startswith("multi_turn") and bool(record["valid"])
        for turn in record.get("turns") or []:
            row["turns"] += 1
            row["turns_without_call"] += not turn.get("calls")
    return dict(sorted(table.items()))
