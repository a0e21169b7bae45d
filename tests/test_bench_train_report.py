"""kate.eval.slice_tables (the tables of bench/bench_train_report.py) on hand-written records: each
category over the entries the arms that ran it share (an arm without the category gets no cell), and
multi-turn dialogues paired against the untrained arm."""

from __future__ import annotations

import pytest

from kate.eval import slice_tables


@pytest.fixture(scope="module")
def report():
    return slice_tables


def single(i: int, ok: bool, category: str = "parallel") -> dict:
    return {"id": f"{category}_{i}", "category": category, "valid": ok}


def dialogue(i: int, passed: int, total: int = 4) -> dict:
    return {"id": f"multi_turn_base_{i}", "category": "multi_turn_base", "valid": passed == total,
            "turns_passed": passed, "turns_total": total, "turn_fraction": passed / total}


def test_a_category_is_compared_over_the_arms_that_ran_it(report):
    records = {"untrained_direct": [single(1, False), single(3, True), single(5, False), dialogue(1, 1)],
               "trained_direct": [single(1, True), single(3, True)]}  # no multi-turn yet, parallel_5 not reached
    table = report.bfcl_table(records)
    assert table["parallel"]["untrained_direct"]["k"] == 1 and table["parallel"]["untrained_direct"]["n"] == 3
    assert table["parallel"]["trained_direct"] == {"k": 2, "n": 2, "pct": 100.0, "interval": [34.2, 100.0], "own": True}
    eight = {"untrained_direct": [single(i, i < 4) for i in range(20)], "trained_direct": [single(i, True) for i in range(8)]}
    cells = report.bfcl_table(eight)["parallel"]  # the slice: 8 of the untrained arm's 20, both over the same 8
    assert cells["untrained_direct"]["n"] == cells["trained_direct"]["n"] == 8 and cells["untrained_direct"]["k"] == 4
    assert set(table["multi_turn_base"]) == {"untrained_direct"}
    assert table["multi_turn_base"]["untrained_direct"]["turns_passed"] == {"k": 1, "n": 4, "pct": 25.0,
                                                                            "interval": [4.6, 69.9]}


def test_a_stopped_run_does_not_shrink_the_others_common_set(report):
    full = [dialogue(i, i % 2) for i in range(10)]
    records = {"untrained_direct": full, "trained_direct": [dialogue(i, 1) for i in range(9)],
               "stopped": [dialogue(0, 4)]}
    table = report.bfcl_table(records)["multi_turn_base"]
    assert table["untrained_direct"]["n"] == table["trained_direct"]["n"] == 9
    assert table["stopped"]["n"] == 1 and table["stopped"]["own"] is True
    assert "own" not in table["trained_direct"]


def test_multi_turn_pairs_are_dialogue_by_dialogue(report):
    base = [dialogue(1, 0), dialogue(3, 1), dialogue(5, 2)]
    trained = [dialogue(1, 2), dialogue(3, 1)]  # +50 and 0 points on the two dialogues both finished
    pairs = report.multi_turn_pairs({"untrained_direct": base, "trained_kate": trained, "other": [single(1, True)]})
    assert set(pairs) == {"trained_kate"}
    assert pairs["trained_kate"]["n"] == 2 and pairs["trained_kate"]["better"] == 1
    assert pairs["trained_kate"]["mean_diff"] == pytest.approx(0.25)
