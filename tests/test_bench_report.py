"""kate.eval.bfcl_report (bench/bfcl_report.py runs it): the benchmark report from stored records only
(small synthetic records)."""

from __future__ import annotations

import json
from pathlib import Path

from kate.eval import bfcl_report
from kate.eval.report import comparison_report, markdown_table, summarize
from kate.eval.run_store import RunStore


def _dialogue(i: int, turns: float, valid: bool = False, steps: list[list[dict]] | None = None) -> dict:
    return {"id": f"multi_turn_base_{i}", "category": "multi_turn_base", "valid": valid, "turn_fraction": turns,
            "turns": [{"steps": s} for s in (steps or [])]}  # fmt: skip


def _single(i: int, valid: bool) -> dict:
    return {"id": f"simple_python_{i}", "category": "simple_python", "valid": valid}


TOOLS = [{"type": "function", "function": {"name": "ls", "parameters": {
    "type": "object", "properties": {"a": {"type": "boolean"}}, "required": []}}}]  # fmt: skip


def _candidate(calls: list[dict], votes: int = 1, kind: str | None = None) -> dict:
    return {"kind": kind or ("call" if calls else "no_call"), "calls": calls, "key": [json.dumps(calls)], "votes": votes}


def _step(chosen: dict, others: list[dict], executed: bool = True) -> dict:
    return {"executed": executed, "calls": chosen["calls"], "vote": {"chosen": chosen, "candidates": [chosen, *others]}}


BAD = [{"name": "ls", "arguments": {"mode": "l"}}]  # no such parameter
GOOD = [{"name": "ls", "arguments": {"a": True}}]
UNKNOWN = [{"name": "cat", "arguments": {}}]


def test_table_gives_each_cell_its_own_n_where_arms_differ():
    runs = {"a": [_single(1, True), *[_dialogue(2 * i + 1, 0.5) for i in range(5)]],
            "b": [_single(1, False), *[_dialogue(2 * i + 1, 0.25) for i in range(30)]]}  # fmt: skip
    table = markdown_table({name: summarize(r) for name, r in runs.items()})
    row = next(line for line in table.splitlines() if line.startswith("| multi_turn_base"))
    assert "| per cell |" in row and "(n=5)" in row and "(n=30)" in row
    single = next(line for line in table.splitlines() if line.startswith("| simple_python"))
    assert single.startswith("| simple_python | 1 |") and "(n=" not in single


def test_comparison_report_says_on_how_many_common_entries():
    a = [_single(1, True), _single(3, False), _dialogue(1, 0.0), _dialogue(3, 0.5)]
    b = [_single(1, True), _single(3, True), _dialogue(1, 0.5)]
    text = comparison_report({"a": a, "b": b}, "t", ["note"])
    assert "**b vs a** on 3 common entries: 1 fixed, 0 broken. (b ran 3 entries, a 4.)" in text
    assert "- simple_python: +1 / -0 of 2 common" in text
    assert "better in 1, worse in 0 of 1 common dialogues" in text


def test_common_dialogues_compares_the_arms_on_the_dialogues_all_finished():
    runs = {"direct": [_dialogue(1, 0.0), _dialogue(3, 0.5), _dialogue(5, 0.25), _dialogue(7, 1.0)],
            "st_w8": [_dialogue(1, 0.5), _dialogue(3, 0.5), _dialogue(5, 0.0)],
            "st_w8v": [_dialogue(1, 0.25), _dialogue(3, 0.75), _dialogue(5, 0.0), _single(1, True)]}  # fmt: skip
    common = bfcl_report.common_dialogues(runs)
    assert common["n"] == 3 and common["ids"] == ["multi_turn_base_1", "multi_turn_base_3", "multi_turn_base_5"]
    assert common["dialogues_run"] == {"direct": 4, "st_w8": 3, "st_w8v": 3}
    assert common["per_arm"]["direct"]["turn_fraction"] == 0.25
    assert common["per_arm"]["st_w8"]["turn_fraction"] == 1 / 3
    pair = common["pairs"]["st_w8v vs st_w8"]
    assert (pair["n"], pair["better"], pair["worse"]) == (3, 1, 1)
    assert abs(pair["mean_diff"]) < 1e-12


