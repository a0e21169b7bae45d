"""The agent loop, a multi-turn MDP: at each step the model emits tool calls or a final answer.

A turn: (optional) retrieved knowledge is appended inside the user message; then up to
``max_steps`` times the sampler acts. No calls -> the text is the answer and the turn ends.
Calls -> the assistant message (OpenAI ``tool_calls``) and one ``tool`` message per call are
appended. A malformed call is recorded and shown to the model as a user message, never a crash.

Repetition (the measured dominant failure of small models: the same call after every result
until the step cap): a step whose canonical call set equals an earlier executed step of the same
turn is a repeat, handled by ``repeat_policy`` for every sampler alike:

* ``"end_turn"``: the turn ends (``end_reason="repeat"``); the repeat is recorded, not executed.
* ``"warn"``: not executed again; each tool message says the call was already made, gives its
  earlier result, and invites an answer. A second repeat in the turn ends it.
* ``"off"``: repeats are executed like any call.
Under ``"end_turn"`` and ``"warn"`` a call repeated *within* one step runs once, and the same
malformed output twice in a turn ends it (``end_reason="repeat"``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kate.envs.base import Environment, Observation
from kate.llm.base import ChatModel, Message, ToolSchema, Usage
from kate.sampling.policy import Sampler
from kate.toolcall import ToolCall, canonical_call_set, to_openai_tool_calls

Retrieve = Callable[[str, list[Message]], "str | None"]
REPEAT_POLICIES = ("end_turn", "warn", "off")
END_REASONS = ("answer", "max_steps", "repeat")
MALFORMED_NOTE = (
    "Your last reply tried to call a tool, but the call could not be read ({error}). To call a tool, "
    'reply with a JSON object {{"name": <function name>, "arguments": {{...}}}} per call; otherwise '
    "answer the user directly."
)
REPEAT_NOTE = (
    "Not executed again: you already made this exact call earlier in this turn. Its result was:\n"
    "{result}\nIf you have what you need, answer the user now instead of calling a tool."
)


def _usage_dict(usage: Usage) -> dict[str, int]:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens}


def _add(a: Usage, b: Usage) -> Usage:
    return Usage(a.prompt_tokens + b.prompt_tokens, a.completion_tokens + b.completion_tokens)


@dataclass(frozen=True)
class StepRecord:
    """One step as recorded: what was chosen, the vote, what the environment said."""

    index: int
    calls: tuple[ToolCall, ...]
    text: str
    vote: dict[str, Any] | None
    observations: tuple[Observation, ...]
    usage: Usage
    executed: bool
    parse_error: str | None = None
    repeat_of: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "calls": [c.to_dict() for c in self.calls],
            "text": self.text,
            "vote": self.vote,
            "observations": [o.to_dict() for o in self.observations],
            "usage": _usage_dict(self.usage),
            "executed": self.executed,
            "parse_error": self.parse_error,
            "repeat_of": self.repeat_of,
        }


@dataclass(frozen=True)
class TurnResult:
    """One user turn: ``messages`` is the whole history after it; this turn starts at ``start``."""

    user: str
    knowledge: str | None
    steps: tuple[StepRecord, ...]
    answer: str | None
    end_reason: str
    messages: list[Message]
    start: int
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def calls(self) -> list[ToolCall]:
        """The calls executed in this turn, in order."""
        return [call for step in self.steps if step.executed for call in step.calls]

    @property
    def calls_per_turn(self) -> list[list[ToolCall]]:
        return [self.calls]

    @property
    def usage(self) -> Usage:
        total = Usage()
        for step in self.steps:
            total = _add(total, step.usage)
        return total

    def to_dict(self, full_history: bool = True) -> dict[str, Any]:
        """JSON-able; ``full_history=False`` keeps only this turn's messages."""
        return {
            "user": self.user,
            "knowledge": self.knowledge,
            "answer": self.answer,
            "end_reason": self.end_reason,
            "calls": [c.to_dict() for c in self.calls],
            "steps": [s.to_dict() for s in self.steps],
            "usage": _usage_dict(self.usage),
            "state": self.state,
            "messages": self.messages if full_history else self.messages[self.start:],
        }


@dataclass(frozen=True)
class DialogueResult:
    """All turns of one dialogue; ``messages`` is the final history."""

    turns: tuple[TurnResult, ...]
    messages: list[Message]

    @property
    def calls_per_turn(self) -> list[list[ToolCall]]:
        return [turn.calls for turn in self.turns]

    @property
    def state(self) -> dict[str, Any]:
        return self.turns[-1].state if self.turns else {}

    def to_dict(self) -> dict[str, Any]:
        usage = Usage()
        for turn in self.turns:
            usage = _add(usage, turn.usage)
        return {
            "messages": self.messages,
            "turns": [t.to_dict(full_history=False) for t in self.turns],
            "calls_per_turn": [[c.to_dict() for c in calls] for calls in self.calls_per_turn],
            "end_reasons": [t.end_reason for t in self.turns],
            "usage": _usage_dict(usage),
            "state": self.state,
        }


def _safe_execute(env: Environment, call: ToolCall) -> Observation:
    """``env.execute``; an environment that breaks its contract still cannot crash the loop."""
    try:
        return env.execute(call)
    except Exception as exc:  # noqa: BLE001
        return Observation.failure(f"the environment failed on {call.name}: {type(exc).__name__}: {exc}")


def _assistant(text: str, calls: tuple[ToolCall, ...]) -> Message:
    """The call text itself lives in ``tool_calls``; prose before Hermes tags stays as content."""
    prose = text.split("<tool_call>", 1)[0].strip() if "<tool_call>" in text else ""
    return {"role": "assistant", "content": prose, "tool_calls": to_openai_tool_calls(calls)}


