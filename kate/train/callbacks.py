"""Small ``TrainerCallback``s every kate training run uses: logged metrics as JSONL, and checkpoints
whose adapter names the kate model as its base."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from kate.io import append_jsonl
from kate.train.model import name_base

METRICS_FILE = "metrics.jsonl"


class MetricsLog(TrainerCallback):
    """Each ``on_log`` (loss, learning rate, rewards, ...) as one line of ``<output_dir>/metrics.jsonl``."""

    def __init__(self, output_dir: str | Path) -> None:
        self.path = Path(output_dir) / METRICS_FILE

    def on_log(self, args, state, control, logs: dict[str, Any] | None = None, **kwargs):  # noqa: ANN001
        if state.is_world_process_zero and logs:
            append_jsonl(self.path, {"step": state.global_step, **{k: v for k, v in logs.items()
                                                                    if isinstance(v, (int, float, str))}})


class NameBase(TrainerCallback):
    """After each save, the checkpoint's ``adapter_config.json`` names ``model`` as its base."""

    def __init__(self, model: str) -> None:
        self.model = model

    def on_save(self, args, state, control, **kwargs):  # noqa: ANN001
        if state.is_world_process_zero:
            name_base(Path(args.output_dir) / f"checkpoint-{state.global_step}", self.model)


def last_checkpoint(output_dir: str | Path) -> str | None:
    """The newest ``checkpoint-<step>`` under ``output_dir`` that holds a trainer state (resume point)."""
    folder = Path(output_dir)
    if not folder.is_dir():
        return None
    found = []
    for path in folder.iterdir():
        if path.is_dir() and path.name.startswith("checkpoint-") and (path / "trainer_state.json").exists():
            try:
                found.append((int(path.name.split("-", 1)[1]), path))
            except ValueError:
                continue
    return str(max(found)[1]) if found else None


def read_metrics(output_dir: str | Path) -> list[dict[str, Any]]:
    path = Path(output_dir) / METRICS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
