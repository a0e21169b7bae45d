"""`kate report`: result folders in, the comparison out (table, fixed/broken, seeds, plots)."""

from __future__ import annotations

import json

from hydra import compose, initialize_config_dir

from kate.cli import CONF_DIR
from kate.eval.report import paired_difference, seed_spread, sign_test
from kate.eval.report_cmd import run_report, samples_per_step
from kate.eval.run_store import RunStore


def _run(folder, sampler, seed, valid):
    store = RunStore(folder / f"seed_{seed}", {"arm": folder.name, "sampler": sampler, "seed": seed,
                                              "model": {"name": "m"}})  # fmt: skip
    for i, ok in enumerate(valid):
        store.append({"id": f"simple_python_{2 * i + 1}", "category": "simple_python", "valid": ok, "seconds": 1.0 + i})
    return folder


def test_report_compares_runs_across_seeds_and_n(tmp_path):
    direct = _run(tmp_path / "direct", "GreedySampler(max_tokens=256)", 0, [True, False, False, True])
    wide = tmp_path / "w8"
    _run(wide, "WidthSampler(n=8, temperature=1.0)", 0, [True, True, False, False])
    _run(wide, "WidthSampler(n=8, temperature=1.0)", 1, [True, True, True, False])
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("report", overrides=[f"runs={{direct: {direct}, w8: {wide}}}", f"out_dir={tmp_path / 'out'}"])
    summary = run_report(cfg)
    text = (tmp_path / "out" / "report.md").read_text()
    assert "**w8 vs direct** on 4 common entries: 1 fixed, 1 broken." in text
    assert "broken: simple_python_7" in text and "N=8 50.0% (w8)" in text
    assert summary["w8"]["across_seeds"]["simple_python"]["seeds"] == 2
    assert summary["w8"]["across_seeds"]["simple_python"]["mean"] == 0.625
    assert "| w8 | simple_python | 4 | 50.0 (s0), 75.0 (s1) | 62.5 +- 17.7 | - | - |" in text
    assert (tmp_path / "out" / "categories.png").stat().st_size > 0
    assert (tmp_path / "out" / "accuracy_vs_n.png").stat().st_size > 0
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["direct"]["samples_per_step"] == 1


def test_samples_per_step_reads_the_recorded_sampler():
    assert samples_per_step({"sampler": "WidthSampler(n=16, temperature=1.0)"}) == 16
    assert samples_per_step({"sampler": "DepthSampler(kinds=('state',), inner=GreedySampler())"}) == 1


def test_seed_spread_compares_seeds_on_the_entries_all_of_them_finished():
    def rec(i, ok, turns):
        return {"id": f"multi_turn_base_{i}", "category": "multi_turn_base", "valid": ok, "turn_fraction": turns}

    per_seed = {0: [rec(1, False, 0.5), rec(3, True, 1.0), rec(5, False, 0.0)], 1: [rec(1, False, 0.0), rec(3, False, 0.5)]}
    spread = seed_spread(per_seed)["multi_turn_base"]
    assert spread["n"] == 2 and spread["seeds"] == 2
    assert spread["per_seed"] == {0: 0.5, 1: 0.0}
    assert spread["turn_fraction"]["per_seed"] == {0: 0.75, 1: 0.25}
    assert spread["turn_fraction"]["mean"] == 0.5


def test_paired_turns_counts_dialogues_better_and_worse():
    def rec(i, turns):
        return {"id": f"multi_turn_base_{i}", "category": "multi_turn_base", "valid": False, "turn_fraction": turns}

    a = [rec(1, 0.0), rec(3, 0.5), rec(5, 0.25), rec(7, 0.0)]
    b = [rec(1, 0.5), rec(3, 0.25), rec(5, 0.25), rec(7, 0.25)]
    turns = paired_difference(a, b)["turns"]["multi_turn_base"]
    assert (turns["n"], turns["better"], turns["worse"]) == (4, 2, 1)
    assert turns["mean_diff"] == 0.125 and turns["ci95"][0] < 0.125 < turns["ci95"][1]


def test_wilson_bounds_are_exact_at_none_and_all_correct():
    from kate.eval.report import wilson

    for n in range(1, 60):
        assert wilson(0, n)[0] == 0.0 and wilson(n, n)[1] == 1.0


def test_the_sign_test_on_known_counts():
    assert sign_test(0, 0) == 1.0 and sign_test(3, 3) == 1.0
    assert sign_test(0, 4) == 0.125 and sign_test(4, 0) == 0.125  # 2 * (1/2)^4
    assert abs(sign_test(2, 8) - 0.109375) < 1e-12  # 2 * (1 + 10 + 45) / 2^10


def test_the_verifiers_selection_counts_fixed_and_broken_picks():
    from kate.train.verifier_metrics import selection

    right, wrong = {"label": True}, {"label": False}
    groups = [[{**wrong, "score": 1, "votes": 5}, {**right, "score": 2, "votes": 3}],  # fixed by the score
              [{**right, "score": 0, "votes": 5}, {**wrong, "score": 3, "votes": 3}],  # broken
              [{**right, "score": 1, "votes": 1}]]  # one candidate: no choice, not counted
    assert selection(groups) == {"entries": 2, "verifier_right": 0.5, "vote_right": 0.5, "fixed": 1, "broken": 1}
