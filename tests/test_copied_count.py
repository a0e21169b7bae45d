"""kate.eval.copied_count reads the example's call count from the injected knowledge and tallies whether the
reply copied it (the analysis behind issue 15's next step), on hand-written records."""

from __future__ import annotations

from kate.eval import copied_count

EXAMPLE = 'Example 1: that user asked: x\n  Correct calls then:\n```json\n[{"name": "f", "arguments": {}}, {"name": "f", "arguments": {}}]\n```\n'


SINGLE = 'Example 2: that user asked: y\n  Correct calls then:\n```json\n[{"name": "f", "arguments": {}}]\n```\n'


def test_example_counts_reads_every_fenced_list():
    assert copied_count.example_counts(EXAMPLE) == [2]
    assert copied_count.example_counts(EXAMPLE + SINGLE) == [2, 1]
    assert copied_count.example_counts("no example here") == []
    assert copied_count.example_counts("```json\n[not json\n```" + SINGLE) == [1]


def test_tally_with_two_examples_copies_the_first_or_any():
    call = {"name": "f", "arguments": {}}
    records = [{"id": "p_0", "category": "parallel", "knowledge": EXAMPLE + SINGLE, "calls": [call], "valid": True}]
    out = copied_count.tally(records, {"p_0": 1})
    assert out["copied"] == 0 and out["copied_any"] == 1
    assert out["per_category"]["parallel"] == {"other_right": 1, "copied_any": 1, "shown_needed": 1, "made_needed": 1}


def test_tally_compares_with_the_needed_count():
    call = {"name": "f", "arguments": {}}
    records = [{"id": "p_0", "category": "parallel", "knowledge": EXAMPLE, "calls": [call] * 3, "valid": True}]
    out = copied_count.tally(records, {"p_0": 3})
    assert out["reached"] == 1
    assert out["per_category"]["parallel"] == {"other_right": 1, "copied_any": 0, "shown_needed": 0,
                                                      "made_needed": 1}


def test_tally_counts_copies_per_category_and_skips_unreached():
    call = {"name": "f", "arguments": {}}
    records = [
        {"category": "parallel", "knowledge": EXAMPLE, "calls": [call, call], "valid": True},
        {"category": "parallel", "knowledge": EXAMPLE, "calls": [call, call, call], "valid": False},
        {"category": "simple_java", "knowledge": EXAMPLE, "calls": [call, call], "valid": False},
        {"category": "simple_java", "knowledge": "", "calls": [call], "valid": True},
        {"category": "multi_turn_base", "knowledge": EXAMPLE, "calls": [], "valid": False},
    ]
    out = copied_count.tally(records)
    assert out["reached"] == 3 and out["copied"] == 2 and out["copied_any"] == 2
    assert copied_count.tally(records, {"x": 2})["reached"] == 3
    assert out["per_category"]["parallel"] == {"copied_right": 1, "other_wrong": 1, "copied_any": 1}
    assert out["per_category"]["simple_java"] == {"copied_wrong": 1, "copied_any": 1}
