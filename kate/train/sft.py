"""``kate train sft``: TRL's ``SFTTrainer`` on the SFT part of the step dataset, loss on the
assistant steps only (pre-tokenized ``input_ids`` + ``completion_mask``, ``completion_only_loss``),
LoRA or full, resumable (the same command continues from the last checkpoint), probed at every save.

    summary = run_sft(SFTJobConfig(data_dir="train/data/bfcl_steps", output_dir="train/runs/sft"))
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kate.io import atomic_write_json
from kate.train.callbacks import MetricsLog, NameBase, check_job, last_checkpoint
from kate.train.config import SFTJobConfig
from kate.train.data import load_dataset_dir
from kate.train.examples import CALL_FORMATS, PACKS, check_kind_repeats, sft_examples
from kate.train.model import finish, load_for_training
from kate.train.probe import CheckpointProbe, probe_sets
from kate.train.task_probe import task_probe_set


def common_args(cfg: Any) -> dict[str, Any]:
    """TRL/transformers arguments shared by SFT and GRPO, CPU-relevant choices explicit."""
    return dict(
        output_dir=cfg.output_dir, max_steps=cfg.max_steps, num_train_epochs=cfg.num_train_epochs,
        learning_rate=cfg.learning_rate, per_device_train_batch_size=cfg.per_device_train_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps, logging_steps=cfg.logging_steps,
        save_steps=cfg.save_steps, save_total_limit=cfg.save_total_limit, seed=cfg.seed, bf16=cfg.bf16,
        gradient_checkpointing=cfg.gradient_checkpointing, use_cpu=cfg.use_cpu, report_to="none",
        dataloader_num_workers=0, disable_tqdm=False, **dict(cfg.trl_overrides),
    )  # fmt: skip


def probe_callback(cfg: Any, data_dir: str) -> CheckpointProbe | None:
    """The checkpoint probe: decision points from the part not trained on, replay of the part trained on
    (``part=all`` has no held-out part: the first-token probe then reads trained rows, as the probe says)."""
    if not cfg.probe.enabled:
        return None
    other = {"sft": "rl", "rl": "sft"}.get(cfg.part, "all")
    held_out, _ = load_dataset_dir(data_dir, part=other)
    trained, _ = load_dataset_dir(data_dir, part=cfg.part)
    short = lambda rows: [r for r in rows if r["prompt_tokens"] <= cfg.max_length]  # noqa: E731
    sets = probe_sets(short(held_out), short(trained), first_token=cfg.probe.held_out, replay=cfg.probe.replay,
                      near_miss=cfg.probe.near_miss, seed=cfg.seed)  # fmt: skip
    sets.tasks = task_probe_set(held_out, cfg.probe.tasks, per_category=cfg.probe.per_task, seed=cfg.seed)
    sets.task_max_steps, sets.task_max_tokens = cfg.probe.task_max_steps, cfg.probe.task_max_tokens
    sets.task_engine, sets.task_workers, sets.items_from = cfg.probe.task_engine, cfg.probe.task_workers, other
    return CheckpointProbe(sets, cfg.output_dir, max_tokens=cfg.probe.max_tokens, model=cfg.model,
                           init_adapter=cfg.init_adapter)  # fmt: skip


def check_probe(cfg: Any) -> None:
    """The task probe's settings, before any model loads: known categories, positive sizes, and an
    engine that can run this job's checkpoints (llama.cpp needs a GGUF base and LoRA adapters)."""
    from kate.bfcl.data import CATEGORIES
    from kate.llm.hf import _resolve
    from kate.train.task_probe import OWN_TOOLS

    probe = cfg.probe
    if not probe.enabled or not probe.tasks:
        return
    unknown = sorted(set(probe.tasks) - {OWN_TOOLS, *CATEGORIES})
    if unknown:
        raise ValueError(f"probe.tasks: unknown categories {unknown} (BFCL categories or {OWN_TOOLS})")
    for key in ("per_task", "task_max_steps", "task_max_tokens", "task_workers"):
        if getattr(probe, key) < 1:
            raise ValueError(f"probe.{key} must be at least 1, got {getattr(probe, key)} (probe.tasks=[] turns it off)")
    if probe.task_engine not in ("llamacpp", "hf"):
        raise ValueError(f"probe.task_engine must be llamacpp or hf, got {probe.task_engine!r}")
    if probe.task_engine == "llamacpp" and ("gguf_file" not in _resolve(cfg.model)[1] or not cfg.lora.enabled):
        raise ValueError(f"probe.task_engine=llamacpp runs LoRA checkpoints over a GGUF base; {cfg.model!r} with "
                         f"lora.enabled={cfg.lora.enabled} is not that: set probe.task_engine=hf")


