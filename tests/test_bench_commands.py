"""The long benchmark commands, as the kate modules their scripts run them from: every `kate diagnose`
call of the diagnostics (``kate.diagnose.campaigns``, run by bench/diagnose_i.py and bench/diagnose_ii.py)
composes against the typed schema and passes the checks made before any model loads, so an hours-long
run cannot fail at its start, or at its tenth rung, on a typo; the training benchmark's eval plan
(``kate.train.eval_arms``) and the arms of bench/bfcl.py, bench/own_tools.py and bench/failure_table.py
(``kate.eval.bfcl_arms``, ``own_tools_arms``, ``failure_arms``) compose as their runs need."""

from __future__ import annotations

import json

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from kate.cli import CONF_DIR
from kate.diagnose.campaigns import diagnostics_i_calls, diagnostics_ii_calls
from kate.diagnose_cmd import check_config
from kate.eval import bfcl_arms, failure_arms, own_tools_arms
from kate.eval.config import plain
from kate.eval.model_folders import DEFAULT_MODEL, model_folder
from kate.eval.paired_counts import multi_turn_paired
from kate.train.eval_arms import check_arms, eval_plan

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "diagnose"
CHECKPOINTS = ROOT / "bench" / "runs" / "train" / "sft_checkpoints"
KEYWORD_RUN = ROOT / "bench" / "runs" / "direct" / "seed_0"
OTHER = "qwen2.5-coder-1.5b-instruct-q4_k_m"


@pytest.mark.parametrize("calls,expected", [
    (lambda: diagnostics_i_calls(["arithmetic", "bfcl"], "all", "call_first", OUT), 2),  # both sets
    (lambda: diagnostics_i_calls(["arithmetic", "bfcl"], "plan", "no_call_first", OUT), 2),  # the plan's order control
    (lambda: diagnostics_ii_calls(None, OUT / "ladder", CHECKPOINTS, KEYWORD_RUN), None),  # every rung, then the report
])  # fmt: skip
def test_every_diagnose_call_of_the_bench_commands_composes_and_checks(calls, expected):
    made = calls()
    assert made and (expected is None or len(made) == expected)
    for args, _ in made:
        assert args[0] == "diagnose"
        with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
            cfg = compose("diagnose", overrides=args[1:])  # a key or value the schema refuses fails here
        check_config(plain(cfg))


def test_the_diagnostics_refuse_an_unknown_set_or_rung_before_any_call():
    with pytest.raises(SystemExit, match="unknown set 'nope'"):
        diagnostics_i_calls(["arithmetic", "nope"], "all", "call_first", OUT)
    with pytest.raises(SystemExit, match="unknown rung 'nope'"):
        diagnostics_ii_calls("nope", OUT / "ladder", CHECKPOINTS, KEYWORD_RUN)


def test_diagnose_ii_leaves_the_trajectory_out_where_no_checkpoints_are(tmp_path):
    def names(calls):
        return [next(a for a in args if a.startswith("name=")) for args, _ in calls]

    calls = diagnostics_ii_calls(None, OUT / "ladder", tmp_path, KEYWORD_RUN)
    assert "name=trajectory" not in names(calls) and names(calls)[-1] == "name=all"
    assert all("trajectory" in next(a for a in args if a.startswith("skip=")) for args, _ in calls)
    (tmp_path / "checkpoint-5").mkdir()
    assert "name=trajectory" in names(diagnostics_ii_calls(None, OUT / "ladder", tmp_path, KEYWORD_RUN))


def _finished(folder: Path) -> None:
    (folder / "final").mkdir(parents=True)
    (folder / "final" / "adapter_config.json").write_text("{}")
    (folder / "summary.json").write_text("{}")


