"""``kate train dpo``: TRL's ``DPOTrainer`` on preference pairs built from the step dataset
(``kate.train.pairs``): the prompt as inference renders it, chosen = the step's target, rejected = the
mistake the step invites (a call where none is due, a wrong call, another call instead of the answer).
LoRA from the base model or from ``init_adapter`` (DPO after SFT: the reference is then that adapter,
a frozen copy TRL keeps beside the trained one), resumable and probed at every save like SFT and GRPO.

    summary = run_dpo(DPOJobConfig(init_adapter="train/runs/sft/final", output_dir="train/runs/dpo"))
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kate.io import atomic_write_json
from kate.train.callbacks import check_job, last_checkpoint
from kate.train.config import DPOJobConfig
from kate.train.data import load_dataset_dir
from kate.train.examples import CALL_FORMATS
from kate.train.model import finish, load_for_training
from kate.train.pairs import KINDS, build_pairs
from kate.train.render import StepRenderer
from kate.train.sft import check_probe, check_single_bos, common_args, set_threads, trainer_callbacks

COLUMNS = ("prompt", "chosen", "rejected")


def fitting(pairs: list[dict[str, Any]], tokenizer: Any, max_length: int) -> list[dict[str, Any]]:
    """The pairs whose prompt and longer completion fit ``max_length`` tokens (none is cut)."""
    out = []
    for p in pairs:
        longer = max(len(tokenizer(p[k], add_special_tokens=False)["input_ids"]) for k in ("chosen", "rejected"))
        if p["prompt_tokens"] + longer <= max_length:
            out.append(p)
    return out


def drop_reference(trainer: Any) -> None:
    """The frozen reference copy TRL adds to a given adapter ("ref") is not part of the result."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    if "ref" in getattr(model, "peft_config", {}):
        model.delete_adapter("ref")


def run_dpo(cfg: DPOJobConfig) -> dict[str, Any]:
    """Train, resume from the last checkpoint when there is one, save; the run's summary."""
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    if cfg.call_format not in CALL_FORMATS:  # before the model loads
        raise ValueError(f"call_format must be one of {CALL_FORMATS}, got {cfg.call_format!r}")
    unknown = sorted(set(cfg.pair_kinds) - set(KINDS))
    if unknown or not cfg.pair_kinds:  # before the model loads
        raise ValueError(f"pair_kinds must be a non-empty subset of {KINDS}, got {list(cfg.pair_kinds)}")
    check_probe(cfg)
    set_threads(cfg.threads)
    args = DPOConfig(**common_args(cfg), beta=cfg.beta, loss_type=[cfg.loss_type], max_length=None,
                     precompute_ref_log_probs=cfg.precompute_ref_log_probs)  # fmt: skip
    rows, manifest = load_dataset_dir(cfg.data_dir, part=cfg.part)
    check_job(cfg, manifest)
    model, tokenizer = load_for_training(cfg.model, dtype=cfg.dtype, lora=cfg.lora, init_adapter=cfg.init_adapter)
    pairs, counts = build_pairs(rows, StepRenderer(tokenizer), seed=cfg.seed, kinds=list(cfg.pair_kinds),
                                call_format=cfg.call_format)  # fmt: skip
    kept = fitting(pairs, tokenizer, cfg.max_length)
    counts["too_long"] = len(pairs) - len(kept)
    if not kept:
        raise ValueError(f"{cfg.data_dir}: no {cfg.part} pair fits max_length={cfg.max_length} ({counts})")
    check_single_bos(tokenizer, kept[0]["prompt"], cfg.model, "DPO")
    callbacks = trainer_callbacks(cfg)
    dataset = Dataset.from_list([{k: p[k] for k in COLUMNS} for p in kept])
    trainer = DPOTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer, callbacks=callbacks)
    resume = last_checkpoint(cfg.output_dir)
    started = time.time()
    result = trainer.train(resume_from_checkpoint=resume)
    drop_reference(trainer)
    saved = finish(trainer, cfg.output_dir, cfg.model, merge=cfg.merge, gguf_adapter=cfg.gguf_adapter)
    summary = {"job": "dpo", "model": cfg.model, "data_dir": cfg.data_dir, "data_manifest": manifest.get("sha256"),
               "part": cfg.part, "init_adapter": cfg.init_adapter, "pairs": counts, "resumed_from": resume,
               "global_step": trainer.state.global_step, "train_loss": result.training_loss,
               "seconds_this_run": round(time.time() - started, 1), "saved": saved}  # fmt: skip
    atomic_write_json(Path(cfg.output_dir) / "summary.json", summary)
    return summary