def test_schema_fit_counts_unfit_choices_and_fitting_alternatives():
    steps = [
        _step(_candidate(BAD, 3), [_candidate(GOOD)]),  # unfit, a call alternative fits
        _step(_candidate(UNKNOWN, 2), [_candidate([])]),  # unfit, only "no call" fits
        _step(_candidate(BAD, 2), [_candidate(UNKNOWN), _candidate([], kind="malformed")]),  # unfit, nothing fits
        _step(_candidate(GOOD, 4), [_candidate(BAD)]),  # fits
        _step(_candidate([], 5), [_candidate(BAD)]),  # no call: nothing to hold against it
        _step(_candidate(BAD, 3), [_candidate(GOOD)], executed=False),  # a repeat, not executed
        {"executed": True, "calls": GOOD, "vote": None},  # greedy step: not voted
    ]
    fit = bfcl_report.schema_fit([_dialogue(1, 0.0, steps=[steps[:4], steps[4:]]), _single(1, True)], lambda i, t: TOOLS)
    assert fit["dialogues"] == 1
    assert fit["all_steps"] == {"voted": 6, "chosen_unfit": 4, "alternative_fits": 3, "call_alternative_fits": 2}
    assert fit["executed_steps"] == {"voted": 5, "chosen_unfit": 3, "alternative_fits": 2, "call_alternative_fits": 1}
    assert [(s["turn"], s["step"], s["executed"]) for s in fit["unfit_steps"]] == [(0, 0, True), (0, 1, True),
                                                                                 (0, 2, True), (1, 1, False)]  # fmt: skip


def test_valid_flags_agree_recomputes_the_votes_own_test():
    chosen = {**_candidate(GOOD), "valid": True}
    step = _step(chosen, [{**_candidate(BAD), "valid": False}, {**_candidate(UNKNOWN), "valid": True}])
    check = bfcl_report.valid_flags_agree([_dialogue(1, 0.0, steps=[[step]])], lambda i, t: TOOLS)
    assert check == {"candidates_checked": 3, "disagree": 1}


def _store(runs_dir: Path, arm: str, records: list[dict]) -> None:
    store = RunStore(runs_dir / arm / "seed_0", {
        "arm": arm, "model": {"name": "m"}, "sampler": "GreedySampler()", "bfcl_eval": "x", "data_sha256": "d",
        "scoring_model": "s", "knowledge": None, "entries": [r["id"] for r in records]})  # fmt: skip
    for record in records:
        store.append(record)


def test_report_writes_the_table_and_the_common_figures_from_records(tmp_path):
    runs_dir, results = tmp_path / "runs", tmp_path / "results"
    unfit = [[_step(_candidate(BAD, 3), [_candidate(GOOD)])]]
    _store(runs_dir, "direct", [_single(1, True), _dialogue(1, 0.0), _dialogue(3, 0.5), _dialogue(5, 0.0)])
    _store(runs_dir, "st_w8", [_single(1, True), _dialogue(1, 0.5, steps=unfit), _dialogue(3, 0.5), _dialogue(5, 0.5)])
    _store(runs_dir, "st_w8v", [_single(1, False), _dialogue(1, 0.5), _dialogue(3, 1.0, valid=True)])
    common = bfcl_report.report(runs_dir, results, tools_at=lambda i, t: TOOLS)
    assert common["common_dialogues"]["n"] == 2
    assert common["schema_fit"]["all_steps"]["chosen_unfit"] == 1
    text = (results / "bfcl_report.md").read_text()
    assert "| multi_turn_base | per cell |" in text and "(n=2)" in text and "(n=3)" in text
    assert "## Common dialogues: the 2 multi_turn_base dialogues direct, st_w8, st_w8v all finished" in text
    assert "**st_w8v vs st_w8**, paired on the 2 common dialogues: better in 1, worse in 0" in text
    assert "| every voted step | 1 | 1 | 1 | 1 |" in text
    assert json.loads((results / "bfcl_common.json").read_text()) == json.loads(json.dumps(common))
    assert json.loads((results / "bfcl_st_w8v.json").read_text())["entries_done"] == {"0": 3}
    assert (results / "bfcl_categories.png").stat().st_size > 0
