"""One ToolSense diagnosis (``kate diagnose name=toolsense``): the catalogue, its embedding index,
the probe sets written (cached) and checked, and the model scored on them, all under
``<out>/toolsense/``:

``catalogue.jsonl`` (and its vectors, ``catalogue_vectors.npz``); ``queries.jsonl``, ``mcq.jsonl``,
``qa.jsonl`` (the kept probes, with their writer); ``llm_cache.jsonl`` (every writer and judge
answer, by content hash; unless ``cache`` names another file); ``free/``, ``mcq/``, ``qa/`` (runner
folders: ``meta.json`` + ``records.jsonl``); ``constrained.jsonl`` (the hf client's pool rankings, resumable); ``summary.json``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from kate.diagnose.toolsense import ToolIndex, Tool, bfcl_catalogue, catalogue_sha256, load_catalogue, save_catalogue
from kate.diagnose.toolsense_catalogue import catalogue_mcq, catalogue_qa
from kate.diagnose.toolsense_gen import TIERS, ProbeWriter, generate, to_row
from kate.diagnose.toolsense_score import (KS, accuracy_block, constrained_ranking, ranking_scores,
                                           selection_messages, selection_table)  # fmt: skip
from kate.diagnose.toolsense_tasks import MCQTask, QATask, SelectionTask
from kate.io import append_jsonl, atomic_write_json, atomic_write_text, read_jsonl
from kate.knowledge.llm_cache import LLMCache
from kate.llm.identity import model_identity

CONSTRAINED_METHOD = ("each pool candidate's mean per-token log-likelihood as the answer's start (hf client, the "
                      "prompt's KV cache reused), candidates ranked by it: only catalogue names can come out")  # fmt: skip
Runner = Callable[[str, Any, Mapping[str, Any]], list[dict[str, Any]]]


def catalogue_of(c: Mapping[str, Any]) -> list[Tool]:
    """``c["catalogue"]``: ``bfcl`` (BFCL's functions, ``c["bfcl_categories"]``) or a JSONL / JSON file;
    the first ``c["catalogue_limit"]`` tools when set."""
    tools = bfcl_catalogue(tuple(c["bfcl_categories"])) if c["catalogue"] == "bfcl" else load_catalogue(c["catalogue"])
    return tools[: c["catalogue_limit"]] if c["catalogue_limit"] else tools


def _write(path: Path, rows: Sequence[Any]) -> None:
    import json

    atomic_write_text(path, "".join(json.dumps(to_row(r), ensure_ascii=False) + "\n" for r in rows))


def _name(model: Any) -> str:
    return str(getattr(model, "name", type(model).__name__))


def constrained_rows(hf: Any, queries: Sequence[Any], catalogue: Sequence[Tool], path: Path, *, show_pool: bool,
                     ks: Sequence[int] = KS) -> list[dict[str, Any]]:  # fmt: skip
    """Constrained selection of every query on ``hf`` (``constrained_ranking`` over its pool), one
    JSONL row per query; rows already in ``path`` for the same model and prompt kind are kept."""
    key = {"model": _name(hf), "show_pool": show_pool}
    kept = {r["id"]: r for r in (read_jsonl(path) if path.exists() else []) if all(r.get(k) == v for k, v in key.items())}
    out = []
    for probe in queries:
        if probe.id not in kept:
            pool = [catalogue[r] for r in probe.pool_rows]
            ranked = constrained_ranking(hf, selection_messages(probe.query, pool if show_pool else None), probe.pool)
            kept[probe.id] = {**key, "id": probe.id, "tier": probe.tier, "ranked": [n for n, _ in ranked],
                              "logprob": [s for _, s in ranked], **ranking_scores([n for n, _ in ranked],
                                                                                   probe.relevant, ks)}  # fmt: skip
            append_jsonl(path, kept[probe.id])
        out.append(kept[probe.id])
    return out


def embedding_rows(index: ToolIndex, queries: Sequence[Any], ks: Sequence[int] = KS) -> dict[str, list[dict[str, Any]]]:
    """The embedding-retrieval baseline: the pool's tools and the whole catalogue's by cosine to the query."""
    pool, whole = [], []
    for probe in queries:
        pool.append({"id": probe.id, "tier": probe.tier, **ranking_scores(index.rank(probe.query, probe.pool_rows),
                                                                          probe.relevant, ks)})  # fmt: skip
        whole.append({"id": probe.id, "tier": probe.tier, **ranking_scores(index.rank(probe.query), probe.relevant, ks)})
    return {"embedding_pool": pool, "embedding_catalogue": whole}


def run_toolsense(c: Mapping[str, Any], *, writer: Any, judge: Any, embedder: Any, hf: Any, run: Runner,
                  out: str | Path, seed: int = 0, progress: bool = False) -> dict[str, Any]:  # fmt: skip
    """Build (or read back from the cache) the probe sets and score the acting model on them
    (``run(folder, task, config)`` runs a task through kate's runner); the summary is returned and
    written to ``<out>/toolsense/summary.json``."""
    folder = Path(out) / "toolsense"
    tools = catalogue_of(c)
    save_catalogue(folder / "catalogue.jsonl", tools)
    index = ToolIndex(tools, embedder, cache=folder / "catalogue_vectors.npz")
    cache = LLMCache(c["cache"] or folder / "llm_cache.jsonl")
    author = ProbeWriter(writer, cache, judge, attempts=c["attempts"], temperature=c["temperature"],
                         max_tokens=c["max_tokens"], seed=seed, judge_mcq=c["judge_mcq"])  # fmt: skip
    if c["probes_from"] not in ("llm", "catalogue"):
        raise ValueError(f"toolsense.probes_from={c['probes_from']!r}: llm or catalogue")
    makers = ({"mcq_of": lambda row: catalogue_mcq(index, row, seed), "qa_of": partial(catalogue_qa, index)}
              if c["probes_from"] == "catalogue" else {})  # fmt: skip
    sets = generate(index, author, queries_per_tier=c["queries_per_tier"], mcq=c["mcq"], qa=c["qa"], seed=seed,
                    max_seeds=c["max_seeds"], workers=c["workers"], progress=progress, **makers)  # fmt: skip
    for name, rows in sets.items():
        _write(folder / f"{name}.jsonl", rows)
    queries, ks = sets["queries"], tuple(c["ks"])
    config = {"catalogue_sha256": catalogue_sha256(tools), "writer": _name(writer), "judge": _name(author.judge)}
    methods: dict[str, Any] = {}
    if queries:
        task = SelectionTask(queries, catalogue=tools, show_pool=c["show_pool"], ks=ks, origin=config)
        methods["free"] = run("toolsense/free", task, config)
        if hf is not None:
            methods["constrained"] = constrained_rows(hf, queries, tools, folder / "constrained.jsonl",
                                                      show_pool=c["show_pool"], ks=ks)  # fmt: skip
        else:
            print("kate diagnose: toolsense's constrained selection needs an hf client (hf=... or llm=hf); skipped")
        methods.update(embedding_rows(index, queries, ks))
    mcq = run("toolsense/mcq", MCQTask(sets["mcq"], origin=config), config) if sets["mcq"] else []
    qa = run("toolsense/qa", QATask(sets["qa"], origin=config), config) if sets["qa"] else []
    summary = {
        "catalogue": {"source": c["catalogue"], "n": len(tools), "names": len({t.name for t in tools}),
                      "sha256": config["catalogue_sha256"]},
        "generation": {"writer": config["writer"], "judge": config["judge"], "workers": c["workers"],
                       "probes_from": c["probes_from"], "judge_mcq": c["judge_mcq"], "stats": author.stats,
                       "asked": cache.asked, "cached": cache.hits,
                       "queries": {f"tier{t}": sum(q.tier == t for q in queries) for t in TIERS},
                       "mcq": len(sets["mcq"]), "qa": len(sets["qa"]),
                       "qa_yes": sum(q.answer == "Yes" for q in sets["qa"])},
        "show_pool": c["show_pool"], "ks": list(ks), "constrained_method": CONSTRAINED_METHOD,
        "constrained_model": model_identity(hf) if hf is not None else None,
        "selection": selection_table(methods, ks) if queries else None,
        "mcq": accuracy_block(mcq, 0.25), "qa": accuracy_block(qa, 0.5),
    }  # fmt: skip
    atomic_write_json(folder / "summary.json", summary)
    return summary
