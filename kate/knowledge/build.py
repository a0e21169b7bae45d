"""Build a knowledge base from trajectories: ST (no model), ES / SIC / TIC (written by a model,
cached and resumable), embedded, indexed, saved atomically with its manifest."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kate.knowledge.attempts import failed_attempts, read_attempts, records_file
from kate.knowledge.clustering import ClusterConfig
from kate.knowledge.embedder import Embedder
from kate.knowledge.entries import LLM_TYPES, KnowledgeEntry
from kate.knowledge.es import ESConfig, es_entries
from kate.knowledge.index import IndexSpec
from kate.knowledge.intents import IntentConfig, intent_entries
from kate.knowledge.llm_cache import LLMCache
from kate.knowledge.specs import SOURCES, BuildSpec  # noqa: F401  (the spec, light: kate.knowledge.specs)
from kate.knowledge.st import st_entries
from kate.knowledge.store import KnowledgeBase
from kate.knowledge.trajectory import Trajectory, read_trajectories
from kate.llm.base import ChatModel
from kate.llm.registry import sha256_of





def _intent_config(values: Mapping[str, Any]) -> IntentConfig:
    values = dict(values)
    cluster = ClusterConfig(**dict(values.pop("cluster", {})))
    return IntentConfig(cluster=cluster, **values)


def cache_path(cache_dir: str | Path, model_name: str) -> Path:
    return Path(cache_dir) / f"{re.sub(r'[^A-Za-z0-9._-]+', '_', model_name)}.jsonl"


def load_trajectories(spec: BuildSpec) -> tuple[list[Trajectory], dict[str, Any]]:
    """The spec's trajectories and the manifest's description of where they came from."""
    if spec.source == "bfcl":
        from kate.bfcl.data import data_sha256, installed_version
        from kate.knowledge.bfcl_source import bfcl_trajectories

        trajectories = bfcl_trajectories(spec.categories, spec.split, limit=spec.limit)
        info = {"kind": "bfcl", "bfcl_eval": installed_version(), "categories": list(spec.categories),
                "split": spec.split, "split_rule": "index even -> train, odd -> test",
                "data_sha256": data_sha256(tuple(spec.categories)), "trajectories": len(trajectories)}
        return trajectories, info
    trajectories = read_trajectories(spec.jsonl)
    if spec.categories:
        trajectories = [t for t in trajectories if t.source in set(spec.categories)]
    if spec.split:
        trajectories = [t for t in trajectories if t.split in ("", spec.split)]
    return trajectories, {"kind": "jsonl", "path": str(spec.jsonl), "data_sha256": sha256_of(Path(spec.jsonl)),
                          "trajectories": len(trajectories)}


def _log_progress(log: Callable[[str], None], what: str, every: int = 10):
    start = time.time()

    def progress(done: int, total: int) -> None:
        if done == total or done % every == 0:
            log(f"[kb] {what}: {done}/{total} ({time.time() - start:.0f}s)")

    return progress


def build_knowledge_base(spec: BuildSpec, *, writer: ChatModel | None = None, embedder: Embedder | None = None,
                         trajectories: list[Trajectory] | None = None, save: bool = True,
                         log: Callable[[str], None] | None = None) -> KnowledgeBase:
    """Build (and by default save under ``spec.root/spec.name``) the knowledge base of ``spec``."""
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    started = time.time()
    if trajectories is None:
        trajectories, sources = load_trajectories(spec)
    else:
        sources = {"kind": "given", "trajectories": len(trajectories)}
    log(f"[kb] {len(trajectories)} trajectories from {sources['kind']}")
    llm_types = [t for t in spec.types if t in LLM_TYPES]
    if llm_types and writer is None:
        raise ValueError(f"types {llm_types} are written by a model: pass writer= (the `llm` config)")
    embedder = embedder or Embedder(spec.embedding_model)

    entries: list[KnowledgeEntry] = []
    if "ST" in spec.types:
        entries += st_entries(trajectories, result_chars=spec.result_chars)
        log(f"[kb] ST: {len(entries)} entries")
    llm_sources = [t for t in trajectories if not spec.llm_categories or t.source in set(spec.llm_categories)]
    stats: dict[str, Any] = {}
    if llm_types:
        cache = LLMCache(cache_path(spec.cache_dir, writer.name))
        log(f"[kb] writer {writer.name}: {len(llm_sources)} trajectories, cache {cache.path} ({len(cache)} answers)")
        if "ES" in llm_types:
            attempts = None
            if spec.es_attempts is not None:
                attempts = failed_attempts(llm_sources, read_attempts(spec.es_attempts))
                file = records_file(spec.es_attempts)
                sources["es_attempts"] = {"path": str(spec.es_attempts), "sha256": sha256_of(file),
                                          "failed_turns": len(attempts)}
                log(f"[kb] ES: {len(attempts)} failed turns written from the model's attempts ({file})")
            es = es_entries(llm_sources, writer, cache, ESConfig(**spec.es), attempts=attempts,
                            progress=_log_progress(log, "ES"))
            entries += es
            log(f"[kb] ES: {len(es)} entries")
        intent_types = [t for t in llm_types if t in ("SIC", "TIC")]
        if intent_types:
            made, report = intent_entries(llm_sources, embedder.embed, writer, cache, _intent_config(spec.intents),
                                          types=intent_types, progress=_log_progress(log, "intents", every=5))
            entries += made
            stats["intents"] = report
            log(f"[kb] SIC/TIC: {len(made)} entries over {len(report)} API classes")
        stats["llm"] = {"writer": writer.name, "asked": cache.asked, "cached": cache.hits}
    embed_start = time.time()
    embeddings = embedder.embed([e.text for e in entries])
    embed_seconds = time.time() - embed_start
    kb = KnowledgeBase.create(entries, embeddings, embedding=embedder.identity(), index_spec=IndexSpec(**spec.index),
                              name=spec.name, sources=sources, build_config=spec.to_dict())
    stats["embedding"] = {"entries": len(entries), "seconds": round(embed_seconds, 2),
                          "entries_per_s": round(len(entries) / max(embed_seconds, 1e-9), 1)}
    stats["seconds"] = round(time.time() - started, 1)
    kb.manifest["build_stats"] = stats
    if save:
        kb.save(spec.path)
        log(f"[kb] saved {len(entries)} entries to {spec.path} ({stats['seconds']}s)")
    return kb