def test_train_eval_runs_the_trained_arms_on_a_named_stages_adapter(tmp_path):
    with pytest.raises(SystemExit, match="no trained adapter yet"):
        eval_plan(["trained_direct"], None, tmp_path)
    with pytest.raises(SystemExit, match="no finished training run there"):
        eval_plan(["trained_direct"], "grpo_answers", tmp_path)
    _finished(tmp_path / "sft")
    _finished(tmp_path / "grpo_answers")
    arms, adapter, suffix = eval_plan(["untrained_direct", "trained_direct"], None, tmp_path)
    assert arms == ["untrained_direct", "trained_direct"] and suffix == "" and adapter.parts[-3:] == ("sft", "final",
                                                                                                      "adapter.gguf")
    arms, adapter, suffix = eval_plan(["untrained_direct", "trained_direct"], "grpo_answers", tmp_path)
    assert arms == ["trained_direct"] and suffix == "_grpo_answers"
    assert adapter.parts[-3:] == ("grpo_answers", "final", "adapter.gguf")


def test_train_eval_runs_the_adopted_adapter_once_one_is_chosen(tmp_path):
    runs = tmp_path / "bench" / "runs" / "train"
    runs.mkdir(parents=True)
    with pytest.raises(SystemExit, match="adopt.json: no adapter chosen"):
        eval_plan(["trained_direct"], "adopt", runs)
    (runs / "adopt.json").write_text(json.dumps({"chosen": None, "adapter": None}))
    with pytest.raises(SystemExit, match="no adapter chosen"):
        eval_plan(["trained_direct"], "adopt", runs)
    chosen = {"chosen": "adopt_dpo", "adapter": "bench/runs/train/adopt_dpo/best/adapter.gguf"}
    (runs / "adopt.json").write_text(json.dumps(chosen))
    arms, adapter, suffix = eval_plan(["untrained_direct", "trained_direct"], "adopt", runs)
    assert arms == ["trained_direct"] and suffix == "_adopt" and adapter == runs / "adopt_dpo" / "best" / "adapter.gguf"


def test_train_eval_refuses_an_unknown_arm_or_part_before_any_model():
    check_arms(["trained_direct"], ("own_tools",))
    with pytest.raises(SystemExit, match="unknown part 'bfcl_multi'"):
        check_arms(["trained_direct"], ("bfcl_multi",))
    with pytest.raises(SystemExit, match="unknown arm 'trained'"):
        check_arms(["trained"], ("bfcl",))


def test_another_models_runs_go_apart(tmp_path):
    assert model_folder(tmp_path, None) == model_folder(tmp_path, DEFAULT_MODEL) == tmp_path
    assert model_folder(tmp_path, OTHER) == tmp_path / "models" / OTHER


def test_bfcl_bench_arms_differ_only_in_the_model_named():
    default = bfcl_arms.compose_arm("st", conf_dir=CONF_DIR)
    assert default["llm"]["model"] == DEFAULT_MODEL
    c = bfcl_arms.compose_arm("st", OTHER, conf_dir=CONF_DIR)
    assert c["llm"]["model"] == OTHER and c["llm"]["max_parallel"] == 8
    assert c["knowledge"] == default["knowledge"]  # the arm is the same, only the model differs
    with pytest.raises(SystemExit, match="unknown arm 'nope'"):
        bfcl_arms.compose_arm("nope", conf_dir=CONF_DIR)


def test_own_tools_bench_keeps_another_models_runs_apart():
    bench = ROOT / "bench"
    assert own_tools_arms.places("test", None, bench) == (bench / "runs" / "own_tools" / "test",
                                                          bench / "results" / "own_tools_test.json")
    assert own_tools_arms.places("train", DEFAULT_MODEL, bench) == (bench / "runs" / "own_tools",
                                                                    bench / "results" / "own_tools_baseline.json")
    runs, result = own_tools_arms.places("test", OTHER, bench)
    assert runs == bench / "runs" / "models" / OTHER / "own_tools" / "test"
    assert result.name == "own_tools_test.json" and result.parent.name == OTHER
    default = own_tools_arms.compose_arm("direct_answer", "test", conf_dir=CONF_DIR)
    other = own_tools_arms.compose_arm("direct_answer", "test", "m", conf_dir=CONF_DIR)
    assert default["llm"]["model"] == DEFAULT_MODEL and other["llm"]["model"] == "m"
    assert {k: v for k, v in other.items() if k != "llm"} == {k: v for k, v in default.items() if k != "llm"}