def _tool_message(call: ToolCall, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call.call_id, "name": call.name, "content": content}


def _with_ids(calls: tuple[ToolCall, ...], prefix: str) -> tuple[ToolCall, ...]:
    return tuple(
        c if c.call_id else ToolCall(c.name, c.arguments, call_id=f"{prefix}_{j}") for j, c in enumerate(calls)
    )


def _earlier_results(calls: tuple[ToolCall, ...], earlier: tuple[ToolCall, ...],
                     observations: tuple[Observation, ...]) -> list[Observation]:
    """The earlier observation of each call (the sets are equal as multisets; order may differ)."""
    unused = list(zip(earlier, observations))
    out = []
    for call in calls:
        j = next(j for j, (e, _) in enumerate(unused) if e == call)
        out.append(unused.pop(j)[1])
    return out


def run_turn(
    model: ChatModel,
    env: Environment,
    messages: list[Message],
    sampler: Sampler,
    *,
    tools: list[ToolSchema] | None = None,
    max_steps: int = 20,
    repeat_policy: str = "warn",
    retrieve: Retrieve | None = None,
    seed: int = 0,
) -> TurnResult:
    """Run one user turn; ``messages`` ends with the user message and is not mutated.

    ``tools`` defaults to ``env.tools()``. ``retrieve(user_text, history_before)`` is called once;
    its text is appended inside the user message. Step ``i`` samples with ``seed + i``.
    """
    if repeat_policy not in REPEAT_POLICIES:
        raise ValueError(f"repeat_policy must be one of {REPEAT_POLICIES}, got {repeat_policy!r}")
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps!r}")
    if not messages or messages[-1].get("role") != "user":
        raise ValueError("run_turn needs a history that ends with a user message")
    history = [dict(m) for m in messages]
    start = len(history) - 1
    user_text = str(history[start].get("content") or "")
    knowledge = retrieve(user_text, [dict(m) for m in history[:start]]) if retrieve is not None else None
    if knowledge:
        history[start] = {**history[start], "content": f"{user_text}\n\n{knowledge}"}
    tools = env.tools() if tools is None else tools

    steps: list[StepRecord] = []
    seen: dict[tuple[str, ...], tuple[int, tuple[ToolCall, ...], tuple[Observation, ...]]] = {}
    malformed: dict[str, int] = {}  # raw text of malformed steps -> first step index
    repeats, answer, end_reason = 0, None, "max_steps"
    for i in range(max_steps):
        step = sampler.act(model, history, tools, seed=seed + i)
        vote = step.vote.to_dict() if step.vote is not None else None
        record = dict(index=i, text=step.text, vote=vote, usage=step.usage)
        if not step.calls:
            if step.parse_error is not None:
                first = malformed.get(step.text) if repeat_policy != "off" else None
                steps.append(StepRecord(**record, calls=(), observations=(), executed=False,
                                        parse_error=step.parse_error, repeat_of=first))
                if first is not None:  # the same broken output again: the model is stuck
                    end_reason = "repeat"
                    break
                malformed.setdefault(step.text, i)
                history.append({"role": "assistant", "content": step.text})
                history.append({"role": "user", "content": MALFORMED_NOTE.format(error=step.parse_error)})
                continue
            history.append({"role": "assistant", "content": step.text})
            steps.append(StepRecord(**record, calls=(), observations=(), executed=False))
            answer, end_reason = step.text, "answer"
            break
        unique = tuple(dict.fromkeys(step.calls)) if repeat_policy != "off" else tuple(step.calls)
        calls = _with_ids(unique, f"call_{len(history)}")
        key = canonical_call_set(calls)
        earlier = seen.get(key) if repeat_policy != "off" else None
        if earlier is not None:
            first, earlier_calls, earlier_obs = earlier
            repeats += 1
            steps.append(StepRecord(**record, calls=calls, observations=(), executed=False, repeat_of=first))
            if repeat_policy == "end_turn" or repeats > 1:
                end_reason = "repeat"
                break
            history.append(_assistant(step.text, calls))
            for call, obs in zip(calls, _earlier_results(calls, earlier_calls, earlier_obs)):
                history.append(_tool_message(call, REPEAT_NOTE.format(result=obs.content)))
            continue
        observations = tuple(_safe_execute(env, call) for call in calls)
        history.append(_assistant(step.text, calls))
        history.extend(_tool_message(call, obs.content) for call, obs in zip(calls, observations))
        seen.setdefault(key, (i, calls, observations))
        steps.append(StepRecord(**record, calls=calls, observations=observations, executed=True))
    return TurnResult(user_text, knowledge or None, tuple(steps), answer, end_reason, history, start, env.state())


def run_dialogue(
    model: ChatModel,
    env: Environment,
    user_turns: Sequence[str | Message],
    sampler: Sampler,
    *,
    system_prompt: str | None = None,
    tools: list[ToolSchema] | None = None,
    max_steps: int = 20,
    repeat_policy: str = "warn",
    retrieve: Retrieve | None = None,
    seed: int = 0,
) -> DialogueResult:
    """Run the user turns in order; each continues the same history. Turn ``t`` seeds from
    ``seed + t * max_steps``."""
    history: list[Message] = [{"role": "system", "content": system_prompt}] if system_prompt else []
    turns: list[TurnResult] = []
    for t, user in enumerate(user_turns):
        message = {"role": "user", "content": user} if isinstance(user, str) else dict(user)
        turn = run_turn(model, env, [*history, message], sampler, tools=tools, max_steps=max_steps,
                        repeat_policy=repeat_policy, retrieve=retrieve, seed=seed + t * max_steps)
        turns.append(turn)
        history = turn.messages
    return DialogueResult(tuple(turns), history)
