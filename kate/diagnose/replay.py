"""Verbatim replay (VectraYX's first rung): held-out rows whose right answer is known, replayed
greedily; does the model emit a valid call, in format as well as in content?

A row is a prompt (messages and tools) with its target: the ground-truth calls, or a plain answer
(a step that must call nothing). Rows come from

* BFCL single-turn entries with ground-truth calls (``bfcl_replay_rows``; KATE's test half by
  default), scored by bfcl-eval's official checker, or
* a training dataset's rows (``dataset_replay_rows``): JSONL, one object a line, either
  ``{"messages": [...], "tools": [...], "target": ...}`` where ``target`` is a list of calls
  (``{"name", "arguments"}`` or OpenAI tool calls), an assistant message (with ``tool_calls`` or
  plain ``content``) or a string (a plain answer); or TRL's conversational
  ``{"prompt": [...], "completion": [assistant message], "tools": [...]}``. Calls are scored as a
  canonical call set (order and key order never matter, ``1 == 1.0``).

Each record says ``format`` (``call``: parsed as calls; ``malformed``: a call attempt that did not
parse; ``prose``: no call), ``format_valid`` (the format the target wants), ``valid`` (format and
content right) and, beside it, the lenient keyword harness's verdict on the same output
(``keyword``), so a summary shows how much a keyword scorer would have credited.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kate.agent.policy import Policy
from kate.bfcl.answers import first_possible_answer
from kate.bfcl.checkers import RELEVANCE, score_single_turn
from kate.bfcl.data import BFCL_VERSION, SINGLE_TURN, BFCLEntry, data_sha256, load_entries
from kate.diagnose.keyword import keyword_verdict, tool_names
from kate.llm.base import Message, ToolSchema
from kate.tasks.bfcl import knowledge_context
from kate.tasks.step import MODEL_ERROR, step_trace
from kate.toolcall import ToolCall, canonical_call_set
from kate.toolcall.call import canonical_json

REPLAY_CATEGORIES = tuple(c for c in SINGLE_TURN if c not in RELEVANCE)  # the ones with ground-truth calls


@dataclass(frozen=True)
class ReplayRow:
    """One prompt with a known right answer: ``target_calls`` (empty: a plain answer is due)."""

    id: str
    category: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSchema, ...] = ()
    target_calls: tuple[ToolCall, ...] = ()
    target_text: str | None = None  # the plain answer of a no-call row, when the data has it
    entry: BFCLEntry | None = field(default=None, repr=False)  # BFCL rows: scored by the official checker

    @property
    def expects_call(self) -> bool:
        return bool(self.target_calls)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "category": self.category, "messages": list(self.messages), "tools": list(self.tools),
                "target_calls": [c.to_dict() for c in self.target_calls], "target_text": self.target_text}  # fmt: skip


def bfcl_replay_rows(categories: Sequence[str] = ("simple_python", "multiple", "parallel", "parallel_multiple"),
                     split: str = "test", limit: int | None = None) -> list[ReplayRow]:  # fmt: skip
    """BFCL single-turn entries with their ground truth (``limit`` per category, index order)."""
    rows = []
    for category in categories:
        if category not in REPLAY_CATEGORIES:
            raise ValueError(f"replay needs ground-truth calls; {category!r} is not one of {REPLAY_CATEGORIES}")
        for entry in load_entries(category, split, limit):
            rows.append(ReplayRow(entry.id, category, tuple(dict(m) for m in entry.turns[0]), tuple(entry.tools),
                                  tuple(first_possible_answer(entry)), entry=entry))  # fmt: skip
    return rows


def _target(row: Mapping[str, Any], where: str) -> tuple[tuple[ToolCall, ...], str | None]:
    target = row["target"] if "target" in row else row.get("completion")
    if isinstance(target, list) and target and all(isinstance(m, Mapping) and "role" in m for m in target):
        target = target[-1]  # TRL conversational completion: the assistant message
    if isinstance(target, str):
        return (), target
    if isinstance(target, Mapping) and "role" in target:
        if target.get("role") != "assistant":
            raise ValueError(f"{where}: target message must be an assistant message, got role {target.get('role')!r}")
        calls = target.get("tool_calls") or []
        if not calls:
            return (), str(target.get("content") or "")
        target = calls
    if isinstance(target, Mapping):
        target = [target]
    if not isinstance(target, list):
        raise ValueError(f"{where}: 'target' must be a list of calls, an assistant message or a string")
    try:
        return tuple(ToolCall.from_dict(c) for c in target), None
    except ValueError as error:
        raise ValueError(f"{where}: 'target' holds an unreadable call: {error}") from None


def dataset_replay_rows(path: str | Path, *, limit: int | None = None, seed: int = 0,
                        category: str = "dataset") -> list[ReplayRow]:  # fmt: skip
    """Rows of a training dataset's JSONL (the formats in the module docstring); ``limit`` rows
    drawn with ``seed`` (in file order), all when ``None``. Bad rows raise naming file and line."""
    path = Path(path)
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
        except ValueError as error:
            raise ValueError(f"{where}: not JSON ({error})") from None
        if not isinstance(row, Mapping):
            raise ValueError(f"{where}: a row must be an object")
        messages = row.get("messages", row.get("prompt"))
        if not isinstance(messages, list) or not messages or not all(isinstance(m, Mapping) for m in messages):
            raise ValueError(f"{where}: 'messages' (or 'prompt') must be a non-empty list of messages")
        if "target" not in row and "completion" not in row:
            raise ValueError(f"{where}: a row needs 'target' (or 'completion')")
        tools = row.get("tools") or []
        if isinstance(tools, str):  # a datasets column may hold the tools as JSON text
            tools = json.loads(tools)
        if not isinstance(tools, list):
            raise ValueError(f"{where}: 'tools' must be a list of tool schemas")
        calls, text = _target(row, where)
        rows.append(ReplayRow(str(row.get("id", f"{path.stem}:{number}")), str(row.get("category", category)),
                              tuple(dict(m) for m in messages), tuple(tools), calls, text))  # fmt: skip
    if len({r.id for r in rows}) != len(rows):
        raise ValueError(f"{path}: row ids must be unique")
    if limit is not None and limit < len(rows):
        keep = set(random.Random(seed).sample(range(len(rows)), limit))
        rows = [r for i, r in enumerate(rows) if i in keep]
    return rows


def output_format(calls: Sequence[Any], parse_error: str | None) -> str:
    """``call`` (parsed calls), ``malformed`` (a call attempt that did not parse) or ``prose``."""
    return "call" if calls else ("malformed" if parse_error is not None else "prose")


@dataclass
class ReplayTask:
    """Replay rows through the policy (its sampler; greedy by default), one step each."""

    rows: Sequence[ReplayRow]
    name: str = "replay"
    origin: Mapping[str, Any] = field(default_factory=dict)  # e.g. {"source": "bfcl", "split": "test"}

    def __post_init__(self) -> None:
        ids = [r.id for r in self.rows]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{self.name}: row ids must be unique")

    def items(self) -> Sequence[ReplayRow]:
        return self.rows

    def describe(self) -> dict[str, Any]:
        rows = json.dumps([r.to_dict() for r in self.rows], sort_keys=True, ensure_ascii=False, default=str)
        digest = hashlib.sha256(rows.encode("utf-8")).hexdigest()
        return {"diagnostic": "replay", "bfcl_eval": BFCL_VERSION, "rows_sha256": digest, **dict(self.origin)}

    def data(self) -> dict[str, Any]:
        return {c: data_sha256((c,)) for c in sorted({r.entry.category for r in self.rows if r.entry is not None})}

    def solve(self, row: ReplayRow, policy: Policy, seed: int) -> dict[str, Any]:
        context = knowledge_context(row.entry) if row.entry is not None else None
        tools = list(row.tools) or None
        return step_trace(policy, [dict(m) for m in row.messages], tools, seed=seed, context=context)

    def score(self, row: ReplayRow, trace: Mapping[str, Any]) -> dict[str, Any]:
        text = (trace.get("outputs") or [""])[0] if not trace.get("vote") else _chosen(trace)
        keyword = keyword_verdict(text, tool_names(row.tools), row.expects_call)
        if trace.get("error_type") == MODEL_ERROR:
            return {"valid": False, "format": None, "format_valid": False, "keyword": False,
                    "error_type": MODEL_ERROR, "error": trace.get("error")}  # fmt: skip
        calls = [ToolCall.from_dict(c) for c in trace.get("calls") or []]
        fmt = output_format(calls, trace.get("parse_error"))
        format_valid = fmt == ("call" if row.expects_call else "prose")
        if row.entry is not None:
            official = score_single_turn(row.entry, calls, trace.get("parse_error"))
            valid, error_type, error = official["valid"], official["error_type"], official["error"]
        elif row.expects_call:
            valid = format_valid and canonical_call_set(calls) == canonical_call_set(row.target_calls)
            error_type = None if valid else {"call": "replay:wrong_calls", "malformed": "kate:malformed_call",
                                              "prose": "kate:no_call"}[fmt]  # fmt: skip
            error = None if valid else f"expected {[canonical_json(c.to_dict()) for c in row.target_calls]}"
        else:
            valid = format_valid
            kind = "replay:call_made" if fmt == "call" else "kate:malformed_call"
            error_type, error = (None, None) if valid else (kind, trace.get("parse_error"))
        return {"valid": bool(valid and format_valid), "format": fmt, "format_valid": format_valid,
                "keyword": keyword.credited, "error_type": error_type, "error": error}  # fmt: skip


def _chosen(trace: Mapping[str, Any]) -> str:
    vote, outputs = trace["vote"], trace.get("outputs") or [""]
    samples = (vote.get("chosen") or {}).get("samples") if isinstance(vote, Mapping) else None
    return outputs[samples[0]] if samples else outputs[0]


def replay_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per category and in all: n, the share with the right format, strictly valid, keyword-credited,
    and the formats seen (call / malformed / prose)."""

    def block(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        n = len(rows)
        formats: dict[str, int] = {}
        for r in rows:
            formats[str(r.get("format"))] = formats.get(str(r.get("format")), 0) + 1
        rate = lambda key: sum(bool(r.get(key)) for r in rows) / n if n else None  # noqa: E731
        return {"n": n, "format_valid": rate("format_valid"), "valid": rate("valid"), "keyword": rate("keyword"),
                "formats": dict(sorted(formats.items()))}  # fmt: skip

    categories = sorted({r["category"] for r in records})
    return {"all": block(records), "per_category": {c: block([r for r in records if r["category"] == c])
                                                   for c in categories}}  # fmt: skip
