"""What every kate training run shares besides the trainer: logged metrics as JSONL (a resumed run
drops the rows after its checkpoint before it logs again), checkpoints whose adapter names the kate
model as its base, the resume point, and ``job.json``: a run folder resumes only the job it holds."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from kate.io import append_jsonl, atomic_write_json, atomic_write_text, read_jsonl
from kate.train.model import name_base

METRICS_FILE = "metrics.jsonl"
JOB_FILE = "job.json"
# settings a resumed run may change: how long it runs, how often it saves and logs, threads, what it writes at the end
RESUMABLE_CHANGES = ("max_steps", "num_train_epochs", "save_steps", "save_total_limit", "logging_steps", "threads",
                     "merge", "gguf_adapter", "probe")


def check_job(cfg: Any, manifest: dict[str, Any]) -> None:
    """Write ``job.json`` (the job's settings and the dataset's training sha256) in a new run folder; in
    one that has it, refuse to continue a different job (another model, data, learning rate ...), naming
    the file. A setting the folder's job.json lacks (added to kate since) matches when it is at its
    default; its data digest matches the manifest's ``training_sha256`` or its older ``sha256``."""
    folder = Path(cfg.output_dir)
    settings = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in RESUMABLE_CHANGES}
    digests = {manifest.get("training_sha256"), manifest.get("sha256")} - {None}
    job = {"settings": json.loads(json.dumps(settings, default=str)),
           "data_sha256": manifest.get("training_sha256") or manifest.get("sha256")}
    path = folder / JOB_FILE
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except ValueError as error:
            raise ValueError(f"{path}: not valid JSON ({error})") from None
        for f in dataclasses.fields(cfg):
            if f.name in job["settings"] and f.name not in old.get("settings", {}) and _at_default(cfg, f):
                old.setdefault("settings", {})[f.name] = job["settings"][f.name]
        same_data = old.get("data_sha256") in digests or old.get("data_sha256") == job["data_sha256"]
        if old.get("settings") != job["settings"] or not same_data:
            diff = sorted(k for k in set(old["settings"]) | set(job["settings"])
                          if old["settings"].get(k) != job["settings"].get(k))
            diff += [] if same_data else ["data_sha256"]
            raise ValueError(f"{path}: this folder holds another training job (differs in {', '.join(diff)}); "
                             "use another output_dir, or remove the folder to start over")
        return
    atomic_write_json(path, job)


def _at_default(cfg: Any, f: dataclasses.Field) -> bool:
    default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    return default is not dataclasses.MISSING and getattr(cfg, f.name) == default


class MetricsLog(TrainerCallback):
    """Each ``on_log`` (loss, learning rate, rewards, ...) as one line of ``<output_dir>/metrics.jsonl``."""

    def __init__(self, output_dir: str | Path) -> None:
        self.path = Path(output_dir) / METRICS_FILE

    def on_train_begin(self, args, state, control, **kwargs):  # noqa: ANN001
        """On resume, the rows logged after the checkpoint (before the kill) are dropped: they are logged again."""
        if state.is_world_process_zero and self.path.exists():
            rows = read_metrics(self.path.parent)
            kept = [r for r in rows if r.get("step", 0) <= state.global_step]
            if len(kept) != len(rows):
                atomic_write_text(self.path, "".join(json.dumps(r) + "\n" for r in kept))

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
    """The rows of ``metrics.jsonl`` (a last line cut short by a kill is dropped)."""
    path = Path(output_dir) / METRICS_FILE
    if not path.exists():
        return []
    return list(read_jsonl(path))
