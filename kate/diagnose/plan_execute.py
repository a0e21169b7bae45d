"""Plan vs execute (seed 000's idea): does the model do what it says it will?

Two requests per item, in fresh contexts. First the *plan*: the item's question with the offered
tools described in text (not offered as tools, so that the reply is a statement, not a call) and a
fixed instruction to answer with one JSON object::

    {"call": true, "tool": "calculator", "arguments": {"expression": "3 * 4"}}
    {"call": false, "tool": null, "arguments": {}}

parsed strictly (``parse_plan``: the whole reply is that object, at most inside one ```json fence;
``call`` a boolean, ``tool`` an offered tool's name when calling and null otherwise, ``arguments``
an object; nothing else). An unparseable plan is a recorded failure (``plan_error``), never a crash.
Then the *execution*: the acting task solves the item as it always does (``VerifiableTask`` or
``BFCLDecisionTask``), so "called" is its parsed call; given the breakdown's records of that same
solve (``executions``), the execution is read from them, not generated again (``kate.diagnose.acted``).

``plan_execute_summary`` compares both with necessity: plan accuracy (the plan calls exactly when
a tool is needed), execution accuracy (the model calls exactly then), the gap between them, and how
often the execution follows the plan.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kate.agent.policy import Policy
from kate.diagnose.acted import acted_runs, acted_sha256
from kate.llm.base import Message, ToolSchema

PLAN_INSTRUCTION = (
    "Do not solve the task yet. First state your plan: will you call one of the tools below, which "
    "one, and with what arguments? Reply with exactly one JSON object and nothing else, of the form "
    '{"call": true, "tool": "<tool name>", "arguments": {...}} if you will call a tool, or '
    '{"call": false, "tool": null, "arguments": {}} if you will answer without one.\n\nTools:\n'
)
# The same instruction with the two reply forms the other way round: the control for a model that
# copies whichever form it was shown last (a small model's plans can follow the form shown last
# while it then calls anyway).
PLAN_INSTRUCTION_NO_CALL_FIRST = (
    "Do not solve the task yet. First state your plan: will you call one of the tools below, which "
    "one, and with what arguments? Reply with exactly one JSON object and nothing else, of the form "
    '{"call": false, "tool": null, "arguments": {}} if you will answer without one, or '
    '{"call": true, "tool": "<tool name>", "arguments": {...}} if you will call a tool.\n\nTools:\n'
)
PLAN_INSTRUCTIONS = {"call_first": PLAN_INSTRUCTION, "no_call_first": PLAN_INSTRUCTION_NO_CALL_FIRST}
NO_TOOLS = "(none)"
PLAN_KEYS = ("call", "tool", "arguments")
_FENCE = re.compile(r"\A```(?:json)?\s*\n?(.*?)\n?\s*```\Z", re.DOTALL)


@dataclass(frozen=True)
class Plan:
    """A parsed plan: whether the model will call, which tool, with what arguments."""

    call: bool
    tool: str | None
    arguments: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"call": self.call, "tool": self.tool, "arguments": self.arguments}


class PlanError(ValueError):
    """The reply is not a plan object; the message says what is wrong."""


def _tool_name(tool: Mapping[str, Any]) -> str:
    return str(tool.get("function", tool).get("name"))


def parse_plan(text: str | None, tool_names: Sequence[str]) -> Plan:
    """The plan in a reply (see the module docstring); ``PlanError`` for anything else."""
    body = (text or "").strip()
    fenced = _FENCE.match(body)
    body = fenced.group(1).strip() if fenced else body
    if not body:
        raise PlanError("the reply is empty")
    try:
        obj = json.loads(body)
    except ValueError as exc:
        raise PlanError(f"the reply is not one JSON object ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise PlanError(f"the plan must be a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - set(PLAN_KEYS))
    if unknown:
        raise PlanError(f"unknown plan field(s) {unknown}; a plan has {list(PLAN_KEYS)}")
    call, tool, arguments = obj.get("call"), obj.get("tool"), obj.get("arguments", {})
    if not isinstance(call, bool):
        raise PlanError(f"plan field 'call' must be true or false, got {call!r}")
    if not isinstance(arguments, dict):
        raise PlanError(f"plan field 'arguments' must be an object, got {type(arguments).__name__}")
    if call:
        if not isinstance(tool, str) or tool not in tool_names:
            raise PlanError(f"plan field 'tool' must name an offered tool ({list(tool_names)}), got {tool!r}")
    elif tool is not None or arguments:
        raise PlanError("a plan that does not call must have 'tool': null and no arguments")
    return Plan(call, tool, dict(arguments))


def plan_prompt(messages: Sequence[Message], tools: Sequence[ToolSchema] | None,
                instruction: str = PLAN_INSTRUCTION) -> list[Message]:  # fmt: skip
    """The plan request: the item's messages, the last user turn followed by the instruction and the
    tools' schemas as JSON (one per line)."""
    described = "\n".join(json.dumps(t.get("function", t), ensure_ascii=False) for t in tools or ()) or NO_TOOLS
    out = [dict(m) for m in messages]
    out[-1] = {**out[-1], "content": f"{out[-1].get('content') or ''}\n\n{instruction}{described}"}
    return out


