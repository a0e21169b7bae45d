"""Learning from use: a conversation marked successful becomes new ST entries of a live knowledge base.

The one entry point::

    outcome = learn_trajectory("knowledge_bases/served", messages, tools, source="serve",
                               meta={"request_id": "..."})
    outcome.added      # ids of the entries written
    outcome.skipped    # per turn not written, why: "duplicate", "duplicate within this trajectory", ...
    outcome.rejected   # why nothing was written, when the conversation did not verify (else None)
    outcome.version    # the base's learned generation after the call (+1 per write)

``messages`` is an OpenAI chat history (system / user / assistant with ``tool_calls`` whose
``arguments`` are JSON text / tool messages with the results), ``tools`` the OpenAI tool list that
was offered. What happens:

1. read: one turn per user message, with the assistant's calls until the next user message, each
   call's result from the tool message that answers it (by ``tool_call_id``), the last assistant
   text as the answer: a ``kate-trajectory/1`` Trajectory, whose id is a hash of its turns
   (``kate.knowledge.chat_trajectory`` reads and verifies it);
2. verify: every assistant call parses into a canonical ``ToolCall`` and is one the offered tools
   can make (``calls_expressible``: offered, only its parameters, the required ones, declared
   types). One call that does not verify rejects the whole conversation, with the reason;
3. ST entries exactly as ``st.py`` makes them from kate's own trajectories (results capped at
   ``result_chars``), labelled as coming from use: ``source`` and ``written_by`` ``use:<source>``,
   ``payload["learned"]`` the time and the caller's ``meta``;
4. append under the base's writer lock (``store.write_lock``, across threads and processes): the
   base is loaded as it is now, entries with the same question and canonical calls as one there (or
   one earlier in this conversation) are skipped, the rest embedded with the base's own embedding
   model (checked against the manifest), the index extended, the manifest's counts and ``learned``
   section (entries from use per source, last update, ``version``) updated, and the whole base saved
   by the atomic folder swap: killed part-way, the base is as it was before.

A base that does not exist yet is created (``LearnConfig``: MiniLM, a flat index);
``open_learning_base`` creates an empty one up front, for a server that serves retrieval from the
base it learns into. Running Retrievers see the new entries on their next call
(``KnowledgeBase.refresh``). Learning is off unless a caller calls this.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from kate.knowledge.chat_trajectory import USE_PREFIX, Rejected, trajectory_from_messages, why_unfit
from kate.knowledge.embedder import Embedder
from kate.knowledge.entries import KnowledgeEntry
from kate.knowledge.index import IndexSpec
from kate.knowledge.st import st_entries
from kate.knowledge.store import MANIFEST, KnowledgeBase, check_embedding, write_lock
from kate.knowledge.trajectory import Trajectory

# reading and verifying the conversation lives in kate.knowledge.chat_trajectory; importable from here too
__all__ = ["USE_PREFIX", "LearnConfig", "LearnOutcome", "Rejected", "SkippedTurn", "learn_trajectory",
           "learned_entries", "learned_version", "open_learning_base", "trajectory_from_messages", "why_unfit"]


@dataclass(frozen=True)
class LearnConfig:
    result_chars: int | None = 300  # cap on each stored tool result, as ST from kate's own trajectories
    embedding_model: str = "all-minilm-l6-v2"  # the embedder of a base created here (an existing base keeps its own)
    index: Mapping[str, Any] = field(default_factory=lambda: {"kind": "flat"})  # IndexSpec of a base created here


@dataclass(frozen=True)
class SkippedTurn:
    """A user turn that gave no new entry, and why."""

    turn: int
    reason: str
    entry_id: str | None = None  # the entry it duplicates, when it is a duplicate

    def to_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "reason": self.reason, "entry_id": self.entry_id}


@dataclass(frozen=True)
class LearnOutcome:
    """What one ``learn_trajectory`` call did to the base at ``path``."""

    path: Path
    added: tuple[str, ...] = ()
    skipped: tuple[SkippedTurn, ...] = ()
    rejected: str | None = None  # why the conversation was refused (nothing written); None: it verified
    version: int = 0  # the base's learned generation after the call
    entry_count: int = 0  # entries in the base after the call (0 when it does not exist)
    created: bool = False  # this call created the base

    @property
    def ok(self) -> bool:
        return self.rejected is None

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "added": list(self.added), "skipped": [s.to_dict() for s in self.skipped],
                "rejected": self.rejected, "version": self.version, "entry_count": self.entry_count,
                "created": self.created}


# --------------------------------------------------------------------------- trajectory -> entries
def learned_entries(trajectory: Trajectory, *, source: str, meta: Mapping[str, Any] | None, at: str,
                    result_chars: int | None) -> list[KnowledgeEntry]:
    """ST entries of ``trajectory`` labelled as learned from use at ``at``."""
    label = f"{USE_PREFIX}{source}"
    learned = {"source": label, "at": at, **({"meta": dict(meta)} if meta else {})}
    return [dataclasses.replace(entry, written_by=label, payload={**entry.payload, "learned": learned})
            for entry in st_entries([trajectory], result_chars=result_chars)]


def _no_text_turns(trajectory: Trajectory) -> list[SkippedTurn]:
    return [SkippedTurn(n, "no user text") for n, turn in enumerate(trajectory.turns) if not turn.user.strip()]


def _new_entries(kb: KnowledgeBase, candidates: list[KnowledgeEntry]) -> tuple[list[KnowledgeEntry], list[SkippedTurn]]:
    """Candidates not already in ``kb`` (same question and calls, or same id) nor earlier in the list."""
    existing = {entry.dedupe_key: entry.id for entry in kb.entries}
    fresh: dict[str, KnowledgeEntry] = {}
    skipped = []
    for entry in candidates:
        turn, key = int(entry.payload["turn"]), entry.dedupe_key
        if key in existing or entry.id in kb:
            skipped.append(SkippedTurn(turn, "duplicate", existing.get(key, entry.id)))
        elif key in fresh:
            skipped.append(SkippedTurn(turn, "duplicate within this trajectory", fresh[key].id))
        else:
            fresh[key] = entry
    return list(fresh.values()), skipped


# --------------------------------------------------------------------------- the base
@lru_cache(maxsize=4)
def _default_embedder(model: str) -> Embedder:
    return Embedder(model)


def _embedder_for(manifest: Mapping[str, Any] | None, embedder: Embedder | None, config: LearnConfig,
                  where: Path) -> Embedder:
    model = manifest["embedding"]["model"] if manifest else config.embedding_model
    embedder = embedder or _default_embedder(model)
    if manifest is not None:
        check_embedding(manifest, embedder.identity(), where)
    return embedder


def _empty_base(path: Path, embedder: Embedder, config: LearnConfig) -> KnowledgeBase:
    kb = KnowledgeBase.create([], np.zeros((0, embedder.dim), dtype=np.float32), embedding=embedder.identity(),
                              index_spec=IndexSpec(**dict(config.index)), name=path.name,
                              sources={"kind": "use"}, build_config={"learn": dataclasses.asdict(config)})
    kb.manifest["learned"] = {"version": 0, "entries": 0, "by_source": {}, "updated": kb.manifest["created"]}
    kb.path = path
    return kb


def _exists(path: Path) -> bool:
    return path.exists() or os.path.lexists(path)


def open_learning_base(kb_path: str | os.PathLike[str], *, embedder: Embedder | None = None,
                       config: LearnConfig | None = None) -> KnowledgeBase:
    """The base at ``kb_path``, loaded; an empty one is created there first when there is none."""
    path, config = Path(kb_path), config or LearnConfig()
    with write_lock(path):
        if not _exists(path):
            _empty_base(path, _embedder_for(None, embedder, config, path / MANIFEST), config).save(path)
    kb = KnowledgeBase.load(path)
    _embedder_for(kb.manifest, embedder, config, path / MANIFEST)  # the base's embedding model, or an error
    return kb


def learned_version(manifest: Mapping[str, Any]) -> int:
    return int((manifest.get("learned") or {}).get("version", 0))


def _as_is(path: Path) -> dict[str, int]:
    """The version and entry count the base's manifest gives now (zeros when there is none yet)."""
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
        return {"version": learned_version(manifest), "entry_count": int(manifest["entry_count"])}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {"version": 0, "entry_count": 0}


