"""``kate train data | sft | grpo | dpo | verifier``: the plain functions Hydra's apps call (and tests, and the thin
entry points in the top-level ``train/``)."""

from __future__ import annotations

import json
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from kate.eval.config import plain
from kate.retrieval.config import RetrievalConfig
from kate.retrieval.knowledge import make_knowledge
from kate.train.config import DataConfig, DPOJobConfig, GRPOJobConfig, SFTJobConfig, VerifierJobConfig


def typed(cfg: DictConfig | Any, schema: type) -> Any:
    """The config as its dataclass (Hydra nodes with ``_target_`` kept as plain dicts)."""
    if isinstance(cfg, schema):
        return cfg
    merged = OmegaConf.merge(OmegaConf.structured(schema), plain(cfg) if isinstance(cfg, DictConfig) else cfg)
    return OmegaConf.to_object(merged)


def data_knowledge(node: Any) -> Any:
    configs = {}
    for kind, value in dict(node or {}).items():
        if value:
            plain = {k: v for k, v in dict(value).items() if not k.startswith("_")}
            configs[kind] = RetrievalConfig(**plain)
    return make_knowledge(configs) if configs else None


def run_data(cfg: DictConfig) -> dict[str, Any]:
    from kate.train.build import build_data, print_stats

    data: DataConfig = typed(cfg, DataConfig)
    writer = instantiate(OmegaConf.create(data.writer.llm))
    knowledge = data_knowledge(data.knowledge)
    manifest = build_data(data, writer=writer, knowledge=knowledge)
    print_stats(manifest)
    print(f"[train data] saved {data.out_dir}")
    return manifest


def run_sft(cfg: DictConfig) -> dict[str, Any]:
    from kate.train.sft import run_sft as sft

    summary = sft(typed(cfg, SFTJobConfig))
    print(json.dumps(summary, indent=1))
    return summary


def run_grpo(cfg: DictConfig) -> dict[str, Any]:
    from kate.train.grpo import run_grpo as grpo

    summary = grpo(typed(cfg, GRPOJobConfig))
    print(json.dumps(summary, indent=1))
    return summary


def run_dpo(cfg: DictConfig) -> dict[str, Any]:
    from kate.train.dpo import run_dpo as dpo

    summary = dpo(typed(cfg, DPOJobConfig))
    print(json.dumps(summary, indent=1))
    return summary


def run_verifier(cfg: DictConfig) -> dict[str, Any]:
    from kate.train.verifier import run_verifier as verifier

    summary = verifier(typed(cfg, VerifierJobConfig))
    print(json.dumps(summary, indent=1))
    return summary
