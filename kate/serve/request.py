"""A chat-completions request, read and checked the way vLLM's OpenAI server honours the contract.

``read_request(body, limits)`` turns the JSON body into a ``ChatRequest`` or raises ``APIError``
(400 for an invalid field or combination, naming the field as ``param``; 413 past the message
limits). Fields a client may send that kate does not act on (``user``, ``metadata``, penalties,
...) are accepted and ignored, as OpenAI-compatible servers do. kate's own knobs come in one extra
field, ``kate`` (``KateOptions``); an unknown key there is a 400, so a typo never passes silently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kate.sampling.vote import AGGREGATORS

ADAPTIVE_VOTE = "adaptive"  # the act-first adaptive vote (kate.sampling.adaptive), up to the width's samples
VOTES = (*AGGREGATORS, ADAPTIVE_VOTE)
from kate.serve.errors import APIError, bad_request

ROLES = ("system", "developer", "user", "assistant", "tool")
MAX_STOP = 4
MAX_TOP_LOGPROBS = 20


@dataclass(frozen=True)
class Limits:
    """What one request may hold (413 beyond the message limits, 400 beyond the sampling ones)."""

    max_messages: int = 512
    max_message_chars: int = 200_000
    max_tokens: int = 4096
    max_n: int = 16
    max_width: int = 32


@dataclass(frozen=True)
class KateOptions:
    """The ``kate`` field of a request: kate's knobs for this request; None keeps the server's setting.

    ``knowledge``: retrieve and inject knowledge (true/false); ``kb``: which of the server's
    knowledge bases; ``top_k`` / ``threshold``: K and p of the retrieval; ``n``: the width (samples
    voted over); ``vote``: the aggregation (valid_majority | filled_majority | majority | critic)."""

    knowledge: bool | None = None
    kb: str | None = None
    top_k: int | None = None
    threshold: float | None = None
    n: int | None = None
    vote: str | None = None


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None  # "none" | "auto" | "required" | {"type": "function", ...}
    parallel_tool_calls: bool = True
    n: int = 1
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    max_tokens: int | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    stream: bool = False
    include_usage: bool = False
    kate: KateOptions = field(default_factory=KateOptions)

    @property
    def forced_function(self) -> str | None:
        """The function a named ``tool_choice`` asks for."""
        return self.tool_choice["function"]["name"] if isinstance(self.tool_choice, dict) else None

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.tools or []]


def _number(body: dict, key: str, low: float, high: float, *, integer: bool = False) -> Any:
    value = body.get(key)
    if value is None:
        return None
    kind_ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not kind_ok or (not integer and not math.isfinite(value)):
        raise bad_request(f"'{key}' must be {'an integer' if integer else 'a number'}, got {value!r}", key)
    if not low <= value <= high:
        raise bad_request(f"'{key}' must be between {low} and {high}, got {value!r}", key)
    return value


def _flag(body: dict, key: str, default: bool) -> bool:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise bad_request(f"'{key}' must be a boolean, got {value!r}", key)
    return value


def _text(content: Any, where: str) -> str | None:
    """Message content as text: a string, or a list of text parts joined."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise bad_request(f"{where}: only text content parts are supported", where)
            parts.append(part["text"])
        return "".join(parts)
    raise bad_request(f"{where}: content must be a string or a list of text parts", where)


