"""Responses in OpenAI's shapes: a ``chat.completion``, and the same answer as a stream of
``chat.completion.chunk`` objects (vLLM's server is the reference for both).

Streaming follows the chunk contract standard clients accumulate: a first delta with the role, the
content in pieces, each tool call as a delta with its ``index`` whose first fragment carries
``id``, ``type`` and the function's name (arguments ``""``) and whose later fragments carry pieces
of the arguments string, a last delta with the ``finish_reason``, then (when asked with
``stream_options.include_usage``) a chunk with empty ``choices`` and the usage, then ``[DONE]``.
kate's vote needs every sample before it chooses, so the stream starts once the answer is settled.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

from kate.llm.base import Completion, TokenLogprob
from kate.toolcall import ToolCall
from kate.toolcall.call import to_json_value

PIECE_CHARS = 16  # characters of content or arguments per streamed delta


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def tool_call_dicts(calls: tuple[ToolCall, ...]) -> list[dict[str, Any]]:
    return [
        {"id": new_id("call_"), "type": "function",
         "function": {"name": c.name, "arguments": json.dumps(to_json_value(c.arguments), ensure_ascii=False)}}
        for c in calls
    ]  # fmt: skip


def _token_entry(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8"))}


def logprobs_dict(tokens: tuple[TokenLogprob, ...] | None) -> dict[str, Any] | None:
    if tokens is None:
        return None
    return {"content": [{**_token_entry(t.token, t.logprob),
                         "top_logprobs": [_token_entry(a, b) for a, b in t.top]} for t in tokens]}  # fmt: skip


def choice_dict(index: int, completion: Completion, calls: tuple[ToolCall, ...], text: str | None,
                with_logprobs: bool) -> dict[str, Any]:  # fmt: skip
    """One choice: the voted calls (content null then) or the text answer."""
    message: dict[str, Any] = {"role": "assistant", "content": None if calls else (text or "")}
    if calls:
        message["tool_calls"] = tool_call_dicts(calls)
        finish = "tool_calls"
    else:
        finish = "length" if completion.finish_reason == "length" else "stop"
    return {"index": index, "message": message,
            "logprobs": logprobs_dict(completion.logprobs) if with_logprobs else None,
            "finish_reason": finish}  # fmt: skip


def completion_dict(model: str, choices: list[dict[str, Any]], usage: dict[str, int],
                    kate: dict[str, Any] | None) -> dict[str, Any]:  # fmt: skip
    response: dict[str, Any] = {
        "id": new_id("chatcmpl-"), "object": "chat.completion", "created": _now(), "model": model,
        "choices": choices, "usage": usage, "system_fingerprint": None,
    }  # fmt: skip
    if kate is not None:
        response["kate"] = kate
    return response


def _now() -> int:
    import time

    return int(time.time())


def _pieces(text: str) -> list[str]:
    return [text[i : i + PIECE_CHARS] for i in range(0, len(text), PIECE_CHARS)] or [""]


def stream_chunks(response: dict[str, Any], *, include_usage: bool = False) -> Iterator[dict[str, Any]]:
    """``response`` (a ``chat.completion`` dict) as the chunks of its stream, ``[DONE]`` excluded."""
    head = {"id": response["id"], "object": "chat.completion.chunk", "created": response["created"],
            "model": response["model"], "system_fingerprint": None}  # fmt: skip
    extra = {"usage": None} if include_usage else {}

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None, logprobs: Any = None) -> dict[str, Any]:
        choice = {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
        return {**head, "choices": [choice], **extra}

    for choice in response["choices"]:
        index, message = choice["index"], choice["message"]
        yield chunk(index, {"role": "assistant", "content": ""})
        if message.get("content"):
            logprobs = choice.get("logprobs")
            for i, piece in enumerate(_pieces(message["content"])):
                yield chunk(index, {"content": piece}, logprobs=logprobs if i == 0 else None)
        for position, call in enumerate(message.get("tool_calls") or []):
            function = call["function"]
            yield chunk(index, {"tool_calls": [{"index": position, "id": call["id"], "type": "function",
                                                "function": {"name": function["name"], "arguments": ""}}]})  # fmt: skip
            for piece in _pieces(function["arguments"]):
                yield chunk(index, {"tool_calls": [{"index": position, "function": {"arguments": piece}}]})
        last = chunk(index, {}, choice["finish_reason"])
        if choice is response["choices"][-1] and not include_usage and "kate" in response:
            last["kate"] = response["kate"]
        yield last
    if include_usage:
        final = {**head, "choices": [], "usage": response["usage"]}
        if "kate" in response:
            final["kate"] = response["kate"]
        yield final
