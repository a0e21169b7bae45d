"""An OpenAI Agents SDK agent pointed at kate's server.

A stock Agents SDK agent: the tools are the plain functions of ``tools.py`` wrapped in
``function_tool`` (the SDK reads their type hints and docstrings for the schemas), the model is
``OpenAIChatCompletionsModel`` over an ``AsyncOpenAI`` client whose base URL is kate's, and
``Runner.run_sync`` runs the loop. Tracing is disabled, so nothing leaves the machine. The only
kate-specific line is the base URL; it runs unchanged against any OpenAI-compatible server.
(kate's knobs could go in ``ModelSettings(extra_body={"kate": {...}})``; see plain_loop.py.)

    kate serve                                                    # the default model, in another shell
    python examples/agents_sdk.py --question "Convert 100 USD to EUR."
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from agents import (
    Agent,
    AgentsException,
    ModelSettings,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.items import RunItem, ToolCallItem, ToolCallOutputItem
from openai import APIConnectionError, AsyncOpenAI, OpenAI

from tools import TOOLS, example_arguments

INSTRUCTIONS = "You are a helpful assistant. Call a tool when it can answer the question, then answer from its result."


def build_agent(base_url: str, model: str, *, api_key: str, max_tokens: int | None = None) -> Agent:
    """The agent: kate's server as a Chat Completions model, the example tools as function tools."""
    client = AsyncOpenAI(base_url=base_url, api_key=api_key)
    return Agent(
        name="assistant",
        instructions=INSTRUCTIONS,
        model=OpenAIChatCompletionsModel(model=model, openai_client=client),
        model_settings=ModelSettings(max_tokens=max_tokens),
        tools=[function_tool(tool) for tool in TOOLS],
    )


def run(agent: Agent, question: str, *, max_steps: int = 4) -> dict:
    """Run the agent to an answer. Returns a summary: every call with its arguments and result, the
    final answer (None when the run stopped first), and why it stopped (the SDK's error, when one
    ended the run: too many turns, a call to a tool that does not exist)."""
    try:
        result = Runner.run_sync(agent, question, max_turns=max_steps)
        items, answer, stopped = result.new_items, str(result.final_output), "answer"
    except AgentsException as e:  # MaxTurnsExceeded, ModelBehaviorError, ...: the run so far is kept
        items = e.run_data.new_items if e.run_data else []
        answer, stopped = None, f"{type(e).__name__}: {e}"
    calls = _calls(items)
    for call in calls:
        print(f"{call['name']}({json.dumps(call['arguments'])}) -> {json.dumps(call['result'])}")
    print(f"answer: {answer}" if answer is not None else f"stopped: {stopped}")
    model = agent.model.model if isinstance(agent.model, OpenAIChatCompletionsModel) else str(agent.model)
    return {"framework": "openai-agents", "model": model, "question": question, "calls": calls, "answer": answer,
            "stopped": stopped}  # fmt: skip


def _calls(items: list[RunItem]) -> list[dict[str, Any]]:
    """The function calls among a run's items, each with its output when the run got that far."""
    outputs = {_field(i.raw_item, "call_id"): i.output for i in items if isinstance(i, ToolCallOutputItem)}
    calls = []
    for item in items:
        if isinstance(item, ToolCallItem) and _field(item.raw_item, "type") == "function_call":
            raw = item.raw_item
            calls.append({"name": _field(raw, "name"), "arguments": _json_or_text(_field(raw, "arguments")),
                          "result": outputs.get(_field(raw, "call_id"))})  # fmt: skip
    return calls


def _field(raw: Any, name: str) -> Any:
    return raw.get(name) if isinstance(raw, dict) else getattr(raw, name, None)


def _json_or_text(arguments: str | None) -> Any:
    try:
        return json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return arguments


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = example_arguments(__doc__.splitlines()[0], "most model calls (the SDK's max_turns)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    set_tracing_disabled(True)  # the SDK would otherwise send traces to OpenAI
    try:
        model = args.model or OpenAI(base_url=args.base_url, api_key=args.api_key).models.list().data[0].id
    except APIConnectionError:
        sys.exit(f"no server answers at {args.base_url} (start one: kate serve)")
    agent = build_agent(args.base_url, model, api_key=args.api_key, max_tokens=args.max_tokens)
    summary = run(agent, args.question, max_steps=args.max_steps)
    if args.json:
        print(json.dumps(summary, default=str))
    return summary


if __name__ == "__main__":
    main()
