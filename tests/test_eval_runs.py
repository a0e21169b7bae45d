"""BFCL runs users can trust: a killed run resumes exactly (no record lost or written twice), every
result folder carries what determines its records, and `kate eval` / `kate main` run end to end.
The scripted fake model drives the logic; the checkers and data are BFCL's own."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from kate.cli import CONF_DIR
from kate.eval.main_job import run_main
from kate.eval.run_eval import run_eval
from kate.eval.run_store import RunMismatch, RunStore, load_run

# A child process runs this arm slowly (the fake model sleeps per request) until the test kills it.
ARM = """
import sys, time
from kate.agent import Policy
from kate.bfcl.data import load_entries
from kate.eval.arm import run_arm
from kate.llm.fake import FakeChatModel
from kate.sampling.policy import GreedySampler
from kate.tasks.bfcl import BFCLTask

def answer(messages, tools, n):
    time.sleep(float(sys.argv[2]))
    user = [m for m in messages if m["role"] == "user"][-1]["content"]
    if len(user) % 2 or not tools:
        return ["I would rather not call a tool."] * n
    name = tools[0]["function"]["name"]
    return ['<tool_call>{"name": "' + name + '", "arguments": {}}</tool_call>'] * n

task = BFCLTask(load_entries("irrelevance", "test", 4) + load_entries("simple_python", "test", 4))
run_arm("arm", task, Policy(FakeChatModel([answer], repeat_last=True), GreedySampler()), sys.argv[1], seeds=[0],
        config={"test": True}, workers=int(sys.argv[3]))