def trainer_callbacks(cfg: Any) -> list:
    """What every trainer saves beside its checkpoints: the metrics log, the base's name, the probe."""
    probe = probe_callback(cfg, cfg.data_dir)
    return [MetricsLog(cfg.output_dir), NameBase(cfg.model), *([probe] if probe is not None else [])]


def check_single_bos(tokenizer: Any, prompt: str, model: str, trainer: str) -> None:
    """Refuse a tokenizer that adds a BOS to rendered prompts, which already carry the template's own."""
    if tokenizer(prompt)["input_ids"] != tokenizer(prompt, add_special_tokens=False)["input_ids"]:
        raise ValueError(f"{model}: the tokenizer adds special tokens (a BOS) to the rendered prompts, which already "
                         f"carry the template's own; {trainer} would see them twice")


def set_threads(threads: int | None) -> None:
    if threads:
        import torch

        torch.set_num_threads(int(threads))


def run_sft(cfg: SFTJobConfig) -> dict[str, Any]:
    """Train, resume from the last checkpoint when there is one, save; the run's summary."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    for key, value, allowed in (("pack", cfg.pack, PACKS), ("call_format", cfg.call_format, CALL_FORMATS)):
        if value not in allowed:  # before the model loads
            raise ValueError(f"{key} must be one of {allowed}, got {value!r}")
    kind_repeats = check_kind_repeats(dict(cfg.kind_repeats))
    check_probe(cfg)
    set_threads(cfg.threads)
    rows, manifest = load_dataset_dir(cfg.data_dir, part=cfg.part)
    model, tokenizer = load_for_training(cfg.model, dtype=cfg.dtype, lora=cfg.lora, init_adapter=cfg.init_adapter)
    check_job(cfg, manifest)
    examples, counts = sft_examples(tokenizer, rows, pack=cfg.pack, max_length=cfg.max_length,
                                   call_format=cfg.call_format, kind_repeats=kind_repeats)
    if not examples:
        raise ValueError(f"{cfg.data_dir}: no {cfg.part} example fits max_length={cfg.max_length} ({counts})")
    dataset = Dataset.from_list([{"input_ids": e["input_ids"], "completion_mask": e["completion_mask"]} for e in examples])
    args = SFTConfig(**common_args(cfg), completion_only_loss=True, max_length=None)
    callbacks = trainer_callbacks(cfg)
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer, callbacks=callbacks)
    resume = last_checkpoint(cfg.output_dir)
    started = time.time()
    result = trainer.train(resume_from_checkpoint=resume)
    saved = finish(trainer, cfg.output_dir, cfg.model, merge=cfg.merge, gguf_adapter=cfg.gguf_adapter)
    summary = {"job": "sft", "model": cfg.model, "data_dir": cfg.data_dir, "data_manifest": manifest.get("sha256"),
               "part": cfg.part, "pack": cfg.pack, "kind_repeats": kind_repeats, "examples": counts, "resumed_from": resume,
               "global_step": trainer.state.global_step, "train_loss": result.training_loss,
               "seconds_this_run": round(time.time() - started, 1), "saved": saved}  # fmt: skip
    atomic_write_json(Path(cfg.output_dir) / "summary.json", summary)
    return summary
