"""The long benchmark commands of the diagnostics (bench/diagnose_i.py, bench/diagnose_ii.py): every
`kate diagnose` call they make composes against the typed schema and passes the checks made before any
model loads, so an hours-long run cannot fail at its start, or at its tenth rung, on a typo."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from kate.cli import CONF_DIR
from kate.diagnose_cmd import check_config
from kate.eval.config import plain

from .bench_scripts import load_bench

ROOT = Path(__file__).resolve().parents[1]


def _calls(module, monkeypatch, argv: list[str]) -> list[list[str]]:
    calls = []
    monkeypatch.setattr(module, "run_kate", lambda args, hydra_dir: calls.append(list(args)))
    monkeypatch.setattr(module, "stop_on_sigterm", lambda: None)
    monkeypatch.setattr(sys, "argv", [module.__name__, *argv])
    module.main()
    return calls


@pytest.mark.parametrize("script,argv,expected", [
    ("diagnose_i", [], 2),  # both sets
    ("diagnose_i", ["--only", "plan", "--plan-order", "no_call_first"], 2),  # the plan's order control
    ("diagnose_ii", [], None),  # every rung (the trajectory where checkpoints are on disk), then the report
])  # fmt: skip
def test_every_diagnose_call_of_the_bench_commands_composes_and_checks(script, argv, expected, monkeypatch):
    module = load_bench(script)
    calls = _calls(module, monkeypatch, argv)
    assert calls and (expected is None or len(calls) == expected)
    for args in calls:
        assert args[0] == "diagnose"
        with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
            cfg = compose("diagnose", overrides=args[1:])  # a key or value the schema refuses fails here
        check_config(plain(cfg))


def test_diagnose_ii_leaves_the_trajectory_out_where_no_checkpoints_are(monkeypatch, tmp_path):
    module = load_bench("diagnose_ii")
    monkeypatch.setattr(module, "CHECKPOINTS", tmp_path)
    calls = _calls(module, monkeypatch, [])
    names = [next(a for a in args if a.startswith("name=")) for args in calls]
    assert "name=trajectory" not in names and names[-1] == "name=all"
    assert all("trajectory" in next(a for a in args if a.startswith("skip=")) for args in calls)
    (tmp_path / "checkpoint-5").mkdir()
    calls = _calls(module, monkeypatch, [])
    assert "name=trajectory" in [next(a for a in args if a.startswith("name=")) for args in calls]


def test_train_cpu_eval_runs_only_the_parts_named(monkeypatch):
    import types

    module = load_bench("train_cpu")
    seen: dict = {}
    fake = types.ModuleType("bench_train_eval")
    fake.run_arms = lambda arms, adapter, **kw: seen.update(arms=arms, adapter=adapter, **kw)
    monkeypatch.setitem(sys.modules, "bench_train_eval", fake)
    monkeypatch.setattr(module, "stop_on_sigterm", lambda: None)
    monkeypatch.setattr(module, "_done", lambda folder: True)
    monkeypatch.setattr(sys, "argv", ["train_cpu", "--stages", "eval", "--arms", "trained_direct",
                                      "--adapter", "grpo_answers", "--parts", "own_tools"])
    module.main()
    assert seen["parts"] == ("own_tools",) and seen["suffix"] == "_grpo_answers"
    assert seen["adapter"].parts[-3:] == ("grpo_answers", "final", "adapter.gguf")


def test_train_eval_refuses_an_unknown_part_before_any_model():
    module = load_bench("bench_train_eval")
    with pytest.raises(SystemExit, match="unknown part 'bfcl_multi'"):
        module.run_arms(["trained_direct"], Path("none.gguf"), own_tools_max_steps=4, parts=("bfcl_multi",))


def test_bfcl_bench_keeps_another_models_runs_apart():
    bfcl = load_bench("bfcl")
    assert bfcl.places(None) == (bfcl.RUNS, bfcl.RESULTS)
    assert bfcl.places(bfcl.DEFAULT_MODEL) == (bfcl.RUNS, bfcl.RESULTS)
    runs, results = bfcl.places("qwen2.5-coder-1.5b-instruct-q4_k_m")
    assert runs == bfcl.RUNS / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert results == bfcl.RESULTS / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert bfcl.compose_arm("st")["llm"]["model"] == bfcl.DEFAULT_MODEL
    c = bfcl.compose_arm("st", "qwen2.5-coder-1.5b-instruct-q4_k_m")
    assert c["llm"]["model"] == "qwen2.5-coder-1.5b-instruct-q4_k_m" and c["llm"]["max_parallel"] == 8
    assert c["knowledge"] == bfcl.compose_arm("st")["knowledge"]  # the arm is the same, only the model differs


def test_own_tools_bench_keeps_another_models_runs_apart():
    own = load_bench("own_tools")
    assert own.places("test", None) == (own.RUNS["test"], own.RESULT["test"])
    assert own.places("train", own.DEFAULT_MODEL) == (own.RUNS["train"], own.RESULT["train"])
    runs, result = own.places("test", "qwen2.5-coder-1.5b-instruct-q4_k_m")
    assert runs == ROOT / "bench" / "runs" / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m" / "own_tools" / "test"
    assert result.name == "own_tools_test.json" and result.parent.name == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    default, other = own.compose_arm("direct_answer", "test"), own.compose_arm("direct_answer", "test", "m")
    assert default["llm"]["model"] == own.DEFAULT_MODEL and other["llm"]["model"] == "m"
    assert {k: v for k, v in other.items() if k != "llm"} == {k: v for k, v in default.items() if k != "llm"}


def test_failure_table_keeps_another_models_train_fold_runs_apart_and_pairs_dialogues():
    table = load_bench("failure_table")
    assert table.places(None) == (table.RUNS, table.RESULT)
    runs, result = table.places("qwen2.5-coder-1.5b-instruct-q4_k_m")
    assert runs == table.RUNS / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert result == table.RESULT.parent / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m" / "failure_table"
    kate_arm = table.compose_arm("st_kate", "qwen2.5-coder-1.5b-instruct-q4_k_m")
    assert kate_arm["llm"]["model"] == "qwen2.5-coder-1.5b-instruct-q4_k_m" and kate_arm["split"] == "train"
    shipped = table.compose_arm("st")["knowledge"]["multi_turn"]
    assert (shipped["top_k"], shipped["threshold"]) == (1, 0.7)
    assert (kate_arm["knowledge"]["multi_turn"]["top_k"], kate_arm["knowledge"]["multi_turn"]["threshold"]) == (3, 0.5)
    paired = table.multi_turn_paired({"direct": {"a": 1, "b": 2, "c": 0}, "st": {"a": 2, "b": 1, "c": 0, "d": 5}})
    assert paired == {"st": {"dialogues": 3, "better": 1, "worse": 1, "turns_passed": 3, "direct_turns_passed": 3}}
    controlled = table.multi_turn_paired({"es": {"a": 1, "b": 0}, "es_fail": {"a": 1, "b": 1}}, {"es_fail": "es"})
    assert controlled == {"es_fail": {"dialogues": 2, "better": 1, "worse": 0, "turns_passed": 2, "es_turns_passed": 1}}


def test_the_es_arms_differ_only_in_the_base_written_from_failures():
    table = load_bench("failure_table")
    shipped, failures = (table.compose_arm(arm, "qwen2.5-coder-1.5b-instruct-q4_k_m") for arm in ("es_kate_act",
                                                                                                   "es_fail_kate_act"))
    assert shipped["knowledge"]["multi_turn"]["kb"] == "bfcl_train"
    assert failures["knowledge"]["multi_turn"]["kb"] == "bfcl_es_attempts"
    assert {**failures["knowledge"]["multi_turn"], "kb": "bfcl_train"} == shipped["knowledge"]["multi_turn"]
    assert (shipped["knowledge"]["multi_turn"]["top_k"], shipped["knowledge"]["multi_turn"]["threshold"]) == (3, 0.5)
    assert shipped["knowledge"]["multi_turn"]["types"] == ["ES", "ST"] and shipped["echo_policy"] == "act"
