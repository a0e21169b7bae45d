"""How a turn ends when the model does not end it: results fed back into the same call, and the
answer the loop asks for.

After a correct call and its result, a small model often writes the call again (an exact repeat) or
the same call with the result in place of an argument (``convert_currency(amount=100, ...)`` ->
92.0, then ``convert_currency(amount=92, ...)``: the result *fed* back), until the repeat policy or
the step cap ends the turn without an answer. Presenting the result otherwise does not make it
answer; an answer whose first words are given (``prefill``, e.g. "Based on the result, ") does
(the measurements: ``bench/results/turn_end_prefills.json`` and the own-tools results). So:

* ``repeat_match="fed"`` counts a fed call as a repeat (``fed_sources``);
* ``repeat_policy="answer"`` answers a repeat by asking for the answer, prefilled
  (``ask_answer``); ``answer_at_max_steps`` does the same once at the step cap.

In dialogues a model may instead end a turn by answering with the tool result itself (``None``
after ``mkdir``; ``<tool_response>{"error": ...}</tool_response>``), and later turns copy that
answer instead of calling. ``echo_policy="answer"`` does not keep such a reply (``echoes_result``)
and asks for the answer, prefilled; since the asked answer can be copied by later turns in its
place, an echo also counts a copy of an earlier answer. ``echo_policy="act"`` asks a turn that has
made no call yet for a call (``ask_call``, the reply starting with the start of a call,
``call_prefill``); after a call it asks for the answer. An empty reply is no answer either
(``no_answer``).

The answer step is greedy whatever the sampler (there is no call to vote on) and is recorded like
any step, with the prefill it started from.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from kate.agent.records import StepRecord
from kate.envs.base import Observation
from kate.llm.base import ChatModel, Message, ToolSchema, supports
from kate.sampling.policy import Step, first_call_only
from kate.toolcall import ToolCall

_TOOL_RESPONSE_TAGS = re.compile(r"</?tool_response>")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
Executed = tuple[int, ToolCall, Observation]  # (step index, call, its observation)


def _numbers(text: str) -> list[float]:
    return [float(m) for m in _NUMBER.findall(text.replace(",", ""))]


def _holds(value: object, observation: Observation) -> bool:
    """Whether an argument value is taken from a result: a number written in it, or its whole text."""
    content = str(observation.content or "")
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return any(math.isclose(float(value), n, rel_tol=1e-6, abs_tol=1e-9) for n in _numbers(content))
    if isinstance(value, str):
        return bool(value.strip()) and value.strip() == content.strip()
    return False


def fed_from(call: ToolCall, executed: Sequence[Executed]) -> Executed | None:
    """The earlier call of the turn that ``call`` repeats exactly, or feeds: the same function,
    every changed argument holding a value of that call's result. None: a new call."""
    for entry in executed:
        _, earlier, observation = entry
        if earlier.name != call.name:
            continue
        new, old = dict(call.arguments), dict(earlier.arguments)
        changed = [k for k in new.keys() | old.keys() if new.get(k, ...) != old.get(k, ...)]
        if all(k in new and _holds(new[k], observation) for k in changed):
            return entry
    return None


def fed_sources(calls: Sequence[ToolCall], executed: Sequence[Executed]) -> list[Executed] | None:
    """For a step's calls, the earlier call each repeats or feeds; None when any call is new."""
    sources = [fed_from(call, executed) for call in calls]
    return None if any(s is None for s in sources) else sources  # type: ignore[return-value]


def check_answers_supported(model: ChatModel) -> None:
    """The loop's asked answers start with a prefill: refuse a client that cannot take one. A
    ``TypeError``, not a ``ValueError``: tasks record those item by item as model errors, and loop
    settings the client cannot honour should stop the run."""
    if not supports(model, "prefill"):
        name = getattr(model, "name", type(model).__name__)
        raise TypeError(
            f"repeat_policy=answer / answer_at_max_steps ask for an answer that starts with answer_prefill, and "
            f"llm {name!r} does not take prefill= (use llamacpp, hf, or the fake model with options=[prefill])"
        )


def ask_answer(model: ChatModel, history: list[Message], tools: list[ToolSchema] | None, *, prefill: str,
               index: int, seed: int, max_tokens: int) -> tuple[StepRecord, str | None]:
    """One greedy step whose reply starts with ``prefill``: the record, and the answer (None when
    the reply is still a call or unreadable: then the turn ends without one)."""
    completion = model.chat(history, tools, n=1, temperature=0.0, max_tokens=max_tokens, seed=seed,
                            prefill=prefill)[0]  # type: ignore[call-arg]
    answered = not completion.tool_calls and completion.parse_error is None and bool(completion.text.strip())
    record = StepRecord(index=index, calls=tuple(completion.tool_calls), text=completion.text, vote=None,
                        observations=(), usage=completion.usage, executed=False,
                        parse_error=completion.parse_error, prefill=prefill)  # fmt: skip
    return record, (completion.text if answered else None)


def _earlier_text(message: Message) -> str | None:
    """A tool result's text, or a plain answer's (an assistant message without calls); else None."""
    if message.get("role") == "tool" or (message.get("role") == "assistant" and not message.get("tool_calls")):
        return str(message.get("content") or "").strip() or None
    return None


def echoes_result(text: str, history: Sequence[Message]) -> bool:
    """Whether a reply without calls writes again a tool result or an earlier answer of the dialogue:
    the same text as some tool message or plain assistant answer of ``history`` (spaces and
    ``<tool_response>`` tags aside), or a text wrapped in ``<tool_response>`` tags (a result the model
    made up is no answer either)."""
    wrapped = "<tool_response>" in text
    reply = _TOOL_RESPONSE_TAGS.sub("", text).strip()
    return wrapped or (bool(reply) and any(_earlier_text(m) == reply for m in history))


def no_answer(text: str, history: Sequence[Message]) -> bool:
    """Whether a reply without calls is no answer at all: empty, or an echo (``echoes_result``)."""
    return not text.strip() or echoes_result(text, history)


def ask_call(model: ChatModel, history: list[Message], tools: list[ToolSchema] | None, *, prefill: str,
             seed: int, max_tokens: int, one_call: bool) -> Step:
    """One greedy step whose reply starts with ``prefill`` (the start of a call): the step as a sampler
    would return it (no vote), its text including the prefill."""
    completion = model.chat(history, tools, n=1, temperature=0.0, max_tokens=max_tokens, seed=seed,
                            prefill=prefill)[0]  # type: ignore[call-arg]
    if one_call:
        completion = first_call_only(completion, getattr(model, "formats", None))
    return Step(completion.tool_calls, completion.text, (completion,), None, completion.usage, completion.parse_error)
