"""A LangGraph agent over ``langchain-openai`` pointed at kate's server.

The stock two-node graph: an ``agent`` node asks ``ChatOpenAI(...).bind_tools(tools)`` for the next
message, ``tools_condition`` sends a message with tool calls to LangGraph's ``ToolNode`` (which runs
them and appends ``ToolMessage``s) and anything else to the end; the tools are the plain functions of
``tools.py`` wrapped in LangChain's ``tool``. The only kate-specific line is the base URL; it runs
unchanged against any OpenAI-compatible server. (kate's knobs could go in
``ChatOpenAI(extra_body={"kate": {...}})``; see plain_loop.py.)

    kate serve                                                    # the default model, in another shell
    python examples/langgraph_agent.py --question "What is the capital of Japan?"
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.errors import GraphRecursionError
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from openai import APIConnectionError, OpenAI

from tools import TOOLS, example_arguments

INSTRUCTIONS = "You are a helpful assistant. Call a tool when it can answer the question, then answer from its result."


def build_graph(base_url: str, model: str, *, api_key: str, max_tokens: int | None = None):
    """The compiled graph: START -> agent -> (tools -> agent)* -> END."""
    tools = [tool(fn, parse_docstring=True) for fn in TOOLS]
    llm = ChatOpenAI(base_url=base_url, api_key=api_key, model=model, max_tokens=max_tokens).bind_tools(tools)

    def agent(state: MessagesState) -> dict:
        return {"messages": [llm.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)  # tool calls -> "tools", else the end
    graph.add_edge("tools", "agent")
    return graph.compile()


def run(graph, model: str, question: str, *, max_steps: int = 4) -> dict:
    """Run the graph to an answer. Returns a summary: every call with its arguments and result, the
    final answer (None when the step limit came first), and why it stopped."""
    messages: list[BaseMessage] = [SystemMessage(INSTRUCTIONS), HumanMessage(question)]
    stopped = "answer"
    try:  # stream the state after each node, so a run cut short still shows its calls
        for state in graph.stream({"messages": messages}, {"recursion_limit": 2 * max_steps}, stream_mode="values"):
            messages = state["messages"]
    except GraphRecursionError:
        stopped = "max_steps"
    calls = _calls(messages)
    for call in calls:
        print(f"{call['name']}({json.dumps(call['arguments'])}) -> {json.dumps(call['result'])}")
    last = messages[-1]
    answer = last.text if stopped == "answer" and isinstance(last, AIMessage) and not last.tool_calls else None
    if answer is None and stopped == "answer":
        stopped = "no answer"
    print(f"answer: {answer}" if answer is not None else f"stopped: {stopped}")
    return {"framework": "langgraph", "model": model, "question": question, "calls": calls, "answer": answer,
            "stopped": stopped}  # fmt: skip


def _calls(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """The tool calls in a conversation, each with the result its ToolMessage carried."""
    results = {m.tool_call_id: _json_or_text(m.content) for m in messages if isinstance(m, ToolMessage)}
    return [{"name": c["name"], "arguments": c["args"], "result": results.get(c["id"])}
            for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]  # fmt: skip


def _json_or_text(content: Any) -> Any:
    try:
        return json.loads(content) if isinstance(content, str) else content
    except json.JSONDecodeError:
        return content


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = example_arguments(__doc__.splitlines()[0])
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    try:
        model = args.model or OpenAI(base_url=args.base_url, api_key=args.api_key).models.list().data[0].id
    except APIConnectionError:
        sys.exit(f"no server answers at {args.base_url} (start one: kate serve)")
    graph = build_graph(args.base_url, model, api_key=args.api_key, max_tokens=args.max_tokens)
    summary = run(graph, model, args.question, max_steps=args.max_steps)
    if args.json:
        print(json.dumps(summary, default=str))
    return summary


if __name__ == "__main__":
    main()
