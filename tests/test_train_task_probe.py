"""The task probe: a fixed set of held-out training-half items, solved with the default loop and
scored by the tasks' own checkers; its best mean picks the checkpoint kept in ``best/``."""

from __future__ import annotations

import json

import pytest

from kate.llm.fake import FakeChatModel
from kate.train.config import ProbeConfig
from kate.train.probe import BEST_DIR, BEST_FILE, keep_best, plot_probe
from kate.train.task_probe import TaskProbeSet, best_step, task_probe, task_probe_set


def _rows() -> list[dict]:
    rows = [{"source_id": f"irrelevance_{i}", "category": "irrelevance"} for i in (0, 2, 4, 6)]
    rows += [{"source_id": "irrelevance_0", "category": "irrelevance"}]  # a second step of the same item
    rows += [{"source_id": f"own_tools_0{i}", "category": "own_tools"} for i in (0, 2)]
    return rows


def test_the_set_is_a_fixed_seeded_sample_of_each_categorys_items():
    probe = task_probe_set(_rows(), ["irrelevance", "own_tools", "multiple"], per_category=3, seed=0)
    assert set(probe.items) == {"irrelevance", "own_tools"}  # multiple has no held-out row: left out
    assert len(probe.items["irrelevance"]) == 3 and len(set(probe.items["irrelevance"])) == 3
    assert probe.items["own_tools"] == ("own_tools_00", "own_tools_02")
    assert probe == task_probe_set(list(reversed(_rows())), ["irrelevance", "own_tools"], per_category=3, seed=0)
    assert probe.n == 5
    assert task_probe_set(_rows(), ["irrelevance"], per_category=0).n == 0


def test_items_are_solved_by_their_tasks_and_scored_by_their_checkers():
    call = '<tool_call>\n{"name": "convert_units", "arguments": {"value": 10, "from_unit": "km", "to_unit": "mi"}}\n</tool_call>'
    model = FakeChatModel(["No function here fits the question.", call, "10 km is about 6.21 miles."])
    probe = TaskProbeSet({"irrelevance": ("irrelevance_0",), "own_tools": ("own_tools_00",)})
    out = task_probe(model, probe, max_tokens=64, max_steps=4)
    assert out["irrelevance"] == {"n": 1, "valid": 1.0}  # BFCL's checker: no call where none is due
    assert out["own_tools"] == {"n": 1, "valid": 1.0, "answer_ok": 1.0}
    assert out["mean"] == 1.0


def test_an_item_outside_the_training_half_fails_loudly():
    with pytest.raises(ValueError, match="irrelevance_1"):  # odd index: the test half
        task_probe(FakeChatModel(["no"], repeat_last=True), TaskProbeSet({"irrelevance": ("irrelevance_1",)}))


def test_the_best_step_is_the_highest_mean_earliest_on_ties_never_the_start():
    rows = [{"step": 0, "tasks": {"mean": 0.9}}, {"step": 10, "tasks": {"mean": 0.4}},
            {"step": 20, "tasks": {"mean": 0.6}}, {"step": 30, "tasks": {"mean": 0.6}}, {"step": 40}]  # fmt: skip
    assert best_step(rows) == 20
    assert best_step(rows, include_start=True) == 0
    assert best_step([{"step": 5}]) is None


def test_the_best_checkpoint_is_kept_without_its_optimizer_state(tmp_path):
    for step in (10, 20, 30):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        for name in ("adapter_model.safetensors", "adapter_config.json", "optimizer.pt", "rng_state.pth"):
            (folder / name).write_text(f"{name} {step}")
    tasks = lambda v, fp="a": {"irrelevance": {"n": 2, "valid": v}, "mean": v, "fingerprint": fp}  # noqa: E731
    rows = [{"step": 10, "tasks": tasks(0.5)}]
    assert keep_best(tmp_path, rows) == tmp_path / BEST_DIR
    rows.append({"step": 20, "tasks": tasks(0.0)})
    keep_best(tmp_path, rows)  # worse: best/ keeps step 10
    best = tmp_path / BEST_DIR
    assert sorted(p.name for p in best.iterdir()) == ["adapter_config.json", "adapter_model.safetensors", BEST_FILE]
    assert (best / "adapter_model.safetensors").read_text() == "adapter_model.safetensors 10"
    assert json.loads((best / BEST_FILE).read_text())["step"] == 10
    rows.append({"step": 30, "tasks": tasks(0.1, fp="b")})  # the probe changed on resume: only its rows compete
    keep_best(tmp_path, rows)
    assert json.loads((best / BEST_FILE).read_text())["step"] == 30
    assert best_step(rows) == 30


def test_a_category_added_to_the_probe_changes_no_other_categorys_items():
    one = task_probe_set(_rows(), ["irrelevance"], per_category=2, seed=0)
    two = task_probe_set(_rows(), ["own_tools", "irrelevance"], per_category=2, seed=0)
    assert one.items["irrelevance"] == two.items["irrelevance"]


def test_task_probe_settings_are_checked_before_any_model_loads():
    from kate.train.config import SFTJobConfig
    from kate.train.sft import check_probe

    with pytest.raises(ValueError, match="unknown categories"):
        check_probe(SFTJobConfig(probe=ProbeConfig(tasks=["irrelevence"])))
    with pytest.raises(ValueError, match="per_task"):
        check_probe(SFTJobConfig(probe=ProbeConfig(per_task=0)))
    with pytest.raises(ValueError, match="task_engine=hf"):
        check_probe(SFTJobConfig(model="some/hf-folder"))
    check_probe(SFTJobConfig(model="some/hf-folder", probe=ProbeConfig(task_engine="hf")))
    check_probe(SFTJobConfig())  # the default: the 0.5B GGUF with LoRA, on llama.cpp


def test_the_curve_has_a_task_panel(tmp_path):
    rows = [{"step": s, "tasks": {"irrelevance": {"n": 2, "valid": v}, "mean": v}} for s, v in ((0, 0.5), (5, 1.0))]
    path = plot_probe(rows, tmp_path / "probe.png")
    assert path.stat().st_size > 0


def test_the_task_probe_runs_each_save_on_llamacpp_with_that_saves_adapter(tmp_path, monkeypatch):
    import kate.train.probe as probe_module
    from kate.diagnose.near_miss import NearMissTask
    from kate.train.probe import CheckpointProbe, ProbeSets

    opened = []
    monkeypatch.setattr(probe_module, "engine_client", lambda model, adapter, workers: opened.append((model, adapter)))
    sets = ProbeSets([], [], NearMissTask([]), tasks=TaskProbeSet({"irrelevance": ("irrelevance_0",)}))
    probe = CheckpointProbe(sets, tmp_path, model="m", init_adapter="start/best")
    probe._task_client(0), probe._task_client(20)
    assert opened == [("m", "start/best"), ("m", tmp_path / "checkpoint-20")]
    sets.task_engine = "hf"
    assert probe._task_client(40) is None and len(opened) == 2  # the live model generates instead
