"""``kate train verifier``: a reward model over width samples, TRL's ``RewardTrainer`` with LoRA.

Data (``kate.train.verifier_data``): the candidates of width votes in run records of BFCL training
halves, labelled right or wrong by the official checker; pairs of a right and a wrong candidate of one
entry; entries split by a seeded hash into the fold trained on and a held-out fold.

The network (``kate.train.verifier_model``): TRL's reward models are sequence-classification models
with one output, and transformers loads ``AutoModelForSequenceClassification`` from the same GGUF the
engines run (the transformer dequantized, a new random ``score`` head on the last token). That works
for the default Qwen2.5-Coder-0.5B and the 135M test model, so no hand-built head on the causal LM is
needed: the model is built here (LoRA task ``SEQ_CLS``: adapters on the attention projections, the head
trained whole) and handed to ``RewardTrainer`` as an instance. The pairs are tokenized here (the prompt
as inference renders it + the candidate + the end-of-turn token; ``chosen_ids`` / ``rejected_ids``,
which TRL takes as processed), so training and scoring (``kate.sampling.verifier``) read the same text.

Resumable like the other jobs: ``job.json`` names the settings and the digest of the pairs trained on,
and the same command continues from the last checkpoint (``evaluate`` and
``calibration_bins`` may change, as ``max_steps`` may). At the end: ``final/`` (adapter + head +
tokenizer + ``verifier.json``), ``summary.json`` and, on the held-out fold, ``held_out.json``
(pairwise accuracy, calibration bins, best-of-N against the vote) and ``calibration.png``.

    summary = run_verifier(VerifierJobConfig(records=["bench/runs/full/select_st_w8v/seed_0/records.jsonl"]))
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from kate.io import atomic_write_json
from kate.train.callbacks import MetricsLog, NameBase, check_job, last_checkpoint
from kate.train.config import VerifierJobConfig
from kate.train.model import name_base
from kate.train.sft import common_args, set_threads
from kate.train.verifier_data import candidate_rows, in_fold, pairs_sha256, preference_pairs
from kate.train.verifier_metrics import calibration, pairwise_accuracy, plot_calibration, selection
from kate.train.verifier_model import encode, load_reward_network, score_ids, verifier_text, with_lora, write_marker


def tokenized_pairs(pairs: list[dict[str, Any]], renderer: Any, max_length: int) -> tuple[list[dict], int]:
    """``chosen_ids`` / ``rejected_ids`` of the pairs that fit ``max_length`` (none is cut); how many did not."""
    out, too_long = [], 0
    for p in pairs:
        chosen = encode(renderer.tokenizer, verifier_text(renderer, p["prompt"], p["tools"], p["chosen"]))
        rejected = encode(renderer.tokenizer, verifier_text(renderer, p["prompt"], p["tools"], p["rejected"]))
        if max(len(chosen), len(rejected)) > max_length:
            too_long += 1
            continue
        out.append({"chosen_ids": chosen, "rejected_ids": rejected})
    return out, too_long


def check_settings(cfg: VerifierJobConfig) -> None:
    """What can be refused before anything loads."""
    if not cfg.records:
        raise ValueError("records: give at least one records.jsonl of a width run (records=[path, ...])")
    if not 0.0 <= cfg.held_out < 1.0:
        raise ValueError(f"held_out must be in [0, 1), got {cfg.held_out!r}")
    if cfg.calibration_bins < 1:
        raise ValueError(f"calibration_bins must be positive, got {cfg.calibration_bins!r}")
    if not cfg.lora.enabled:
        raise ValueError("lora.enabled=false: the verifier trains a LoRA adapter and its head only")


# what only the end of a run reads: a resumed run may change them (as max_steps, threads, ...)
END_OF_RUN = ("evaluate", "calibration_bins")


def job_identity(cfg: VerifierJobConfig) -> VerifierJobConfig:
    """The settings ``check_job`` compares: ``END_OF_RUN`` ones at their defaults."""
    defaults = VerifierJobConfig()
    return dataclasses.replace(cfg, **{k: getattr(defaults, k) for k in END_OF_RUN})


def evaluate_held_out(network: Any, renderer: Any, rows: list[dict[str, Any]], cfg: VerifierJobConfig) -> dict:
    """Score every held-out candidate; pairwise accuracy, calibration, best-of-N against the vote."""
    network.eval()
    scored, too_long = [], 0
    for row in rows:
        ids = encode(renderer.tokenizer, verifier_text(renderer, row["prompt"], row["tools"], row["text"]))
        if len(ids) > cfg.max_length:
            too_long += 1
            continue
        keys = ("id", "category", "source", "candidate", "kind", "votes", "share", "label")
        scored.append({**{k: row[k] for k in keys}, "score": score_ids(network, ids)})
    groups: dict[str, list[dict[str, Any]]] = {}
    for s in scored:
        groups.setdefault(s["id"], []).append(s)
    pairs = [(a["score"], b["score"]) for g in groups.values() for a in g if a["label"] for b in g if not b["label"]]
    bins = calibration([s["score"] for s in scored], [s["label"] for s in scored], cfg.calibration_bins)
    # the vote is one run's: each entry's candidates from the first records file that holds it (a later
    # file's repeats of them were dropped as duplicates, its new texts are not that run's whole vote)
    one_run = [[s for s in g if s["source"] == g[0]["source"]] for g in groups.values()]
    return {"candidates": len(scored), "too_long": too_long, "entries": len(groups), "pairs": len(pairs),
            "pairwise_accuracy": pairwise_accuracy(pairs), "calibration": bins,
            "selection": selection(one_run), "scores": scored}  # fmt: skip


def run_verifier(cfg: VerifierJobConfig) -> dict[str, Any]:
    """Train, resume from the last checkpoint when there is one, save, measure the held-out fold."""
    from datasets import Dataset
    from trl import RewardConfig, RewardTrainer

    check_settings(cfg)  # before the model loads
    rows, row_counts = candidate_rows(cfg.records, held_out=cfg.held_out, seed=cfg.fold_seed)
    pairs, pair_counts = preference_pairs(rows, max_per_entry=cfg.max_pairs_per_entry, seed=cfg.fold_seed)
    train_pairs = in_fold(pairs, "train")
    if not train_pairs:
        raise ValueError(f"{', '.join(cfg.records)}: no (right, wrong) pair in the training fold ({pair_counts})")
    set_threads(cfg.threads)
    args = RewardConfig(**common_args(cfg), max_length=None, center_rewards_coefficient=cfg.center_rewards_coefficient)
    check_job(job_identity(cfg), {"sha256": pairs_sha256(train_pairs)})
    from transformers import set_seed

    from kate.train.render import StepRenderer

    set_seed(cfg.seed)  # the new head's initialization
    network, tokenizer = load_reward_network(cfg.model, dtype=cfg.dtype)
    renderer = StepRenderer(tokenizer)
    kept, too_long = tokenized_pairs(train_pairs, renderer, cfg.max_length)
    if not kept:
        raise ValueError(f"{', '.join(cfg.records)}: no training pair fits max_length={cfg.max_length}")
    model = with_lora(network, cfg.lora)
    trainer = RewardTrainer(model=model, args=args, train_dataset=Dataset.from_list(kept), processing_class=tokenizer,
                            callbacks=[MetricsLog(cfg.output_dir), NameBase(cfg.model)])  # fmt: skip
    resume = last_checkpoint(cfg.output_dir)
    started = time.time()
    result = trainer.train(resume_from_checkpoint=resume)
    final = Path(cfg.output_dir) / "final"
    trainer.save_model(str(final))
    tokenizer.save_pretrained(str(final))
    name_base(final, cfg.model)
    write_marker(final, cfg.model, {"max_length": cfg.max_length, "text": "prompt_text + candidate + eos"})
    summary = {"job": "verifier", "model": cfg.model, "records": list(cfg.records), "rows": row_counts,
               "pairs": {**pair_counts, "train": len(train_pairs), "held_out": len(pairs) - len(train_pairs),
                         "too_long": too_long, "trained_on": len(kept)},
               "pairs_sha256": pairs_sha256(train_pairs), "resumed_from": resume,
               "global_step": trainer.state.global_step, "train_loss": result.training_loss,
               "seconds_this_run": round(time.time() - started, 1), "saved": {"final": str(final)}}  # fmt: skip
    if cfg.evaluate:
        held = in_fold(rows, "held_out")
        report = evaluate_held_out(trainer.accelerator.unwrap_model(trainer.model), renderer, held, cfg)
        atomic_write_json(Path(cfg.output_dir) / "held_out.json", report)
        picture = plot_calibration(report["calibration"], Path(cfg.output_dir) / "calibration.png",
                                   title=f"verifier on {report['candidates']} held-out candidates")
        summary["held_out"] = {k: report[k] for k in ("candidates", "entries", "pairs", "pairwise_accuracy",
                                                      "selection")}
        summary["saved"].update({"held_out": str(Path(cfg.output_dir) / "held_out.json"), "calibration": str(picture)})
    atomic_write_json(Path(cfg.output_dir) / "summary.json", summary)
    return summary
