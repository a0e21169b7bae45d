"""`kate eval`: one arm (model + sampler + knowledge) on BFCL-V3, one folder per seed, then a summary.

Every result folder's ``meta.json`` carries the full config, the model (name, backend, file
hash), the knowledge base manifest, the seed, the BFCL version, the data hash and the scoring
model; records are written entry by entry, and a rerun of the same command resumes.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from kate.bfcl.checkers import SCORING_MODEL
from kate.bfcl.data import BFCL_VERSION, BFCLEntry, data_sha256, load_entries
from kate.eval.bfcl_runner import RetrieveFactory, run_entries
from kate.eval.prompts import resolve_system_prompt
from kate.eval.report import markdown_table, plot_categories, seed_spread, summarize
from kate.eval.run_store import RunStore
from kate.io import atomic_write_json, atomic_write_text
from kate.llm.base import ChatModel
from kate.llm.registry import MODELS, sha256_of
from kate.sampling.policy import Sampler


def model_identity(model: ChatModel) -> dict[str, Any]:
    """Name, backend and weights hash (pinned for kate's models, computed for other files)."""
    identity: dict[str, Any] = {"name": model.name, "backend": type(model).__name__}
    path = getattr(model, "path", None)
    if path is not None:
        identity["path"] = str(path)
        spec = MODELS.get(model.name)
        identity["sha256"] = spec.sha256 if spec is not None else sha256_of(Path(path))
    return identity


def select_entries(categories: list[str], split: str, limit: int | None) -> list[BFCLEntry]:
    return [e for c in categories for e in load_entries(c, split, limit)]


def open_arm_store(name: str, model: ChatModel, sampler: Sampler, entries: list[BFCLEntry], folder: str | Path, *,
                   seed: int, config: dict[str, Any], knowledge_manifest: dict[str, Any] | None = None,
                   workers: int = 1, max_steps: int = 20, repeat_policy: str = "warn",
                   system_prompt: str | None = None, one_call: bool = True) -> RunStore:  # fmt: skip
    """The result folder of one arm and seed, with everything that determines its records in
    ``meta.json`` (a folder holding another configuration is refused)."""
    categories = sorted({e.category for e in entries})
    meta = {
        "arm": name,
        "config": config,
        "model": model_identity(model),
        "sampler": repr(sampler),
        "knowledge": knowledge_manifest,
        "seed": seed,
        "entries": [e.id for e in entries],
        "bfcl_eval": BFCL_VERSION,
        "data_sha256": data_sha256(tuple(categories)),
        "scoring_model": SCORING_MODEL,
        "max_steps": max_steps,
        "repeat_policy": repeat_policy,
        "system_prompt": system_prompt,
        "one_call": one_call,
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "workers": workers,
    }
    return RunStore(folder, meta)


def run_arm(
    name: str,
    model: ChatModel,
    sampler: Sampler,
    entries: list[BFCLEntry],
    out_dir: str | Path,
    *,
    seeds: list[int],
    config: dict[str, Any],
    retrieve_factory: RetrieveFactory | None = None,
    knowledge_manifest: dict[str, Any] | None = None,
    workers: int = 1,
    max_steps: int = 20,
    repeat_policy: str = "warn",
    system_prompt: str | None = None,
    one_call: bool = True,
) -> dict[int, list[dict]]:
    """Run (or resume) one arm for each seed; returns seed -> records."""
    results = {}
    for seed in seeds:
        store = open_arm_store(
            name, model, sampler, entries, Path(out_dir) / f"seed_{seed}", seed=seed, config=config,
            knowledge_manifest=knowledge_manifest, workers=workers, max_steps=max_steps,
            repeat_policy=repeat_policy, system_prompt=system_prompt, one_call=one_call,
        )  # fmt: skip
        results[seed] = run_entries(
            entries, model, sampler, store, seed=seed, workers=workers, retrieve_factory=retrieve_factory,
            max_steps=max_steps, repeat_policy=repeat_policy, system_prompt=system_prompt, one_call=one_call,
            desc=f"{name} seed {seed}",
        )  # fmt: skip
    return results


def write_arm_summary(name: str, per_seed: dict[int, list[dict]], out_dir: str | Path) -> dict[str, Any]:
    out_dir = Path(out_dir)
    first = per_seed[min(per_seed)]
    summary = {"arm": name, "seeds": sorted(per_seed), "per_category": summarize(first), "across_seeds": seed_spread(per_seed)}
    atomic_write_json(out_dir / "summary.json", summary)
    atomic_write_text(out_dir / "report.md", markdown_table({name: summary["per_category"]}) + "\n")
    plot_categories({name: summary["per_category"]}, out_dir / "categories.png")
    return summary


def run_eval(cfg: DictConfig) -> dict[str, Any]:
    model = instantiate(cfg.llm)
    sampler = instantiate(cfg.sampling)
    entries = select_entries(list(cfg.categories), cfg.split, cfg.limit)
    retrieve_factory, manifest = None, None
    if cfg.get("knowledge"):
        from kate.eval.knowledge_arm import build_retrieve_factory

        retrieve_factory, manifest = build_retrieve_factory(cfg.knowledge, intent_model=model)
    per_seed = run_arm(
        cfg.name, model, sampler, entries, cfg.out_dir, seeds=list(cfg.seeds),
        config=OmegaConf.to_container(cfg, resolve=True), retrieve_factory=retrieve_factory,
        knowledge_manifest=manifest, workers=cfg.workers, max_steps=cfg.max_steps,
        repeat_policy=cfg.repeat_policy, system_prompt=resolve_system_prompt(cfg.system_prompt), one_call=cfg.one_call,
    )  # fmt: skip
    summary = write_arm_summary(cfg.name, per_seed, cfg.out_dir)
    print(markdown_table({cfg.name: summary["per_category"]}))
    return summary
