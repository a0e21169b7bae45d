"""``kate train grpo``: TRL's ``GRPOTrainer``, step-level as KATE did: one prompt per assistant step
of the RL part (rendered exactly as inference renders it), a group of sampled completions, and rule
rewards against that step's ground truth (``kate.train.rewards``). Resumable and probed like SFT;
``init_adapter`` continues a trained (SFT) adapter.

Multi-step rollouts (TRL's ``rollout_func`` / ``environment_factory``) are not used: in TRL 1.16 both
are experimental and read calls through TRL's own tool-call parsing of the chat template, not kate's
strict parsers, and one rollout over a BFCL dialogue on 2 CPU cores costs minutes per sample. Every
step of a dialogue is already a prompt here, with the real tool results of the steps before it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kate.io import atomic_write_json
from kate.train.callbacks import check_job, last_checkpoint
from kate.train.config import GRPOJobConfig
from kate.train.data import load_dataset_dir
from kate.train.model import finish, load_for_training
from kate.train.rewards import call_correct, format_valid, no_call_penalty
from kate.train.sft import check_probe, check_single_bos, common_args, set_threads, trainer_callbacks

REWARD_FUNCS = (call_correct, format_valid, no_call_penalty)
COLUMNS = ("prompt", "target_calls", "kind", "category", "source_id")


def grpo_rows(rows: Any, max_prompt_tokens: int) -> list[dict[str, Any]]:
    """The RL prompts: the rendered prompt text, and what the rewards read."""
    kept = [r for r in rows if r["prompt_tokens"] <= max_prompt_tokens]
    return [{"prompt": r["prompt_text"], "target_calls": r["target_calls"], "kind": r["kind"],
             "category": r["category"], "source_id": r["source_id"]} for r in kept]  # fmt: skip


def run_grpo(cfg: GRPOJobConfig) -> dict[str, Any]:
    """Train, resume from the last checkpoint when there is one, save; the run's summary."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    check_probe(cfg)
    set_threads(cfg.threads)
    if len(cfg.reward_weights) != len(REWARD_FUNCS):
        raise ValueError(f"reward_weights needs {len(REWARD_FUNCS)} weights (call_correct, format_valid, "
                         f"no_call_penalty), got {list(cfg.reward_weights)}")
    # TRL checks the batch against the group (generation_batch_size % num_generations) here, before any load
    args = GRPOConfig(**common_args(cfg), num_generations=cfg.num_generations,
                      max_completion_length=cfg.max_completion_length, beta=cfg.beta, loss_type=cfg.loss_type,
                      temperature=cfg.temperature, reward_weights=list(cfg.reward_weights), use_vllm=cfg.use_vllm,
                      log_completions=False)  # fmt: skip
    rows, manifest = load_dataset_dir(cfg.data_dir, part=cfg.part)
    prompts = grpo_rows(rows, cfg.max_prompt_tokens)
    if not prompts:
        raise ValueError(f"{cfg.data_dir}: no {cfg.part} step has a prompt of <= {cfg.max_prompt_tokens} tokens")
    check_job(cfg, manifest)
    model, tokenizer = load_for_training(cfg.model, dtype=cfg.dtype, lora=cfg.lora, init_adapter=cfg.init_adapter)
    check_single_bos(tokenizer, prompts[0]["prompt"], cfg.model, "GRPO")
    callbacks = trainer_callbacks(cfg)
    trainer = GRPOTrainer(model=model, reward_funcs=list(REWARD_FUNCS), args=args,
                          train_dataset=Dataset.from_list(prompts), processing_class=tokenizer, callbacks=callbacks)
    resume = last_checkpoint(cfg.output_dir)
    started = time.time()
    result = trainer.train(resume_from_checkpoint=resume)
    saved = finish(trainer, cfg.output_dir, cfg.model, merge=cfg.merge, gguf_adapter=cfg.gguf_adapter)
    summary = {"job": "grpo", "model": cfg.model, "data_dir": cfg.data_dir, "data_manifest": manifest.get("sha256"),
               "part": cfg.part, "prompts": len(prompts), "left_out_long": len(rows) - len(prompts),
               "resumed_from": resume, "global_step": trainer.state.global_step, "train_loss": result.training_loss,
               "seconds_this_run": round(time.time() - started, 1), "saved": saved}  # fmt: skip
    atomic_write_json(Path(cfg.output_dir) / "summary.json", summary)
    return summary
