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
   text as the answer: a ``kate-trajectory/1`` Trajectory, whose id is a hash of its turns;
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
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from kate.knowledge.embedder import Embedder
from kate.knowledge.entries import KnowledgeEntry
from kate.knowledge.index import IndexSpec
from kate.knowledge.st import st_entries
from kate.knowledge.store import MANIFEST, KnowledgeBase, check_embedding, write_lock
from kate.knowledge.trajectory import Trajectory, TrajectoryTurn
from kate.toolcall import ToolCall, canonical_json, from_openai_tool_calls
from kate.toolcall.expressible import call_expressible, function_of, schemas_by_name, value_fits

USE_PREFIX = "use:"  # entries from use carry source / written_by "use:<source>"


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


class Rejected(ValueError):
    """Internal: the conversation does not verify; the message is the reason."""


# --------------------------------------------------------------------------- messages -> trajectory
def _text(content: Any, where: str) -> str:
    """A message's text: a string, or the text parts of a content list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, Mapping) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise Rejected(f"{where}: content parts other than text ({part!r:.60}) cannot be learned")
            parts.append(part["text"])
        return "".join(parts)
    raise Rejected(f"{where}: content must be text or a list of text parts, got {type(content).__name__}")


def _schemas(tools: Any) -> dict[str, Mapping[str, Any] | None]:
    if not isinstance(tools, (list, tuple)):
        raise Rejected(f"tools must be a list of OpenAI tool schemas, got {type(tools).__name__}")
    for i, tool in enumerate(tools):
        function = function_of(tool) if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise Rejected(f"tools[{i}]: not an OpenAI tool schema (a function with a string name)")
        parameters = function.get("parameters")
        if isinstance(parameters, Mapping) and not isinstance(parameters.get("properties", {}), Mapping):
            raise Rejected(f"tools[{i}] ({function['name']}): 'properties' must be an object")
    return schemas_by_name(tools)


def why_unfit(call: ToolCall, schemas: Mapping[str, Mapping[str, Any] | None]) -> str | None:
    """Why ``call`` is not a call the offered tools can make (None: it is), by the rules of
    ``calls_expressible``."""
    if call.name not in schemas:
        return f"calls {call.name!r}, a tool not offered (offered: {sorted(schemas)})"
    parameters = schemas[call.name]
    if parameters is not None:
        properties = parameters.get("properties") or {}
        unknown = [key for key in call.arguments if key not in properties]
        if unknown:
            return f"{call.name}: {unknown} not among its parameters {sorted(properties)}"
        missing = [key for key in parameters.get("required") or [] if key not in call.arguments]
        if missing:
            return f"{call.name}: required parameter(s) {missing} missing"
        for key, value in call.arguments.items():
            schema = properties[key]
            if isinstance(schema, Mapping) and not value_fits(value, schema):
                return f"{call.name}: {key}={value!r:.60} is not of its declared type {schema.get('type')!r}"
    if not call_expressible(call.name, call.arguments, schemas):
        return f"{call.name}: does not fit the offered schema"
    return None


@dataclass
class _Turn:
    user: str
    calls: list[ToolCall] = field(default_factory=list)
    results: list[str | None] = field(default_factory=list)
    answer: str | None = None

    def frozen(self) -> TrajectoryTurn:
        results = None
        if any(r is not None for r in self.results):
            results = tuple(r if r is not None else "" for r in self.results)
        return TrajectoryTurn(self.user, tuple(self.calls), results, self.answer)


def _read_turns(messages: Any, schemas: Mapping[str, Mapping[str, Any] | None]) -> list[_Turn]:
    if not isinstance(messages, (list, tuple)) or not messages:
        raise Rejected("messages must be a non-empty list of chat messages")
    turns: list[_Turn] = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise Rejected(f"{where}: a chat message must be an object with a string 'role'")
        role = message["role"]
        if role in ("system", "developer"):
            continue
        if role == "user":
            turns.append(_Turn(_text(message.get("content"), where)))
            continue
        if not turns:
            raise Rejected(f"{where}: {role!r} message before the first user message")
        turn = turns[-1]
        if role == "assistant":
            parsed = from_openai_tool_calls(message.get("tool_calls"))
            if not parsed.ok:
                raise Rejected(f"{where}: {parsed.error}")
            for call in parsed.calls:
                reason = why_unfit(call, schemas)
                if reason is not None:
                    raise Rejected(f"{where}: {reason}")
            turn.calls += parsed.calls
            turn.results += [None] * len(parsed.calls)
            text = _text(message.get("content"), where).strip()
            if text and not parsed.calls:
                turn.answer = text
        elif role == "tool":
            turn.results[_answered(turn, message.get("tool_call_id"), where)] = _text(message.get("content"), where)
        else:
            raise Rejected(f"{where}: role {role!r} is not one of system, developer, user, assistant, tool")
    if not any(turn.user.strip() for turn in turns):
        raise Rejected("no user message with text: nothing to learn")
    return turns


def _answered(turn: _Turn, call_id: Any, where: str) -> int:
    """The position of the call a tool message answers: by its id, else the first unanswered one."""
    if call_id is not None:
        for position, call in enumerate(turn.calls):
            if call.call_id == call_id:
                if turn.results[position] is not None:
                    raise Rejected(f"{where}: a second result for call {call_id!r}")
                return position
        raise Rejected(f"{where}: tool_call_id {call_id!r} answers no call of this turn")
    for position, result in enumerate(turn.results):
        if result is None:
            return position
    raise Rejected(f"{where}: a tool result with no call left to answer")


def trajectory_from_messages(messages: Any, tools: Any, *, source: str = "serve",
                             api_classes: Sequence[str] = (),
                             tool_classes: Mapping[str, str] | None = None) -> Trajectory:
    """An OpenAI chat history (verified against ``tools``) as a Trajectory; ``Rejected`` with the
    reason when it does not verify."""
    schemas = _schemas(tools)
    turns = tuple(turn.frozen() for turn in _read_turns(messages, schemas))
    digest = hashlib.sha256(canonical_json([t.to_dict() for t in turns]).encode("utf-8")).hexdigest()
    return Trajectory(id=f"use-{digest[:16]}", tools=tuple(tools), turns=turns, source=f"{USE_PREFIX}{source}",
                      api_classes=tuple(api_classes), tool_classes=dict(tool_classes or {}))


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