def _check_meta(meta: Any) -> None:
    if meta is None:
        return
    if not isinstance(meta, Mapping):
        raise Rejected(f"meta must be an object, got {type(meta).__name__}")
    try:
        json.dumps(meta, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise Rejected(f"meta is not plain JSON ({exc})") from None


def _stamped(kb: KnowledgeBase, added: list[KnowledgeEntry], source: str, at: str) -> None:
    learned = dict(kb.manifest.get("learned") or {})
    by_source = dict(learned.get("by_source") or {})
    by_source[f"{USE_PREFIX}{source}"] = by_source.get(f"{USE_PREFIX}{source}", 0) + len(added)
    kb.manifest["learned"] = {"version": learned_version(kb.manifest) + 1, "entries": sum(by_source.values()),
                              "by_source": dict(sorted(by_source.items())), "updated": at}


def learn_trajectory(kb_path: str | os.PathLike[str], messages: Any, tools: Any, *, source: str = "serve",
                     meta: Mapping[str, Any] | None = None, embedder: Embedder | None = None,
                     api_classes: Sequence[str] = (), tool_classes: Mapping[str, str] | None = None,
                     config: LearnConfig | None = None) -> LearnOutcome:
    """Add the ST entries of one successful conversation to the base at ``kb_path`` (see the module
    docstring). A conversation that does not verify is refused (``rejected``), nothing written;
    a corrupt base or an embedder other than the base's raises ``KnowledgeBaseError``."""
    path, config = Path(kb_path), config or LearnConfig()
    at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    try:
        _check_meta(meta)
        trajectory = trajectory_from_messages(messages, tools, source=source, api_classes=api_classes,
                                              tool_classes=tool_classes)
    except Rejected as exc:
        return LearnOutcome(path, rejected=str(exc), **_as_is(path))
    candidates = learned_entries(trajectory, source=source, meta=meta, at=at, result_chars=config.result_chars)
    with write_lock(path):
        created = not _exists(path)
        if created:
            kb = _empty_base(path, _embedder_for(None, embedder, config, path / MANIFEST), config)
        else:
            kb = KnowledgeBase.load(path)
        embedder = _embedder_for(kb.manifest, embedder, config, path / MANIFEST)
        fresh, skipped = _new_entries(kb, candidates)
        skipped = sorted(skipped + _no_text_turns(trajectory), key=lambda s: s.turn)
        if not fresh:
            return LearnOutcome(path, (), tuple(skipped), None, learned_version(kb.manifest), len(kb))
        grown = kb.appended(fresh, embedder.embed([entry.text for entry in fresh]))
        _stamped(grown, fresh, source, at)
        grown.save(path)
    return LearnOutcome(path, tuple(e.id for e in fresh), tuple(skipped), None, learned_version(grown.manifest),
                        len(grown), created)
