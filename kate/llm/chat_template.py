"""Render a model's own Jinja chat template, with a prompted tool format when it has none.

Local backends (``llamacpp``, ``hf``) render prompts here so both see the same text. Templates
that know ``tools`` (Qwen2.5) get the tools natively; for templates without them (SmolLM2) the
tools are described in the system message and calls are asked for as Hermes ``<tool_call>`` tags,
which the strict parsers read back. Tool results become plain user messages for such templates.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache
from typing import Any

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from kate.llm.base import Message, ToolSchema
from kate.llm.tool_prompt import check_tool_prompt, python_prompt_messages
from kate.toolcall import from_openai_tool_calls, to_hermes

PROMPTED_TOOLS_HEADER = (
    "You may call functions to help with the user's request. Available functions (JSON schema):\n"
    "{tools}\n\n"
    "To call functions, reply with one <tool_call></tool_call> block per call, each holding a JSON "
    'object {{"name": <function-name>, "arguments": <args-object>}}. When no call is needed, '
    "answer in plain text."
)


def _raise(message: str) -> None:
    raise TemplateError(message)


@lru_cache(maxsize=8)
def _compile(template: str):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])

    def tojson(value: Any, indent: int | None = None, ensure_ascii: bool = False, sort_keys: bool = False) -> str:
        return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(template)


def template_supports_tools(template: str) -> bool:
    return "tools" in template


def _arguments_as_objects(message: Message) -> Message:
    """Templates expect tool-call arguments as objects, while OpenAI messages carry JSON strings."""
    if not message.get("tool_calls"):
        return message
    parsed = from_openai_tool_calls(message["tool_calls"])
    if not parsed.ok:
        return message
    calls = [
        {"type": "function", "id": c.call_id, "function": {"name": c.name, "arguments": dict(c.arguments)}}
        for c in parsed.calls
    ]
    return {**message, "tool_calls": calls}


def prompted_tool_messages(messages: list[Message], tools: list[ToolSchema] | None) -> list[Message]:
    """Rewrite a tool conversation for a template that knows neither ``tools`` nor the tool role."""
    out: list[Message] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            out.append({"role": "user", "content": f"Function result:\n{message.get('content', '')}"})
        elif role == "assistant" and message.get("tool_calls"):
            parsed = from_openai_tool_calls(message["tool_calls"])
            calls = to_hermes(parsed.calls) if parsed.ok else ""
            out.append({"role": "assistant", "content": "\n".join(filter(None, [message.get("content"), calls]))})
        else:
            out.append(dict(message))
    if tools:
        header = PROMPTED_TOOLS_HEADER.format(tools="\n".join(json.dumps(t, ensure_ascii=False) for t in tools))
        if out and out[0].get("role") == "system":
            out[0] = {**out[0], "content": f"{out[0].get('content') or ''}\n\n{header}".strip()}
        else:
            out.insert(0, {"role": "system", "content": header})
    return out


def render_chat(
    template: str,
    messages: list[Message],
    tools: list[ToolSchema] | None = None,
    *,
    bos_token: str = "",
    eos_token: str = "",
    add_generation_prompt: bool = True,
    tool_prompt: str = "native",
) -> str:
    """The prompt text for ``messages`` (and ``tools``) under the model's own chat template; the tools
    as the template shows them (``tool_prompt="native"``) or in BFCL's prompt-mode form (``"python"``,
    kate.llm.tool_prompt)."""
    if check_tool_prompt(tool_prompt) == "both":
        raise ValueError("tool_prompt=both is rendered one form at a time (native, python)")
    if tool_prompt == "python":
        messages, tools = python_prompt_messages(messages, tools), None
    if template_supports_tools(template):
        messages = [_arguments_as_objects(m) for m in messages]
        context_tools = tools or None
    else:
        messages = prompted_tool_messages(messages, tools)
        context_tools = None
    return _compile(template).render(
        messages=messages,
        tools=context_tools,
        add_generation_prompt=add_generation_prompt,
        bos_token=bos_token,
        eos_token=eos_token,
    )