"""


def _run_arm(folder: Path, delay: float, workers: int = 1) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", ARM, str(folder), str(delay), str(workers)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _comparable(records: list[dict]) -> dict[str, dict]:
    return {r["id"]: {k: v for k, v in r.items() if k != "seconds"} for r in records}


@pytest.mark.parametrize("workers", [1, 4])  # 4: several entries in flight when the kill comes
def test_a_killed_run_resumes_exactly(tmp_path, workers):
    killed = tmp_path / "killed"
    records_path = killed / "seed_0" / "records.jsonl"
    proc = _run_arm(killed, 0.5, workers)
    deadline = time.monotonic() + 300
    while _lines(records_path) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.kill()
    proc.wait()
    done_before = _lines(records_path)
    assert 3 <= done_before < 8
    with records_path.open("a") as handle:  # a record cut short by the crash
        handle.write('{"id": "simple_python_99", "category": "simple_py')

    assert _run_arm(killed, 0.0, workers).wait() == 0
    _, resumed = load_run(killed / "seed_0")
    ids = [json.loads(line)["id"] for line in records_path.read_text().splitlines() if line.endswith("}")]
    assert len(ids) == len(set(ids)) == 8  # nothing lost, nothing twice, the torn line redone as nothing
    assert _run_arm(tmp_path / "straight", 0.0).wait() == 0
    assert _comparable(resumed) == _comparable(load_run(tmp_path / "straight" / "seed_0")[1])


def test_a_folder_of_another_configuration_is_refused_by_name(tmp_path):
    RunStore(tmp_path, {"arm": "a", "seed": 0, "config": {"n": 1}, "items": ["x"]})
    with pytest.raises(RunMismatch, match=str(tmp_path / "meta.json")):
        RunStore(tmp_path, {"arm": "a", "seed": 1, "config": {"n": 1}})
    with pytest.raises(RunMismatch, match="another configuration"):
        RunStore(tmp_path, {"arm": "a", "seed": 0, "config": {"n": 2}})
    grown = RunStore(tmp_path, {"arm": "renamed", "seed": 0, "config": {"n": 1}, "items": ["x", "y"], "workers": 4})
    assert json.loads((tmp_path / "meta.json").read_text())["items"] == ["x", "y"] == grown.meta["items"]
    (tmp_path / "meta.json").write_text("{not json")
    with pytest.raises(RunMismatch, match="not valid JSON"):
        RunStore(tmp_path, {"arm": "a", "seed": 0})


# the main job's slice cut down: a category set to 0 is left out
SLICE = "{simple_python: 1, irrelevance: 1, multi_turn_base: 1, multiple: 0, parallel: 0, live_simple: 0}"


def _compose(name: str, overrides: list[str]):
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose(name, overrides=overrides)


def test_kate_eval_records_what_determines_a_run_and_reports_seeds(tmp_path):
    cfg = _compose("eval", ["llm=fake", "sampling=width", "sampling.n=2", "categories=[simple_python,multi_turn_base]",
                            "limit=1", "seeds=[0,1]", "max_steps=2", f"out_dir={tmp_path}"])  # fmt: skip
    summary = run_eval(cfg)
    assert summary["seeds"] == [0, 1] and summary["across_seeds"]["simple_python"]["seeds"] == 2
    meta, records = load_run(tmp_path / "seed_1")
    assert meta["config"]["sampling"]["n"] == 2 and meta["seed"] == 1 and meta["policy"]["model"]["name"] == "fake"
    assert meta["task"]["bfcl_eval"] and meta["task"]["scoring_model"] and meta["task"]["split"] == "test"
    assert all(len(h) == 64 for h in meta["data"].values()) and set(meta["data"]) == {"simple_python", "multi_turn_base"}
    assert meta["items"] == ["simple_python_1", "multi_turn_base_1"]
    assert meta["policy"]["settings"]["max_steps"] == 2 and "WidthSampler(n=2" in meta["policy"]["sampler"]
    assert meta["runtime"]["cpu_count"] and meta["config"]["loop"]["one_call"] is True
    single = next(r for r in records if r["category"] == "simple_python")
    assert single["prompt"] and single["outputs"] == ["I have no tool to call."] * 2 and single["valid"] is False
    multi = next(r for r in records if r["category"] == "multi_turn_base")
    assert multi["turns_total"] >= 1 and "turn_fraction" in multi
    assert (tmp_path / "report.md").exists() and (tmp_path / "categories.png").stat().st_size > 0


def test_kate_main_compares_kate_with_direct_on_its_slice(tmp_path):
    cfg = _compose("main", ["llm=fake", "llm@arms.adapter.llm=fake", "arms.adapter.llm.name=tuned", "max_steps=2",
                            f"out_dir={tmp_path}", f"slice.categories={SLICE}"])  # fmt: skip
    summaries = run_main(cfg)
    assert set(summaries) == {"direct", "kate", "adapter"}
    report = (tmp_path / "report.md").read_text()
    assert "**kate vs direct** on 3 common entries" in report and "multi_turn_base turns passed:" in report
    assert "**adapter vs direct**" in report and "fake (direct), fake (kate), tuned (adapter)" in report
    adapter_meta, _ = load_run(tmp_path / "adapter" / "seed_0")
    assert adapter_meta["policy"]["model"]["name"] == "tuned"  # the arm's own model client
    kate_meta, kate_records = load_run(tmp_path / "kate" / "seed_0")
    assert kate_meta["policy"]["knowledge"]["single_turn"]["manifest"]["embedding"]["sha256"]  # the shipped base
    assert all(r["vote"]["method"] == "valid_majority" for r in kate_records if r["category"] != "multi_turn_base")
    wall = json.loads((tmp_path / "wall_seconds.json").read_text())
    assert set(wall) == {"direct", "kate", "adapter"} and all(seconds >= 0 for seconds in wall.values())


def test_changing_one_arm_of_kate_main_keeps_the_other_arms_folders(tmp_path):
    base = ["llm=fake", "llm@arms.adapter.llm=fake", "max_steps=2", f"out_dir={tmp_path}",
            "slice.categories={simple_python: 0, multiple: 0, parallel: 0, live_simple: 0, multi_turn_base: 0, irrelevance: 1}"]
    run_main(_compose("main", base))
    direct = (tmp_path / "direct" / "seed_0" / "meta.json").read_text()
    with pytest.raises(RunMismatch, match=str(tmp_path / "kate" / "seed_0" / "meta.json")):
        run_main(_compose("main", [*base, "arms.kate.sampling.n=2"]))  # direct resumes; only kate's folder differs
    assert (tmp_path / "direct" / "seed_0" / "meta.json").read_text() == direct


@pytest.mark.parametrize("override,key", [
    ("system_prompt=kat", "system_prompt"), ("sampling.aggregate=best", "aggregate"), ("sampling.nn=3", "sampling.nn"),
    ("+knowledge.single_turn.top_kk=3", "top_kk"), ("repeat_policy=sometimes", "repeat_policy"),
])  # fmt: skip
def test_kate_eval_refuses_a_bad_config_at_start_naming_the_key(tmp_path, override, key):
    from hydra.errors import ConfigCompositionException

    overrides = ["llm=fake", "arm=st", "limit=1", "categories=[simple_python]", f"out_dir={tmp_path}", override]
    if override.startswith("sampling.aggregate"):
        overrides[1] = "arm=w8v"
    with pytest.raises((ValueError, ConfigCompositionException), match=key):
        run_eval(_compose("eval", overrides))
    assert not (tmp_path / "seed_0").exists()  # nothing ran


def test_a_typo_under_arms_fails_against_the_schema():
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigKeyError

    import kate.configs  # noqa: F401
    from kate.eval.config import MainConfig

    with pytest.raises(ConfigKeyError, match="knowlege"):
        OmegaConf.merge(OmegaConf.structured(MainConfig), {"arms": {"kate": {"sampling": {}, "knowlege": None}}})


def test_a_record_puts_the_score_first_and_needs_a_verdict():
    from kate.eval.record import Record

    record = Record("x_1", "simple_python", 0, {"valid": True, "error_type": None}, {"calls": []}, 0.5)
    assert list(record.to_dict()) == ["id", "category", "seed", "valid", "error_type", "calls", "seconds"]
    with pytest.raises(ValueError, match="x_2"):
        Record("x_2", "simple_python", 0, {"error_type": None})


class _CountingTask:
    """Six items; each solve is logged, the later ones take a moment (so one is running at a stop)."""

    name = "counting"

    def __init__(self) -> None:
        from types import SimpleNamespace

        self._items = [SimpleNamespace(id=f"c{k}", category="c") for k in range(6)]
        self.started: list[str] = []
        self.finished: list[str] = []

    def items(self):
        return self._items

    def solve(self, item, policy, seed):
        self.started.append(item.id)
        time.sleep(0.0 if item.id == "c0" else 0.3)
        self.finished.append(item.id)
        return {"answer": item.id}

    def score(self, item, trace):
        return {"valid": True}

    def describe(self):
        return {"items": 6}


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_a_stopped_run_starts_nothing_new_and_keeps_what_finished(tmp_path, stop):
    from kate.agent import Policy
    from kate.eval.runner import open_run, run_task
    from kate.llm.fake import FakeChatModel
    from kate.sampling.policy import GreedySampler

    policy = Policy(FakeChatModel(["-"]), GreedySampler())
    task = _CountingTask()

    def stop_after_first(record):
        raise stop()

    store = open_run(tmp_path, arm="a", task=task, policy=policy, seed=0, config={})
    with pytest.raises(stop):
        run_task(task, policy, store, on_record=stop_after_first)
    assert len(task.started) <= 2  # the item running at the stop, no more (before: every queued item ran)
    stored = [r["id"] for r in store.records()]
    assert sorted(stored) == sorted(task.finished)  # what finished is kept, once
    resumed = run_task(_CountingTask(), policy, open_run(tmp_path, arm="a", task=task, policy=policy, seed=0, config={}))
    assert [r["id"] for r in resumed] == [f"c{k}" for k in range(6)]
    assert len(store.records()) == 6
