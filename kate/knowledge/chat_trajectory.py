"""An OpenAI chat history read and verified as a ``kate-trajectory/1`` Trajectory, the first half of
learning from use (``kate.knowledge.learn``).

One turn per user message, with the assistant's calls until the next user message, each call's
result from the tool message that answers it (by ``tool_call_id``), the last assistant text as the
answer; the Trajectory's id is a hash of its turns. Every assistant call must parse into a canonical
``ToolCall`` and be one the offered tools can make (``calls_expressible``: offered, only its
parameters, the required ones, declared types): one that does not raises ``Rejected`` with the
reason.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kate.knowledge.trajectory import Trajectory, TrajectoryTurn
from kate.toolcall import ToolCall, canonical_json, from_openai_tool_calls
from kate.toolcall.expressible import call_expressible, function_of, schemas_by_name, value_fits

USE_PREFIX = "use:"  # entries from use carry source / written_by "use:<source>"


class Rejected(ValueError):
    """Internal: the conversation does not verify; the message is the reason."""


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
