"""``kate train data``: build the step dataset from BFCL's training halves and trajectory files,
save it with its manifest, and print counts and token-length percentiles.

The manifest records what determines the rows: the BFCL data hash per category, the trajectory
files' sha256, the knowledge (retrieval settings and knowledge base manifests), the distractor and
split settings, the template's sha256, the writer and how many answers each writer wrote, and the
rows' own sha256. Written answers are cached by content hash, so a rebuild (or a resume after a
kill) asks the writer only for what it has not answered yet.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kate.agent.knowledge import Knowledge
from kate.bfcl.data import BFCL_VERSION, data_sha256, load_entries
from kate.knowledge.bfcl_source import NO_GROUND_TRUTH
from kate.knowledge.llm_cache import LLMCache
from kate.knowledge.trajectory import read_trajectories
from kate.llm.base import ChatModel
from kate.llm.identity import model_identity
from kate.tasks.own_tools import content_sha256 as own_tools_sha256
from kate.tasks.own_tools import load_items
from kate.train.answers import AnswerWriter
from kate.train.config import DataConfig
from kate.train.data import build_rows, rows_sha256, save_dataset, stats, training_sha256
from kate.train.distractors import DistractorKnowledge
from kate.train.render import StepRenderer, load_tokenizer
from kate.train.steps import StepBuilder


def _sha256_file(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def training_knowledge(knowledge: Any, cfg: DataConfig) -> Knowledge | None:
    """The arm's knowledge, with distractors when configured (a ``KnowledgeByKind`` from retrieval)."""
    if knowledge is None or cfg.distractors.rate <= 0 or not hasattr(knowledge, "by_kind"):
        return knowledge
    d = cfg.distractors
    return DistractorKnowledge(knowledge, rate=d.rate, count=d.count, threshold=d.threshold, seed=cfg.seed)


def build_data(cfg: DataConfig, *, writer: ChatModel, knowledge: Knowledge | None,
               tokenizer: Any = None, progress: bool = True) -> dict[str, Any]:
    """Build and save the dataset; returns its manifest (with ``stats``)."""
    if cfg.own_tools_split not in (None, "train"):
        raise ValueError(f"own_tools_split={cfg.own_tools_split!r}: training reads only the own-tools task's train half")
    if not 0.0 <= cfg.masking.share <= 1.0:
        raise ValueError(f"masking.share must be in [0, 1], got {cfg.masking.share}")
    tokenizer = tokenizer if tokenizer is not None else load_tokenizer(cfg.model)
    renderer = StepRenderer(tokenizer)
    cache = LLMCache(cfg.writer.cache)
    answer_writer = AnswerWriter(writer, cache, max_tokens=cfg.writer.max_tokens, result_chars=cfg.writer.result_chars,
                                 no_call_answer=cfg.no_call_answer)
    shown = training_knowledge(knowledge, cfg)
    builder = StepBuilder(shown, answer_writer, cfg.no_call_answer, cfg.system_prompt)
    categories = [c for c in cfg.categories if c not in NO_GROUND_TRUTH]
    entries = [e for c in categories for e in load_entries(c, "train", cfg.limit)]
    trajectories = [t for path in cfg.trajectories for t in read_trajectories(path)]
    own = load_items(cfg.own_tools_split) if cfg.own_tools_split else []
    rows, skipped = build_rows(builder, entries, trajectories, renderer, rl_share=cfg.rl_share, seed=cfg.seed,
                               own_tools=own, mask_share=cfg.masking.share, mask_seed=cfg.masking.seed,
                               progress=progress)  # fmt: skip
    if not rows:
        raise ValueError("no training step was built (every item skipped?): " + "; ".join(s.reason for s in skipped[:3]))
    describe = getattr(shown, "describe", None)
    manifest = {
        "sha256": rows_sha256(rows), "training_sha256": training_sha256(rows),
        "model": cfg.model, "template_sha256": hashlib.sha256(renderer.template.encode("utf-8")).hexdigest(),
        "bfcl_eval": BFCL_VERSION, "split": "train (KATE's even indices)", "limit": cfg.limit,
        "source_data": {c: data_sha256((c,)) for c in categories},
        "trajectories": {p: _sha256_file(p) for p in cfg.trajectories},
        "own_tools": {"split": cfg.own_tools_split, "sha256": own_tools_sha256()} if own else None,
        "knowledge": describe() if callable(describe) else None,
        "system_prompt": cfg.system_prompt, "rl_share": cfg.rl_share, "seed": cfg.seed,
        "loop": builder.settings().to_dict(),
        "writer": {"model": model_identity(writer), "labels": answer_writer.labels, "asked": cache.asked,
                   "cached": cache.hits, "cache": cfg.writer.cache},
        "no_call_answer": cfg.no_call_answer,
        "skipped": [{"id": s.source_id, "reason": s.reason} for s in skipped],
        "stats": stats(rows),
    }  # fmt: skip
    if cfg.masking.share > 0:  # recorded when used: a dataset built without masking keeps its manifest
        manifest["masking"] = {"share": cfg.masking.share, "seed": cfg.masking.seed}
        manifest["stats"]["masked"] = sum(1 for r in rows if r["masked"])
    save_dataset(rows, manifest, cfg.out_dir)
    return manifest


def print_stats(manifest: Mapping[str, Any]) -> None:
    s = manifest["stats"]
    print(f"[train data] {s['steps']} steps from {s['dialogues']} dialogues; skipped {len(manifest['skipped'])}")
    for key in ("part", "kind", "category", "answer_writer"):
        print(f"  {key:14s} " + ", ".join(f"{k}: {v}" for k, v in s[key].items()))
    print(f"  with knowledge {s['with_knowledge']}, with distractors {s['with_distractor']}, "
          f"masked {s.get('masked', 0)}")
    for key, p in s["tokens"].items():
        print(f"  tokens {key:10s} " + ", ".join(f"{k} {v}" for k, v in p.items()))
