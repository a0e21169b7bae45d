"""The served turn's end: a chosen call that repeats, or feeds back, a call the request's history
already made since its last user message is answered instead, the way the loop's
``repeat_policy=answer`` with ``repeat_match=fed`` does (``kate.agent.turn_end``).

A server sees one step of a turn that the client's own loop runs. After a call and its result, a
small model often writes the same call again, or the same call with the result put in place of
an argument, and a client loop that runs what it gets never receives an answer. So when every call
of the chosen step repeats or feeds an executed call of the current turn (``fed_sources``), the
server asks the model once, greedily, for a plain answer whose first words are
``LoopSettings.answer_prefill`` ("Based on the result, "), and returns that answer instead of the
calls. The response's ``kate.turn_end`` says so, per choice, with the calls it replaced. A reply
that is no call as a whole but starts with one (the same call written several times, as bare JSON
objects one after another) is read by its first call for this (``first_call_only``).

It applies only where the engine takes ``prefill=`` (llama.cpp, hf, the fake model with that
option) and the request does not force a call (``tool_choice`` required or a named function) or
forbid one; a remote engine behind ``kate.serve.wrap`` passes the step through unchanged.
"""

from __future__ import annotations

from typing import Any

from kate.agent.settings import ANSWER_PREFILL
from kate.agent.turn_end import Executed, ask_answer, fed_sources
from kate.envs.base import Observation
from kate.llm.base import ChatModel, Completion, Message, ToolSchema, supports
from kate.toolcall import ToolCall, from_openai_tool_calls


def executed_this_turn(messages: list[Message]) -> list[Executed]:
    """The calls the history made after its last user message, each with its tool result (paired by
    ``tool_call_id``, else in order); a call without a result is left out."""
    last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    pending: list[tuple[str | None, int, ToolCall]] = []
    executed: list[Executed] = []
    for index, message in enumerate(messages[last_user + 1:]):
        if message.get("role") == "assistant" and message.get("tool_calls"):
            calls = from_openai_tool_calls(message["tool_calls"]).calls
            ids = [c.get("id") for c in message["tool_calls"]]
            pending += [(ids[k] if k < len(ids) else None, index, call) for k, call in enumerate(calls)]
        elif message.get("role") == "tool" and pending:
            wanted = message.get("tool_call_id")
            k = next((k for k, p in enumerate(pending) if wanted is not None and p[0] == wanted), 0)
            _, step, call = pending.pop(k)
            executed.append((step, call, Observation(str(message.get("content") or ""))))
    return executed


def answer_instead(model: ChatModel, messages: list[Message], tools: list[ToolSchema] | None,
                   calls: tuple[ToolCall, ...], *,
                   seed: int, max_tokens: int, prefill: str = ANSWER_PREFILL) -> tuple[Completion, dict[str, Any]] | None:
    """The asked answer (a completion without calls) and its report when ``calls`` all repeat
    or feed executed calls of this turn and the model can be asked (``prefill``); None: keep the step
    as it is (also when the asked reply is still a call or unreadable)."""
    if not calls or not supports(model, "prefill"):
        return None
    executed = executed_this_turn(messages)
    if not executed or fed_sources(calls, executed) is None:
        return None
    record, answer = ask_answer(model, list(messages), tools, prefill=prefill, index=0, seed=seed,
                                max_tokens=max_tokens)  # fmt: skip
    if answer is None:
        return None
    replaced = [{"name": c.name, "arguments": dict(c.arguments)} for c in calls]
    return Completion(answer, finish_reason="stop", usage=record.usage), {"reason": "the calls repeat or feed calls this turn already made", "replaced": replaced,
                    "prefill": prefill}  # fmt: skip
