"""A tool-calling agent loop on the plain ``openai`` client, pointed at kate's server.

Nothing here is kate-specific except the base URL: a while-loop over ``chat.completions.create`` with
``tools``; every ``tool_calls`` entry is run by looking its name up in an allowlist of Python functions
(its arguments are parsed with ``json.loads``, never evaluated), its result goes back as a ``tool``
message, and the loop stops at an answer without tool calls or after ``--max-steps`` model calls.
It runs unchanged against any OpenAI-compatible server.

kate's extras, both optional: ``--kate`` sends ``KATE_OPTIONS`` (below) in the request body as
``{"kate": {...}}`` (``extra_body``); kate's server answers with an extra top-level ``kate`` field
(the width-N vote and the knowledge hits), which the ``openai`` client keeps in
``response.model_extra["kate"]``. Other servers send no such field, and ``--kate`` is for kate only.

    kate serve                                                    # the default model, in another shell
    python examples/plain_loop.py --question "What is the weather in Tokyo?"
    python examples/plain_loop.py --kate --json                    # kate's knobs; the summary as JSON
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

from openai import APIConnectionError, OpenAI

from tools import TOOLS, example_arguments

INSTRUCTIONS = "You are a helpful assistant. Call a tool when it can answer the question, then answer from its result."

# kate's knobs, sent with --kate as the request's extra "kate" field: vote over n samples, the vote rule,
# and the knowledge lookup (on/off, how many hits, the least similarity a hit needs).
KATE_OPTIONS: dict[str, Any] = {"n": 8, "vote": "valid_majority", "knowledge": True, "top_k": 3, "threshold": 0.5}

# The tools' JSON schemas, as the Chat Completions API takes them.
TOOL_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city: temperature in the unit asked for, and the conditions.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": 'The city\'s name, e.g. "Paris".'},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "convert_currency",
            "description": "Convert an amount of money from one currency to another at today's fixed rate.",
            "parameters": {
                "type": "object",
                "properties": {
                    "amount": {"type": "number", "description": "How much money, in from_currency."},
                    "from_currency": {"type": "string", "description": 'ISO code of the currency held, e.g. "USD".'},
                    "to_currency": {"type": "string", "description": 'ISO code of the currency wanted, e.g. "EUR".'},
                },
                "required": ["amount", "from_currency", "to_currency"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "lookup_country",
            "description": "A country's capital and population (in millions) from a small table.",
            "parameters": {
                "type": "object",
                "properties": {"country": {"type": "string", "description": 'The country\'s name, e.g. "Japan".'}},
                "required": ["country"],
            },
        },
    },
]

ALLOWED: dict[str, Callable[..., dict]] = {tool.__name__: tool for tool in TOOLS}  # the only functions a call may run


def run_tool(name: str, arguments: str) -> dict:
    """Run one tool call from the model: an allowlisted function with its JSON arguments. Anything
    wrong (unknown name, arguments that are not a JSON object, the wrong parameters) comes back as
    ``{"error": ...}`` for the model to read."""
    if name not in ALLOWED:
        return {"error": f"unknown tool {name!r}; tools: {sorted(ALLOWED)}"}
    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError as e:
        return {"error": f"arguments of {name} are not JSON: {e}"}
    if not isinstance(args, dict):
        return {"error": f"arguments of {name} must be a JSON object, not {type(args).__name__}"}
    try:
        return ALLOWED[name](**args)
    except TypeError as e:  # a missing or unexpected parameter
        return {"error": f"bad arguments for {name}: {e}"}


def run(client: OpenAI, model: str, question: str, *, max_steps: int = 4, max_tokens: int | None = None,
        kate_options: dict[str, Any] | None = None, seed: int | None = None,
        temperature: float | None = None) -> dict:  # fmt: skip
    """The loop. Returns a summary: every call with its arguments and result, the final answer (None
    when the step limit came first), why it stopped, and kate's extra response field per step.
    ``seed`` and ``temperature`` are the standard request fields (unset: the server's own)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": question},
    ]
    extra: dict[str, Any] = {}
    for name, value in (("max_tokens", max_tokens), ("seed", seed), ("temperature", temperature)):
        if value is not None:
            extra[name] = value
    if kate_options is not None:
        extra["extra_body"] = {"kate": kate_options}
    calls: list[dict[str, Any]] = []
    kate_fields: list[Any] = []
    for step in range(1, max_steps + 1):
        response = client.chat.completions.create(model=model, messages=messages, tools=TOOL_SCHEMAS, **extra)
        kate_fields.append((response.model_extra or {}).get("kate"))  # None from servers other than kate's
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        tool_calls = [c for c in message.tool_calls or [] if c.type == "function"]
        if not tool_calls:
            print(f"answer: {message.content}")
            return _summary(model, question, calls, message.content, "answer", step, kate_fields)
        for call in tool_calls:
            result = run_tool(call.function.name, call.function.arguments)
            print(f"step {step}: {call.function.name}({call.function.arguments}) -> {json.dumps(result)}")
            arguments = _json_or_text(call.function.arguments)
            calls.append({"name": call.function.name, "arguments": arguments, "result": result})
            messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
    print(f"stopped after {max_steps} model calls without an answer")
    return _summary(model, question, calls, None, "max_steps", max_steps, kate_fields)


def _json_or_text(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments


def _summary(model: str, question: str, calls: list, answer: str | None, stopped: str, steps: int, kate: list) -> dict:
    return {"framework": "openai", "model": model, "question": question, "calls": calls, "answer": answer,
            "stopped": stopped, "steps": steps, "kate": kate}  # fmt: skip


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = example_arguments(__doc__.splitlines()[0])
    parser.add_argument("--kate", action="store_true", help="send KATE_OPTIONS (kate's server only)")
    parser.add_argument("--seed", type=int, default=None, help="the request's seed (repeatable samples)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    client = OpenAI(base_url=args.base_url, api_key=args.api_key)
    try:
        model = args.model or client.models.list().data[0].id
    except APIConnectionError:
        sys.exit(f"no server answers at {args.base_url} (start one: kate serve)")
    summary = run(client, model, args.question, max_steps=args.max_steps, max_tokens=args.max_tokens,
                  kate_options=KATE_OPTIONS if args.kate else None, seed=args.seed)  # fmt: skip
    if summary["kate"] and summary["kate"][-1] is not None:
        print(f"kate: {json.dumps(summary['kate'][-1])[:400]}")
    if args.json:
        print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
