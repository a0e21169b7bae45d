"""The adopted checkpoint: the better of the runs' best/ by the task probe, only if it beats the
untrained model's step 0 on the same items; runs probed differently are refused, naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kate.train.adopt import choose_adapter


def run(folder: Path, means: dict[int, float], best: int | None, fingerprint: str = "f1") -> Path:
    folder.mkdir(parents=True)
    rows = [{"step": s, "tasks": {"mean": m, "fingerprint": fingerprint}} for s, m in means.items()]
    (folder / "probe.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if best is not None:
        (folder / "best").mkdir()
        (folder / "best" / "best.json").write_text(json.dumps({"step": best}))
        (folder / "best" / "adapter.gguf").write_bytes(b"gguf")  # a save's probe converts it: not yet final
        (folder / "final").mkdir()
        (folder / "final" / "adapter_config.json").write_text("{}")
        (folder / "summary.json").write_text("{}")
    return folder


def test_the_higher_best_is_adopted_and_a_tie_keeps_the_earlier_run(tmp_path):
    sft = run(tmp_path / "sft", {0: 0.5, 20: 0.6, 40: 0.55}, best=20)
    dpo = run(tmp_path / "dpo", {0: 0.6, 20: 0.7}, best=20)
    choice = choose_adapter({"sft": sft, "dpo": dpo})
    assert choice["chosen"] == "dpo" and choice["adapter"] == str(dpo / "best" / "adapter.gguf")
    assert choice["base_mean"] == 0.5 and choice["candidates"]["sft"]["mean"] == 0.6
    tie = run(tmp_path / "tie", {0: 0.6, 20: 0.6}, best=20)
    assert choose_adapter({"sft": sft, "tie": tie})["chosen"] == "sft"


def test_nothing_is_adopted_unless_it_beats_the_untrained_model(tmp_path):
    sft = run(tmp_path / "sft", {0: 0.65, 20: 0.45, 40: 0.65}, best=40)
    choice = choose_adapter({"sft": sft})
    assert choice["chosen"] is None and choice["adapter"] is None and choice["candidates"]["sft"]["step"] == 40


def test_runs_probed_differently_or_unfinished_are_refused_naming_the_file(tmp_path):
    sft = run(tmp_path / "sft", {0: 0.5, 20: 0.6}, best=20)
    other = run(tmp_path / "other", {0: 0.6, 20: 0.9}, best=20, fingerprint="f2")
    with pytest.raises(ValueError, match="other.*not comparable"):
        choose_adapter({"sft": sft, "other": other})
    unfinished = run(tmp_path / "unfinished", {0: 0.6, 20: 0.7}, best=20)
    (unfinished / "summary.json").unlink()  # stopped mid-run: best/ (and its adapter.gguf) may still change
    with pytest.raises(FileNotFoundError, match="unfinished: the run has not finished"):
        choose_adapter({"sft": sft, "unfinished": unfinished})
    with pytest.raises(FileNotFoundError, match="probe.jsonl"):
        choose_adapter({"absent": tmp_path / "absent"})
    started = run(tmp_path / "started", {20: 0.7}, best=20)
    with pytest.raises(ValueError, match="no step-0 row"):
        choose_adapter({"started": started})