@dataclass
class PlanExecuteTask:
    """The plan request, then the acting task's own solve in a fresh context; records both."""

    acting: Any  # a task with prompt(item), necessary(item), solve, score (VerifiableTask, BFCLDecisionTask)
    name: str = "plan"
    max_tokens: int = field(default=256)
    instruction: str = PLAN_INSTRUCTION
    executions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # item id -> its acted record

    def __post_init__(self) -> None:
        self.executions = acted_runs(self.executions)

    def items(self) -> Sequence[Any]:
        return self.acting.items()

    def describe(self) -> dict[str, Any]:
        out = {**self.acting.describe(), "diagnostic": "plan", "plan_instruction": self.instruction,
               "plan_max_tokens": self.max_tokens}  # fmt: skip
        if self.executions:
            out["executions_sha256"] = acted_sha256(self.executions, [i.id for i in self.items()])
        return out

    def data(self) -> Any:
        data = getattr(self.acting, "data", None)
        return data() if callable(data) else None

    def solve(self, item: Any, policy: Policy, seed: int) -> dict[str, Any]:
        messages, tools = self.acting.prompt(item)
        plan: dict[str, Any] = {"text": None, "plan": None, "error": None}
        try:
            reply = policy.model.chat(plan_prompt(messages, tools, self.instruction), None, n=1, temperature=0.0,
                                      max_tokens=self.max_tokens, seed=seed)[0]  # fmt: skip
            plan["text"] = reply.text
            plan["plan"] = parse_plan(reply.text, [_tool_name(t) for t in tools or ()]).to_dict()
        except PlanError as error:
            plan["error"] = str(error)
        except ValueError as error:  # the prompt does not fit: a recorded failure
            plan["error"] = f"model error: {error}"
        if item.id in self.executions:
            execution = {**self.executions[item.id], "from": "breakdown"}
        else:
            execution = self.acting.solve(item, policy, seed)
        return {**execution, "plan_request": plan}

    def score(self, item: Any, trace: Mapping[str, Any]) -> dict[str, Any]:
        score = dict(self.acting.score(item, trace))
        plan = (trace.get("plan_request") or {}).get("plan")
        called = bool(trace.get("called"))
        score.update(plan_ok=plan is not None, plan_call=None if plan is None else plan["call"], called=called,
                     necessary=self.acting.necessary(item),
                     followed=plan is not None and plan["call"] == called)  # fmt: skip
        return score


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def plan_execute_summary(records: Sequence[Mapping[str, Any]], necessary: Mapping[str, bool]) -> dict[str, Any]:
    """Plan and execution accuracy against necessity (over every record: an unparseable plan is
    wrong), the gap (plan - execution), how often the execution followed a parsed plan, and the
    plan's own four classes."""
    missing = [r["id"] for r in records if r["id"] not in necessary]
    if missing:
        raise ValueError(f"{len(missing)} plan records have no necessity label, e.g. {missing[:3]}")
    n = len(records)
    parsed = [r for r in records if r.get("plan_ok")]
    plan_right = sum(bool(r.get("plan_ok")) and r["plan_call"] == necessary[r["id"]] for r in records)
    exec_right = sum(bool(r.get("called")) == necessary[r["id"]] for r in records)
    followed = sum(r["plan_call"] == bool(r.get("called")) for r in parsed)
    plan_acc, exec_acc = _rate(plan_right, n), _rate(exec_right, n)
    return {
        "n": n, "plans_parsed": len(parsed), "plan_parse_rate": _rate(len(parsed), n),
        "plan_accuracy": plan_acc, "execution_accuracy": exec_acc,
        "gap": None if plan_acc is None or exec_acc is None else plan_acc - exec_acc,
        "followed": followed, "follow_rate": _rate(followed, len(parsed)),
        "plan_says_call": sum(bool(r["plan_call"]) for r in parsed),
        "called": sum(bool(r.get("called")) for r in records),
        "said_call_did_not": sum(r["plan_call"] and not r.get("called") for r in parsed),
        "said_no_call_called": sum(not r["plan_call"] and bool(r.get("called")) for r in parsed),
    }  # fmt: skip
