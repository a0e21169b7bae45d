"""SFT and GRPO for a few steps on the 135M model on CPU: save, probe at every save, reload the
result through kate's hf and llamacpp clients and answer; and a training run killed mid-way
resumes from its last checkpoint with the same command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kate.knowledge.trajectory import trajectory_from_dict, write_trajectories
from kate.llm.fake import FakeChatModel
from kate.llm.registry import SMALL_TEST_MODEL
from kate.train.config import GRPOJobConfig, ProbeConfig, SFTJobConfig

from .train_fixtures import OWN

pytestmark = pytest.mark.model

SMALL_PROBE = ProbeConfig(held_out=2, replay=1, near_miss=1, max_tokens=8, tasks=["irrelevance"], per_task=1,
                          task_max_steps=1, task_max_tokens=8)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    from kate.train.build import build_data
    from kate.train.config import DataConfig

    tmp = tmp_path_factory.mktemp("small")
    write_trajectories(tmp / "own.jsonl", [trajectory_from_dict(OWN)])
    cfg = DataConfig(model=SMALL_TEST_MODEL, categories=["simple_python", "irrelevance"], limit=2,
                     trajectories=[str(tmp / "own.jsonl")], out_dir=str(tmp / "data"))
    cfg.writer.cache = str(tmp / "answers.jsonl")
    build_data(cfg, writer=FakeChatModel(["Done."], repeat_last=True), knowledge=None, progress=False)
    return cfg.out_dir


def _sft(data_dir: str, out: Path, **over) -> SFTJobConfig:
    cfg = SFTJobConfig(model=SMALL_TEST_MODEL, data_dir=data_dir, part="all", output_dir=str(out), max_steps=2,
                       save_steps=1, logging_steps=1, gradient_accumulation_steps=1, max_length=4096,
                       probe=SMALL_PROBE, merge=True, gguf_adapter=True)  # fmt: skip
    for key, value in over.items():
        setattr(cfg, key, value)
    return cfg


def _answers(folder: Path) -> None:
    from kate.llm.hf import HFChatModel

    question = [{"role": "user", "content": "What is 2 plus 3?"}]
    [completion] = HFChatModel(str(folder), device="cpu").chat(question, OWN["tools"], max_tokens=12)
    assert isinstance(completion.text, str) and completion.usage.completion_tokens > 0


@pytest.fixture(scope="module")
def sft_run(data_dir, tmp_path_factory) -> tuple[Path, dict]:
    from kate.train.sft import run_sft

    out = tmp_path_factory.mktemp("sft")
    return out, run_sft(_sft(data_dir, out))


def test_sft_trains_saves_probes_and_the_clients_load_the_result(sft_run):
    out, summary = sft_run
    assert summary["global_step"] == 2 and summary["resumed_from"] is None
    probes = [json.loads(line) for line in (out / "probe.jsonl").read_text().splitlines()]
    assert [p["step"] for p in probes] == [0, 1, 2]  # at the start and at every save
    assert all(p["replay"]["n"] == 1 and p["near_miss"]["n"] == 1 and p["first_token"] for p in probes)
    assert (out / "probe.png").stat().st_size > 0
    assert all(p["tasks"]["irrelevance"]["n"] == 1 for p in probes)  # the task probe, BFCL's checker
    best = json.loads((out / "best" / "best.json").read_text())  # the task probe's choice, kept apart
    assert best["step"] in (1, 2) and (out / "best" / "adapter.gguf").stat().st_size > 0
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("loss" in m for m in metrics)
    final = Path(summary["saved"]["final"])
    assert json.loads((final / "adapter_config.json").read_text())["base_model_name_or_path"] == SMALL_TEST_MODEL
    _answers(final)  # the adapter folder, through the hf client
    _answers(Path(summary["saved"]["merged"]))  # the merged folder
    from kate.llm.llamacpp import LlamaCppChatModel

    engine = LlamaCppChatModel(SMALL_TEST_MODEL, n_ctx=2048, max_parallel=1, lora=summary["saved"]["gguf_adapter"])
    try:
        [completion] = engine.chat([{"role": "user", "content": "Hello"}], max_tokens=8)
        assert isinstance(completion.text, str)
    finally:
        engine.close()


def test_grpo_trains_from_the_sft_adapter_and_saves(data_dir, sft_run, tmp_path):
    from kate.train.grpo import run_grpo

    cfg = GRPOJobConfig(model=SMALL_TEST_MODEL, data_dir=data_dir, part="all", output_dir=str(tmp_path / "grpo"),
                        init_adapter=sft_run[1]["saved"]["final"], max_steps=2, save_steps=1, logging_steps=1,
                        per_device_train_batch_size=2, gradient_accumulation_steps=1, num_generations=2,
                        max_completion_length=8, probe=SMALL_PROBE, gguf_adapter=False)  # fmt: skip
    summary = run_grpo(cfg)
    assert summary["global_step"] == 2 and summary["prompts"] > 0
    metrics = [json.loads(line) for line in (tmp_path / "grpo" / "metrics.jsonl").read_text().splitlines()]
    assert any(any(k.startswith("rewards/call_correct") for k in m) for m in metrics)
    _answers(Path(summary["saved"]["final"]))


def test_grpo_refuses_a_batch_that_is_not_a_multiple_of_the_group(data_dir, tmp_path):
    from kate.train.grpo import run_grpo

    cfg = GRPOJobConfig(model=SMALL_TEST_MODEL, data_dir=data_dir, output_dir=str(tmp_path), num_generations=4,
                        per_device_train_batch_size=3, gradient_accumulation_steps=1)
    with pytest.raises(ValueError, match="divisible by num_generations"):
        run_grpo(cfg)


def test_a_killed_run_resumes_from_its_last_checkpoint(data_dir, tmp_path):
    out = tmp_path / "resume"
    command = [sys.executable, "-m", "kate.cli", "train", "sft", f"model={SMALL_TEST_MODEL}", f"data_dir={data_dir}",
               "part=all", f"output_dir={out}", "max_steps=4", "save_steps=1", "logging_steps=1",
               "gradient_accumulation_steps=1", "max_length=4096", "probe.enabled=false", "gguf_adapter=false",
               f"hydra.run.dir={tmp_path / 'hydra'}"]  # fmt: skip
    env = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1"}
    process = subprocess.Popen(command, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.time() + 600
    while not (out / "checkpoint-2" / "trainer_state.json").exists():
        assert process.poll() is None, "the run ended before its second checkpoint"
        assert time.time() < deadline, "no second checkpoint within 10 minutes"
        time.sleep(0.5)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert not (out / "final").exists()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed_from"] is not None and Path(summary["resumed_from"]).name.startswith("checkpoint-")
    assert int(Path(summary["resumed_from"]).name.split("-")[1]) >= 2 and summary["global_step"] == 4
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()
             if "loss" in json.loads(line)]  # fmt: skip
    assert steps == [1, 2, 3, 4]  # the steps logged after checkpoint-2 before the kill are not kept twice
    wrong = subprocess.run([*command[:-1], "learning_rate=0.1", f"hydra.run.dir={tmp_path / 'hydra2'}"], env=env,
                           capture_output=True, text=True, timeout=900)  # fmt: skip
    assert wrong.returncode != 0 and "job.json" in wrong.stderr and "learning_rate" in wrong.stderr
