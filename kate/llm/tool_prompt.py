"""How a local model is told about the tools, and in which form it calls them (``tool_prompt``).

``native``: the chat template's own tool block (Qwen2.5: JSON inside ``<tool_call>`` tags; a template
without tools gets the Hermes header of kate.llm.chat_template). ``python``: BFCL's prompt-mode
system prompt (bfcl-eval's default format ``ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&
prompt_fmt=plaintext&style=classic``, word for word), the tools as JSON in the system message and the
calls as a Python list ``[f(a=1), g(b=2)]``, read back by the ``python_list`` format
(kate.toolcall.parse_python.from_python_list). In the Python form a small model writes several calls
where a request needs them, which it does not in the JSON form (docs/evaluation.md, "Tool prompts").
``both`` (llama.cpp) asks in both forms at once and keeps the Python reply only where it makes several
calls (``choose_forms``) and, with a gate on the request (the client's ``several_calls``, e.g.
kate.retrieval.call_count.SeveralCallsGate), where the gate also expects several.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from kate.llm.base import Completion, Message, ToolSchema
from kate.toolcall import from_openai_tool_calls, to_json_text, to_python_call

TOOL_PROMPTS = ("native", "python", "both")
# what each form's replies are parsed as; ``both`` answers in either form
FORMATS = {"native": ("hermes", "json"), "python": ("python_list",), "both": ("hermes", "json", "python_list")}

PYTHON_TOOL_PROMPT = (
    "You are an expert in composing functions.You are given a question and a set of possible functions. Based on "
    "the question, you will need to make one or more function/tool calls to achieve the purpose. If none of the "
    "functions can be used, point it out. If the given question lacks the parameters required by the function, "
    "also point it out.\n\nYou should only return the function calls in your response.\n\nIf you decide to invoke "
    "any of the function(s), you MUST put it in the format of [func_name1(params_name1=params_value1, "
    "params_name2=params_value2...), func_name2(params)].  You SHOULD NOT include any other text in the response."
    "\n\nAt each turn, you should try your best to complete the tasks requested by the user within the current "
    "turn. Continue to output functions to call until you have fulfilled the user's request to the best of your "
    "ability. Once you have no more functions to call, the system will consider the current turn complete and "
    "proceed to the next turn or task.\n\nHere is a list of functions in json format that you can invoke.\n"
    "{functions}\n"
)


def choose_forms(native: list[Completion], python: list[Completion], several: bool = True) -> list[Completion]:
    """``tool_prompt=both``, per sample: the Python form's reply where it makes two or more calls (the
    native form writes one call where a request needs several) and ``several`` (the request's gate: False
    keeps every native reply), else the native form's; each costs both (usage summed). Rules chosen on
    training halves (bench/results/tool_prompt_train.json)."""
    out = []
    for mine, other in zip(native, python):
        python_wins = several and len(other.tool_calls) >= 2 and other.parse_error is None
        chosen, cost = (other, mine) if python_wins else (mine, other)
        out.append(replace(chosen, usage=chosen.usage + cost.usage))
    return out


def ask_both(ask: Callable[[str], list[Completion]], several: bool = True) -> list[Completion]:
    """``ask(form)`` for the native and the Python form at once (two threads: a local engine's scheduler
    decodes them together), then ``choose_forms``; where the request's gate is closed (``several`` False)
    the Python reply could not be kept, so only the native form is asked."""
    if not several:
        return ask("native")
    with ThreadPoolExecutor(2) as pool:
        native, python = pool.submit(ask, "native"), pool.submit(ask, "python")
        return choose_forms(native.result(), python.result(), several)


def check_tool_prompt(value: str) -> str:
    if value not in TOOL_PROMPTS:
        raise ValueError(f"tool_prompt must be one of {TOOL_PROMPTS}, got {value!r}")
    return value


def default_formats(tool_prompt: str) -> tuple[str, ...]:
    """The call formats a client parses when it is not given any: those of its tool prompt."""
    return FORMATS[check_tool_prompt(tool_prompt)]


def _function(tool: ToolSchema) -> dict:
    return tool.get("function", tool) if isinstance(tool, dict) else tool


def _python_list(calls) -> str:
    try:
        return f"[{', '.join(to_python_call(c) for c in calls)}]"
    except ValueError:  # a name Python syntax cannot write: the calls as JSON
        return to_json_text(list(calls))


def python_prompt_messages(messages: list[Message], tools: list[ToolSchema] | None) -> list[Message]:
    """The conversation in the Python form: the tools in the system message (before a system message
    the conversation has, as BFCL puts it), earlier calls written as ``[f(a=1)]``; tool results stay."""
    out: list[Message] = []
    for message in messages:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            parsed = from_openai_tool_calls(message["tool_calls"])
            calls = _python_list(parsed.calls) if parsed.ok else ""
            text = "\n".join(filter(None, [message.get("content"), calls]))
            out.append({k: v for k, v in {**message, "content": text}.items() if k != "tool_calls"})
        else:
            out.append(dict(message))
    if tools:
        functions = json.dumps([_function(t) for t in tools], indent=4)
        prompt = PYTHON_TOOL_PROMPT.format(functions=functions)
        if out and out[0].get("role") == "system":
            out[0] = {**out[0], "content": f"{prompt}\n\n{out[0].get('content') or ''}".strip()}
        else:
            out.insert(0, {"role": "system", "content": prompt})
    return out
