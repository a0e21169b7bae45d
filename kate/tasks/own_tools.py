"""The own-tools task: questions about a few plain Python tools a user might write, one user turn
each in a fresh ``PythonFunctionsEnv``, scored on (1) the right call and (2) the right final answer.

It measures a known weakness of small models on a user's own tools: the right call is made, and
then the turn never answers (the call again until the repeat policy ends the turn, or a refusal).

    task = OwnToolsTask(split="train")                   # even indices; "test": odd; "all"
    trace = task.solve(task.items()[0], policy, seed=0)  # one run_turn, JSON-able
    task.score(item, trace)    # {"valid", "call_ok", "answer_ok", "turn_end", ...}
    summarize(records)         # per split: n, right-call / right-answer shares, turn-end counts

Scoring reads only the trace. ``call_ok``: the set of parsed calls the turn made (kate's
``ToolCall``s, never text) equals the expected set, order-free, numbers compared by value and
string arguments in the form the tool reads them (case-insensitive units, element names or
symbols, currency codes), omitted arguments taking their defaults. ``answer_ok``: the turn ended
with a plain-text answer holding every expected value (a number within ``REL_TOL``, a string as a
whole word in any case; no values: any answer). Questions that need no call expect no call.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kate.agent.knowledge import KnowledgeContext
from kate.agent.policy import Policy
from kate.envs.python_functions import PythonFunctionsEnv
from kate.llm.base import Message
from kate.tasks.own_tools_data import ELEMENTS, QUESTIONS, RATES, TOOLS, UNITS, Answer, argument_form
from kate.tasks.step import MODEL_ERROR
from kate.toolcall import ToolCall

NAME = "own_tools"
SPLITS = ("train", "test", "all")
REL_TOL = 0.01  # a number in the answer matches within 1% (answers round: 6.21 miles for 6.21371)
CHECKER_VERSION = 1
TURN_ENDS = ("answered", "refusal", "empty", "repeat", "max_steps", "malformed", "finished", "error")
_REFUSAL = re.compile(r"\b(i'?m sorry|i am sorry|i apologi[sz]e|i can(?:'|no)?t (?:assist|help)|"
                      r"i cannot (?:assist|help)|unable to (?:assist|help))", re.IGNORECASE)  # fmt: skip
_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")


@dataclass(frozen=True, eq=False)
class OwnToolsItem:
    """One question: the tools offered, the expected calls and the values its answer must hold."""

    id: str
    index: int
    split: str
    question: str
    tools: tuple[str, ...]
    calls: tuple[tuple[str, dict[str, Any]], ...]
    answer: Answer
    category: str = NAME

    @property
    def kind(self) -> str:
        """``no_call``, ``one_call`` or ``two_calls``."""
        return ("no_call", "one_call", "two_calls")[min(len(self.calls), 2)]

    def expected_calls(self) -> list[ToolCall]:
        return [ToolCall(name, args) for name, args in self.calls]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "question": self.question, "tools": list(self.tools),
                "calls": [{"name": n, "arguments": a} for n, a in self.calls], "answer": list(self.answer)}  # fmt: skip


def split_of(index: int) -> str:
    """KATE's split, as for BFCL: even index -> train, odd -> test."""
    return "train" if index % 2 == 0 else "test"


def all_items() -> list[OwnToolsItem]:
    return [OwnToolsItem(f"{NAME}_{i:02d}", i, split_of(i), text, tuple(tools or TOOLS),
                         tuple((n, dict(a)) for n, a in calls), tuple(answer))
            for i, (text, calls, answer, tools) in enumerate(QUESTIONS)]  # fmt: skip


def load_items(split: str = "test", limit: int | None = None) -> list[OwnToolsItem]:
    """The split's questions in index order, the first ``limit`` of them."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    items = [it for it in all_items() if split == "all" or it.split == split]
    return items if limit is None else items[:limit]


def content_sha256() -> str:
    """A hash of what determines items and scoring: questions, tool schemas and source, tables."""
    env = PythonFunctionsEnv(list(TOOLS.values()))
    content = {"questions": [it.to_dict() for it in all_items()], "schemas": env.tools(),
               "source": [inspect.getsource(f) for f in TOOLS.values()], "units": UNITS,
               "elements": ELEMENTS, "rates": RATES, "checker": CHECKER_VERSION, "rel_tol": REL_TOL}  # fmt: skip
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------- the checkers


def _defaults(name: str) -> dict[str, Any]:
    function = TOOLS.get(name)
    if function is None:
        return {}
    params = inspect.signature(function).parameters.values()
    return {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}


def call_key(call: ToolCall) -> str:
    """The comparable form of a call: defaults filled in, each argument as the tool reads it."""
    arguments = {**_defaults(call.name), **dict(call.arguments)}
    forms = {k: argument_form(call.name, k, v) for k, v in arguments.items()}
    return f"{call.name}{json.dumps(forms, sort_keys=True, default=str)}"


def calls_match(made: Iterable[ToolCall], expected: Iterable[ToolCall]) -> bool:
    """The two call sets are equal (order-free, repeats of one call counted once)."""
    return {call_key(c) for c in made} == {call_key(c) for c in expected}


def numbers_in(text: str) -> list[float]:
    """Every number written in digits (``1,199.10`` -> 1199.1)."""
    out = []
    for match in _NUMBER.findall(text):
        try:
            out.append(float(match.replace(",", "")))
        except ValueError:
            continue
    return out


def value_in(value: float | str, text: str) -> bool:
    """A number within ``REL_TOL`` of one written in the text, or a string as a whole word (any case)."""
    if isinstance(value, str):
        return re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text, re.IGNORECASE) is not None
    return any(math.isclose(n, value, rel_tol=REL_TOL, abs_tol=1e-9) for n in numbers_in(text))


def answer_holds(answer: Answer, text: str) -> bool:
    return all(value_in(v, text) for v in answer)


def turn_end(trace: Mapping[str, Any]) -> str:
    """How the turn ended: answered / refusal / empty, or the loop's end (repeat, max_steps,
    malformed, finished), or error (the model failed, e.g. a prompt past its context)."""
    if trace.get("error_type") == MODEL_ERROR:
        return "error"
    reason = trace.get("end_reason")
    if reason != "answer":
        return str(reason)
    text = str(trace.get("answer") or "").strip()
    if not text:
        return "empty"
    return "refusal" if _REFUSAL.search(text) else "answered"


def made_calls(trace: Mapping[str, Any]) -> list[ToolCall]:
    """Every parsed call of the turn's steps (executed or refused as a repeat), in order."""
    return [ToolCall.from_dict(c) for step in trace.get("steps", []) for c in step.get("calls", [])]


