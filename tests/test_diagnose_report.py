"""The diagnostics report renders from small hand-made result folders: markdown with every section's
n, and the PNGs beside it."""

from __future__ import annotations

import json

import numpy as np

from kate.diagnose.report import plot_alluvial, write_report
from kate.diagnose.report_knowing_doing import _plan_order_note
from kate.io import atomic_write_json


def _four(n_c, n_nc, un_c, un_nc):
    n = n_c + n_nc + un_c + un_nc
    return {"n": n, "N-C": n_c, "N-NC": n_nc, "UN-C": un_c, "UN-NC": un_nc, "mismatch": (n_nc + un_c) / n,
            "underuse": n_nc / n, "overuse": un_c / n}  # fmt: skip


def _folders(root):
    atomic_write_json(root / "necessity" / "summary.json", {
        "n": 8, "config": {"samples": 2, "temperature": 0.7}, "histogram": {"0": 3, "1": 2, "2": 3},
        "labels": {"r=2": {"necessary": 5, "unnecessary": 3}, "r=1": {"necessary": 3, "unnecessary": 5}}})  # fmt: skip
    atomic_write_json(root / "breakdown" / "summary.json", {
        "n": 8, "accuracy": 0.625, "four_way": {"r=2": _four(3, 2, 1, 2), "r=1": _four(2, 1, 2, 3)},
        "by_category": {"two_step_easy": _four(1, 1, 0, 2)}, "model": {"name": "tiny"},
        "paper_arithmetic_mismatch": [0.265, 0.54]})  # fmt: skip
    layers, positions = [0, 1, 2], [-2, -1]
    mcc = np.linspace(-0.2, 0.9, 6).reshape(3, 2).tolist()
    atomic_write_json(root / "probes" / "results.json", {
        "n": 8, "layers": layers, "positions": positions, "cosine": np.full((3, 2), 0.3).tolist(),
        "necessity": {"mcc": mcc, "n_train": 5, "n_test": 3}, "action": {"error": "one class only"},
        "when2tool": {"necessity": {"auroc": 0.75, "accuracy": 0.66, "n_train": 5, "n_test": 3}, "action": None}})  # fmt: skip
    rows = [{"id": f"i{i}", "category": "c", "split": "test" if i < 6 else "train", "necessary": i % 2 == 0,
             "called": i % 3 == 0, "belief": i / 8, "p_call": 1 - i / 8} for i in range(8)]  # fmt: skip
    (root / "probes" / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    atomic_write_json(root / "pcall" / "results.json", {"n": 8, "opening": {"ids": [7]}, "agreement": {
        "n": 8, "agree": 0.75, "p_high_called": 2, "p_high_not_called": 1, "p_low_called": 1, "p_low_not_called": 4}})  # fmt: skip
    atomic_write_json(root / "plan" / "summary.json", {
        "n": 8, "plans_parsed": 6, "plan_parse_rate": 0.75, "plan_accuracy": 0.5, "execution_accuracy": 0.375,
        "gap": 0.125, "followed": 3, "follow_rate": 0.5, "said_call_did_not": 2, "said_no_call_called": 1})  # fmt: skip
    row = {
        "tau": 0.5,
        "n": 6,
        "steered_no_tool": 3,
        "steered_tool": 3,
        "calls": 3,
        "calls_base": 2,
        "call_reduction": -0.5,
        "mismatch": 0.5,
        "mismatch_base": 0.5,
        "accuracy": 0.5,
        "accuracy_base": 0.5,
    }
    atomic_write_json(root / "gate_soft" / "sweep.json", {"mode": "soft", "tau_high": None, "held_out_only": True,
                                                          "rows": [{**row, "tau": 0.3}, row]})  # fmt: skip


def test_the_report_renders_from_hand_made_folders(tmp_path):
    _folders(tmp_path)
    text = write_report(tmp_path, title="tiny").read_text()
    assert text.startswith("# tiny") and "Model: `tiny`." in text
    assert "| r=2 | 5 | 3 |" in text and "Items right k of N times: 0: 3, 1: 2, 2: 3" in text
    assert "| r=2 | 8 | 3 | 2 | 1 | 2 | 37.5% | 25.0% | 12.5% |" in text
    assert "26.5%-54.0%" in text  # the paper's range beside
    assert "| two_step_easy | 4 | 1 | 1 | 0 | 2 | 25.0% |" in text
    assert "n_test=3" in text and "could not train: one class only" in text
    assert "held-out AUROC 0.750" in text and "cosine(w_c, w_a): last position, last layer 0.300" in text
    assert "agrees with greedy calling on 75.0% of n = 8 items" in text
    assert "| 50.0% | 37.5% | 12.5% | 50.0% of 6 |" in text
    assert "| 0.5 | 6 | 3 / 3 | 3 (2) | +50.0% | 50.0% (50.0%) | 50.0% (50.0%) |" in text
    for png in ("mismatch.png", "mcc.png", "cosine.png", "alluvial.png", "belief_vs_pcall.png", "gate_soft.png"):
        assert (tmp_path / png).stat().st_size > 1000, png
        assert f"]({png})" in text


def test_a_report_of_an_empty_folder_says_what_is_missing(tmp_path):
    text = write_report(tmp_path).read_text()
    assert text.count("Not run") >= 4 and not list(tmp_path.glob("*.png"))


def test_the_alluvial_counts_the_four_flows(tmp_path):
    rows = [
        {"necessary": n, "belief": b, "called": c}
        for n, b, c in [
            (True, 0.9, True),
            (True, 0.9, False),
            (False, 0.1, True),
            (False, 0.2, False),
            (False, 0.8, False),
        ]
    ]
    assert plot_alluvial(rows, tmp_path / "a.png", "flows") == "a.png" and (tmp_path / "a.png").stat().st_size > 1000


def test_the_checkpoint_trajectory_section_shows_its_table_and_log_scale_png(tmp_path):
    from kate.diagnose.first_token import PLOT_FILE, TRAJECTORY_FILE, plot_trajectory

    block = lambda p: {"n": 2, "mean": p, "geomean": p, "median": p, "min": p / 2, "calls": 0.5}  # noqa: E731
    rows = [{"checkpoint": f"checkpoint-{s}", "step": s, "summary": {"call_due": block(p), "no_call_due": block(p / 10)}}
            for s, p in ((10, 0.5), (20, 0.004))]  # fmt: skip
    folder = tmp_path / "trajectory"
    folder.mkdir()
    (folder / TRAJECTORY_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    plot_trajectory(rows, folder / PLOT_FILE)
    report = write_report(tmp_path).read_text()
    assert "| checkpoint-20 | 20 | 0.004 | 0.002 | 0.0004 |" in report
    assert f"![trajectory](trajectory/{PLOT_FILE})" in report and "## Verbatim replay\n\nNot run." in report
    assert "## Necessity" not in report and "## Gate" not in report  # only the ladder ran here: Diagnostics I left out


def test_a_gate_without_a_trainable_probe_says_why(tmp_path):
    atomic_write_json(tmp_path / "probes" / "results.json", {
        "n": 4, "layers": [0], "positions": [-1], "cosine": None,
        "necessity": {"mcc": [[0.0]], "n_train": 3, "n_test": 1}, "action": {"error": "one class"},
        "when2tool": {"necessity": {"error": "the training labels hold one class only"}, "action": None}})  # fmt: skip
    (tmp_path / "probes" / "items.jsonl").write_text(json.dumps({"split": "test", "necessary": True, "called": True}))
    text = write_report(tmp_path).read_text()
    assert "Not run: When2Tool's necessity probe could not train (the training labels hold one class only)" in text
    assert "the held-out split holds one necessity class only, so its MCC is 0 by definition" in text


def test_the_plan_order_note_says_how_far_the_order_moves_the_plans():
    first = {"order": "call_first", "plan_says_call": 0, "plans_parsed": 10}
    control = {"order": "no_call_first", "plan_says_call": 9, "plans_parsed": 9}
    assert _plan_order_note([first]) == []
    note = _plan_order_note([first, control])[0]
    assert "0 of 10 (0.0%)" in note and "9 of 9 (100.0%)" in note and "moves 100.0% of the plans" in note