def test_own_tools_pairs_answers_on_the_questions_both_ran():
    base = [{"id": "q1", "answer_ok": True}, {"id": "q2", "answer_ok": False}, {"id": "q3", "answer_ok": False},
            {"id": "q4", "answer_ok": True}]
    arm = [{"id": "q1", "answer_ok": False}, {"id": "q2", "answer_ok": True}, {"id": "q3", "answer_ok": True},
           {"id": "q5", "answer_ok": True}]  # q4 only in base, q5 only in arm: neither is counted
    paired = own_tools_arms.paired_answers(base, arm)
    assert {k: paired[k] for k in ("n", "base_right", "arm_right", "fixed", "broken")} == {
        "n": 3, "base_right": 1, "arm_right": 2, "fixed": 2, "broken": 1}
    assert paired["p"] == 1.0 and paired["arm_share_pct"] == 66.7
    low, high = paired["wilson_pct"]
    assert 0 < low < 66.7 < high < 100
    assert own_tools_arms.paired_answers(base, [])["n"] == 0


def test_failure_table_arms_compose_on_the_train_fold_and_pair_dialogues():
    kate_arm = failure_arms.compose_arm("st_kate", OTHER, conf_dir=CONF_DIR)
    assert kate_arm["llm"]["model"] == OTHER and kate_arm["split"] == "train"
    shipped = failure_arms.compose_arm("st", conf_dir=CONF_DIR)["knowledge"]["multi_turn"]
    assert (shipped["top_k"], shipped["threshold"]) == (1, 0.7)
    assert (kate_arm["knowledge"]["multi_turn"]["top_k"], kate_arm["knowledge"]["multi_turn"]["threshold"]) == (3, 0.5)
    paired = multi_turn_paired({"direct": {"a": 1, "b": 2, "c": 0}, "st": {"a": 2, "b": 1, "c": 0, "d": 5}})
    assert paired == {"st": {"dialogues": 3, "better": 1, "worse": 1, "turns_passed": 3, "direct_turns_passed": 3}}
    controlled = multi_turn_paired({"es": {"a": 1, "b": 0}, "es_fail": {"a": 1, "b": 1}}, {"es_fail": "es"})
    assert controlled == {"es_fail": {"dialogues": 2, "better": 1, "worse": 0, "turns_passed": 2, "es_turns_passed": 1}}


def test_the_es_arms_differ_only_in_the_base_written_from_failures():
    shipped, failures = (failure_arms.compose_arm(arm, OTHER, conf_dir=CONF_DIR) for arm in ("es_kate_act",
                                                                                             "es_fail_kate_act"))
    assert shipped["knowledge"]["multi_turn"]["kb"] == "bfcl_train"
    assert failures["knowledge"]["multi_turn"]["kb"] == "bfcl_es_attempts"
    assert {**failures["knowledge"]["multi_turn"], "kb": "bfcl_train"} == shipped["knowledge"]["multi_turn"]
    assert (shipped["knowledge"]["multi_turn"]["top_k"], shipped["knowledge"]["multi_turn"]["threshold"]) == (3, 0.5)
    assert shipped["knowledge"]["multi_turn"]["types"] == ["ES", "ST"] and shipped["echo_policy"] == "act"


@pytest.mark.parametrize("script", ["diagnose_i", "diagnose_ii", "train_cpu", "bfcl", "own_tools", "failure_table",
                                    "bfcl_report", "strict_vs_keyword", "own_tools_kb"])  # fmt: skip
def test_the_scripts_help_runs_nothing(script):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(ROOT / "bench" / f"{script}.py"), "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:")
