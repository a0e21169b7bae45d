"""Re-voting stored single-turn width records: the same rule reproduces the run, another rule is
scored by the official checker (no generation)."""

from __future__ import annotations

import json

import pytest

from kate.bfcl.answers import first_possible_answer
from kate.bfcl.data import load_entries
from kate.eval.revote import revote_record
from kate.llm.fake import FakeChatModel
from kate.sampling.policy import WidthSampler
from kate.agent import Policy
from kate.tasks.bfcl import BFCLTask


def _text(call) -> str:
    return "<tool_call>\n" + json.dumps(call.to_dict()) + "\n</tool_call>"


def test_revote_reproduces_the_run_and_rescores_another_rule():
    entry = load_entries("simple_python", "all")[0]
    right = first_possible_answer(entry)[0]
    extra = type(right)(right.name, {**right.arguments, "unexpected_parameter": 1})
    samples = [_text(extra)] * 3 + [_text(right)] * 2 + ['{"name": "' + right.name + '", "arguments": {']
    task, policy = BFCLTask([entry]), Policy(FakeChatModel([samples]), WidthSampler(n=6, aggregate="majority"))
    trace = task.solve(entry, policy, 0)
    record = {**task.score(entry, trace), **trace}
    assert not record["valid"] and record["vote"]["chosen"]["votes"] == 3

    again = revote_record(entry, record, "majority")
    assert again["calls"] == record["calls"] and again["valid"] == record["valid"]
    valid = revote_record(entry, record, "valid_majority")
    assert valid["valid"] and valid["calls"] == [right.to_dict()] and valid["vote"]["method"] == "valid_majority"
    assert valid["outputs"] == record["outputs"] and valid["prompt"] == record["prompt"]


def test_revote_refuses_what_it_cannot_redo():
    entry = load_entries("simple_python", "all")[0]
    greedy = {"id": entry.id, "vote": None, "outputs": ["x"]}
    with pytest.raises(ValueError, match="no stored vote"):
        revote_record(entry, greedy, "valid_majority")
    with pytest.raises(ValueError, match="critic"):
        revote_record(entry, greedy, "critic")
    with pytest.raises(ValueError, match="multi-turn"):
        revote_record(load_entries("multi_turn_base", "all")[0], greedy, "majority")