# --------------------------------------------------------------------------- the task


@dataclass
class OwnToolsTask:
    """The task over one split (``train`` | ``test`` | ``all``), the first ``limit`` questions."""

    split: str = "test"
    limit: int | None = None
    name: str = NAME

    def __post_init__(self) -> None:
        self._items = load_items(self.split, self.limit)

    def items(self) -> Sequence[OwnToolsItem]:
        return self._items

    def describe(self) -> dict[str, Any]:
        return {"benchmark": NAME, "split": self.split, "limit": self.limit, "questions": len(QUESTIONS),
                "sha256": content_sha256(), "checker": CHECKER_VERSION}  # fmt: skip

    def solve(self, item: OwnToolsItem, policy: Policy, seed: int) -> dict[str, Any]:
        env = PythonFunctionsEnv([TOOLS[name] for name in item.tools])
        system = policy.settings.system_message
        messages: list[Message] = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": item.question})
        # one user turn: the single-turn retrieval settings apply (conf/retrieval/own_tools.yaml is this task's)
        context = KnowledgeContext("single_turn", api_classes=(), tools=tuple(env.tools()), exclude_ids=(item.id,))
        base = {"question": item.question, "tools": list(item.tools)}
        try:
            turn = policy.run_turn(env, messages, seed=seed, context=context)
        except ValueError as error:  # e.g. a prompt that does not fit the model's context
            return {**base, "error_type": MODEL_ERROR, "error": str(error), "steps": [], "calls": [],
                    "results": [], "answer": None, "end_reason": "error", "messages": messages}  # fmt: skip
        record = turn.to_dict(full_history=True)
        record.pop("state", None)
        results = [o.content for step in turn.steps if step.executed for o in step.observations]
        return {**base, **record, "results": results}

    def score(self, item: OwnToolsItem, trace: Mapping[str, Any]) -> dict[str, Any]:
        made = made_calls(trace)
        expected = item.expected_calls()
        end = turn_end(trace)
        call_ok = calls_match(made, expected)
        answered = trace.get("end_reason") == "answer" and bool(str(trace.get("answer") or "").strip())
        answer_ok = answered and answer_holds(item.answer, str(trace.get("answer")))
        score = {"valid": call_ok and answer_ok, "call_ok": call_ok, "answer_ok": answer_ok, "turn_end": end,
                 "calls_covered": {call_key(c) for c in expected} <= {call_key(c) for c in made},
                 "n_calls": len(made), "kind": item.kind, "split": item.split}  # fmt: skip
        if trace.get("error_type") == MODEL_ERROR:
            score.update(error_type=MODEL_ERROR, error=trace.get("error"))
        return score


def task_for_records(records: Sequence[Mapping[str, Any]]) -> OwnToolsTask:
    """A task holding every question (both halves), for re-scoring stored records."""
    return OwnToolsTask(split="all")


def summarize(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per split of the records (and ``all``): n, right-call / right-answer / both shares (and
    ``calls_covered``: the expected calls among those made, extras allowed), turn-end counts, and
    per question kind the same shares."""
    items = {it.id: it for it in all_items()}
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for record in records:
        groups[items[record["id"]].split].append(record)
        groups["all"].append(record)

    def shares(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        n = len(rows)
        return {"n": n, **{f"{k}_share": round(sum(bool(r.get(k)) for r in rows) / max(n, 1), 4)
                           for k in ("call_ok", "calls_covered", "answer_ok", "valid")}}  # fmt: skip

    out = {}
    for split, rows in sorted(groups.items()):
        kinds: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
        for r in rows:
            kinds[items[r["id"]].kind].append(r)
        out[split] = {**shares(rows), "turn_ends": dict(Counter(str(r.get("turn_end")) for r in rows)),
                      "per_kind": {k: shares(v) for k, v in sorted(kinds.items())}}  # fmt: skip
    return out
