"""The README's quickstart: a policy's default loop settings answer after a call where the model takes
a prefill (``LoopSettings.answering()``), and examples/quickstart.py prints a right answer with the
default model."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from kate.agent import LoopSettings, Policy
from kate.envs import PythonFunctionsEnv
from kate.llm.fake import FakeChatModel

ROOT = Path(__file__).resolve().parents[1]
PRICE = '<tool_call>\n{"name": "get_stock_price", "arguments": {"symbol": "ACME"}}\n</tool_call>'


def get_stock_price(symbol: str) -> float:
    """Latest price of a stock, in US dollars."""
    return {"ACME": 123.45}.get(symbol.upper(), 0.0)


def test_a_policys_default_settings_answer_where_the_model_takes_a_prefill():
    assert Policy(FakeChatModel(["-"], options=("prefill",))).settings == LoopSettings.answering()
    assert Policy(FakeChatModel(["-"])).settings == LoopSettings()  # no prefill: the plain loop
    assert LoopSettings.answering(max_steps=3).max_steps == 3


def test_the_default_settings_end_a_repeating_turn_with_an_answer():
    model = FakeChatModel([PRICE, PRICE, "123.45 dollars."], options=("prefill",))
    turn = Policy(model).run_dialogue(PythonFunctionsEnv([get_stock_price]), ["Price of ACME?"]).turns[0]
    assert turn.answer == "Based on the result, 123.45 dollars." and len(turn.calls) == 1


@pytest.mark.model
def test_examples_quickstart_prints_the_right_answer(capsys):
    spec = importlib.util.spec_from_file_location("quickstart", ROOT / "examples" / "quickstart.py")
    quickstart = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(quickstart)  # type: ignore[union-attr]
    answer = quickstart.main(["What is the price of ACME stock?"])
    assert answer is not None and "123.45" in answer
    assert "called get_stock_price {'symbol': 'ACME'}" in capsys.readouterr().out
