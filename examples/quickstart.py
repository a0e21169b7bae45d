"""kate's quickstart: plain Python functions of your own as tools, the default local model, a printed answer.

    .venv/bin/python examples/quickstart.py
    .venv/bin/python examples/quickstart.py "How many days are there between 2024-01-01 and 2024-03-01?"

The model is kate's default (``kate.default``): the local 0.5B model that ``bash scripts/setup.sh``
installs (no hub, no key) with the adapter kate ships for it, trained to answer after tool results,
and the base model deciding at each question's start whether to call at all. A policy's default loop
settings (``LoopSettings.answering()``) also make a model answer after its call: the first call of a
reply counts, and a call that repeats or feeds back an earlier one is answered by asking the model
for the answer, its reply starting "Based on the result, " (``kate/agent/turn_end.py``).
"""

from __future__ import annotations

import sys
from datetime import date

from kate.agent import Policy
from kate.envs import PythonFunctionsEnv
from kate.default import default_model


def get_stock_price(symbol: str) -> float:
    """Latest price of a stock, in US dollars."""
    return {"ACME": 123.45, "GLOBEX": 67.8}.get(symbol.upper(), 0.0)


def days_between(start: str, end: str) -> int:
    """Number of days between two ISO dates (YYYY-MM-DD)."""
    return (date.fromisoformat(end) - date.fromisoformat(start)).days


def word_count(text: str) -> int:
    """Number of words in a text."""
    return len(text.split())


def main(argv: list[str] | None = None) -> str | None:
    question = " ".join(sys.argv[1:] if argv is None else argv) or "What is the price of ACME stock?"
    model = default_model()
    env = PythonFunctionsEnv([get_stock_price, days_between, word_count])
    turn = Policy(model).run_dialogue(env, [question]).turns[0]
    for call in turn.calls:
        print("called", call.name, call.arguments)
    print(turn.answer)
    return turn.answer


if __name__ == "__main__":
    main()