def _messages(body: dict, limits: Limits) -> list[dict[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("'messages' must be a non-empty list", "messages")
    if len(messages) > limits.max_messages:
        raise APIError(413, f"{len(messages)} messages; this server takes at most {limits.max_messages}",
                       "messages", "too_many_messages")  # fmt: skip
    out = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise bad_request(f"{where}: a message is an object whose role is one of {ROLES}", where)
        text = _text(message.get("content"), f"{where}.content")
        if text is not None and len(text) > limits.max_message_chars:
            raise APIError(413, f"{where}: {len(text)} characters; this server takes at most "
                           f"{limits.max_message_chars} per message", where, "message_too_long")  # fmt: skip
        role = "system" if message["role"] == "developer" else message["role"]
        clean = {"role": role, "content": text if text is not None else ""}
        if role == "assistant" and message.get("tool_calls"):
            clean["tool_calls"] = _history_calls(message["tool_calls"], where)
        if role == "tool" and message.get("tool_call_id") is not None:
            clean["tool_call_id"] = str(message["tool_call_id"])
        if message.get("name") is not None:
            clean["name"] = str(message["name"])
        out.append(clean)
    if not any(m["role"] == "user" for m in out):
        raise bad_request("'messages' must hold at least one user message", "messages")
    return out


def _history_calls(tool_calls: Any, where: str) -> list[dict[str, Any]]:
    from kate.toolcall import from_openai_tool_calls, to_openai_tool_calls

    try:
        parsed = from_openai_tool_calls(tool_calls)
    except Exception as error:  # noqa: BLE001 - the parser's own message names what is wrong
        raise bad_request(f"{where}.tool_calls: {error}", f"{where}.tool_calls") from None
    if parsed.error:
        raise bad_request(f"{where}.tool_calls: {parsed.error}", f"{where}.tool_calls")
    return to_openai_tool_calls(parsed.calls)


def _tools(body: dict) -> list[dict[str, Any]] | None:
    tools = body.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list) or not tools:
        raise bad_request("'tools' must be a non-empty list when given", "tools")
    names = set()
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type", "function") != "function" or not isinstance(function, dict):
            raise bad_request(f"tools[{i}]: a tool is {{'type': 'function', 'function': {{...}}}}", f"tools[{i}]")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise bad_request(f"tools[{i}].function.name must be a non-empty string", f"tools[{i}].function.name")
        if name in names:
            raise bad_request(f"tools[{i}]: function {name!r} is offered twice", f"tools[{i}].function.name")
        if function.get("parameters") is not None and not isinstance(function["parameters"], dict):
            raise bad_request(f"tools[{i}].function.parameters must be a JSON schema object", f"tools[{i}]")
        names.add(name)
    return [{"type": "function", "function": dict(t["function"])} for t in tools]


def _tool_choice(body: dict, tools: list[dict[str, Any]] | None) -> str | dict | None:
    choice = body.get("tool_choice")
    if choice is None or choice == "none":
        return choice
    if tools is None:
        raise bad_request("'tool_choice' needs 'tools'", "tool_choice")
    if choice in ("auto", "required"):
        return choice
    name = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
    if not isinstance(choice, dict) or choice.get("type") != "function" or not isinstance(name, str):
        raise bad_request("'tool_choice' is 'none', 'auto', 'required' or "
                          "{'type': 'function', 'function': {'name': ...}}", "tool_choice")  # fmt: skip
    if name not in [t["function"]["name"] for t in tools]:
        raise bad_request(f"'tool_choice' names {name!r}, which is not among the tools offered", "tool_choice")
    return {"type": "function", "function": {"name": name}}


def _kate_options(body: dict, limits: Limits) -> KateOptions:
    raw = body.get("kate")
    if raw is None:
        return KateOptions()
    if not isinstance(raw, dict):
        raise bad_request("'kate' must be an object", "kate")
    known = set(KateOptions.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise bad_request(f"unknown kate option(s) {unknown}; known: {sorted(known)}", "kate")
    knowledge = raw.get("knowledge")
    if knowledge is not None and not isinstance(knowledge, bool):
        raise bad_request("kate.knowledge must be a boolean", "kate.knowledge")
    kb = raw.get("kb")
    if kb is not None and not isinstance(kb, str):
        raise bad_request("kate.kb must be a knowledge base name", "kate.kb")
    vote = raw.get("vote")
    if vote is not None and vote not in VOTES:
        raise bad_request(f"kate.vote must be one of {sorted(VOTES)}, got {vote!r}", "kate.vote")
    try:
        return KateOptions(
            knowledge=knowledge, kb=kb, vote=vote,
            top_k=_number(raw, "top_k", 1, 50, integer=True),
            threshold=_number(raw, "threshold", -1.0, 1.0),
            n=_number(raw, "n", 1, limits.max_width, integer=True),
        )  # fmt: skip
    except APIError as error:
        raise bad_request(error.message.replace("'", "'kate.", 1), f"kate.{error.param}") from None


def read_request(body: Any, limits: Limits = Limits()) -> ChatRequest:
    """The request in ``body`` (parsed JSON), checked; ``APIError`` when it is not a valid one."""
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request("'model' is required", "model")
    messages = _messages(body, limits)
    tools = _tools(body)
    tool_choice = _tool_choice(body, tools)
    stream = _flag(body, "stream", False)
    stream_options = body.get("stream_options")
    if stream_options is not None:
        if not stream:
            raise bad_request("'stream_options' is only allowed when 'stream' is true", "stream_options")
        if not isinstance(stream_options, dict):
            raise bad_request("'stream_options' must be an object", "stream_options")
    stop = body.get("stop")
    stop = [stop] if isinstance(stop, str) else stop
    if stop is not None and (not isinstance(stop, list) or len(stop) > MAX_STOP
                             or not all(isinstance(s, str) and s for s in stop)):  # fmt: skip
        raise bad_request(f"'stop' is a string or a list of at most {MAX_STOP} non-empty strings", "stop")
    max_tokens = _number(body, "max_completion_tokens", 1, limits.max_tokens, integer=True)
    if max_tokens is None:
        max_tokens = _number(body, "max_tokens", 1, limits.max_tokens, integer=True)
    logprobs = _flag(body, "logprobs", False)
    top_logprobs = _number(body, "top_logprobs", 0, MAX_TOP_LOGPROBS, integer=True) or 0
    if top_logprobs and not logprobs:
        raise bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs")
    return ChatRequest(
        model=model, messages=messages, tools=tools, tool_choice=tool_choice,
        parallel_tool_calls=_flag(body, "parallel_tool_calls", True),
        n=_number(body, "n", 1, limits.max_n, integer=True) or 1,
        temperature=_number(body, "temperature", 0.0, 2.0),
        top_p=_number(body, "top_p", 0.0, 1.0),
        seed=_number(body, "seed", -(2**63), 2**63 - 1, integer=True),
        stop=list(stop or []), max_tokens=max_tokens, logprobs=logprobs, top_logprobs=top_logprobs,
        stream=stream, include_usage=bool(stream and (stream_options or {}).get("include_usage")),
        kate=_kate_options(body, limits),
    )  # fmt: skip
