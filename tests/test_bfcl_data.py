"""BFCL data through kate: KATE's split, tools, ground truth as ToolCalls, the data hash."""

from __future__ import annotations

import pytest

from kate.bfcl.data import CATEGORIES, MULTI_TURN, data_sha256, ground_truth_calls, load_entries
from kate.toolcall import ToolCall


def test_kate_split_is_even_train_odd_test():
    train, test = load_entries("multi_turn_base", "train"), load_entries("multi_turn_base", "test")
    assert len(train) == len(test) == 100
    assert all(e.index % 2 == 0 for e in train) and all(e.index % 2 == 1 for e in test)
    assert {e.id for e in train}.isdisjoint(e.id for e in test)


@pytest.mark.parametrize("category", CATEGORIES)
def test_every_offline_category_loads_with_tools(category):
    entries = load_entries(category, "all")
    assert entries and all(e.turns for e in entries)
    tool = entries[0].tools[0]["function"]
    assert tool["parameters"]["type"] == "object"


@pytest.mark.parametrize("category", MULTI_TURN)
def test_every_multi_turn_ground_truth_reads_as_tool_calls(category):
    for entry in load_entries(category, "all"):
        turns = ground_truth_calls(entry)
        assert len(turns) == len(entry.ground_truth)
    first = ground_truth_calls(load_entries("multi_turn_base", "all")[0])
    assert first[2] == [ToolCall("sort", {"file_name": "final_report.pdf"})]  # positional arg named


def test_data_hash_is_stable_and_category_sensitive():
    assert data_sha256(("simple_python",)) == data_sha256(("simple_python",))
    assert data_sha256(("simple_python",)) != data_sha256(("multiple",))


def test_unknown_category_is_a_clear_error():
    with pytest.raises(ValueError, match="offline V3 categories"):
        load_entries("web_search")
