"""The demo job: a few tool-calling questions to a model, with the calls it made, parsed strictly."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from kate.eval.config import instantiate
from kate.llm.base import ChatModel

DEMO_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate an arithmetic expression and return the number.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string", "description": "e.g. '12 * (3 + 4)'"}},
                "required": ["expression"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
]


def ask(model: ChatModel, questions: list[str], *, max_tokens: int, temperature: float, seed: int) -> list[dict]:
    """One chat per question with the demo tools; a row per question with the parsed calls."""
    rows = []
    for question in questions:
        [completion] = model.chat(
            [{"role": "user", "content": question}],
            DEMO_TOOLS,
            max_tokens=max_tokens,
            temperature=temperature,
            seed=seed,
        )
        rows.append(
            {
                "question": question,
                "calls": [call.to_dict() for call in completion.tool_calls],
                "parse_error": completion.parse_error,
                "text": completion.text,
            }
        )
    return rows


def run_demo(cfg: DictConfig) -> list[dict]:
    model = instantiate(cfg.llm)
    rows = ask(model, list(cfg.questions), max_tokens=cfg.max_tokens, temperature=cfg.temperature, seed=cfg.seed)
    print(f"model: {model.name}")
    for row in rows:
        print(f"\nQ: {row['question']}")
        if row["calls"]:
            for call in row["calls"]:
                print(f"   call -> {call['name']}({call['arguments']})")
        elif row["parse_error"]:
            print(f"   malformed call (recorded failure): {row['parse_error']}")
        else:
            print(f"   answer -> {row['text'].strip()[:200]}")
    return rows
