"""Scoring a model on ToolSense's probes: recall@k and NDCG@k of a ranking of tool names, free
generation's names parsed from the answer text, constrained selection, and the summary.

Constrained selection can only produce catalogue names: it is done by scoring each candidate of
the query's pool (names of the catalogue) by its mean per-token log-likelihood as the answer's
start, on an ``hf`` client (``constrained_ranking``; the prompt runs once, its KV cache reused for
every candidate), and ranking them; the ranking is a permutation of the pool, nothing else. Free
generation is the same prompt answered greedily; the answer's names are the catalogue names it
contains, in order of first mention (``parse_tool_names``). kate's "internalization" figure is the
ratio free@k / constrained@k of recall (the seed's IS@k could not be checked in the paper).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from kate.llm.base import Message

KS = (1, 3, 5)


def recall_at_k(ranked: Sequence[str], relevant: Sequence[str], k: int) -> float:
    """Share of the relevant names among the first k of ``ranked``."""
    if not relevant:
        raise ValueError("recall needs at least one relevant tool")
    return len(set(ranked[:k]) & set(relevant)) / len(set(relevant))


def ndcg_at_k(ranked: Sequence[str], relevant: Sequence[str], k: int) -> float:
    """Binary-gain NDCG@k: DCG of ``ranked``'s first k over that of an ideal ranking."""
    wanted = set(relevant)
    if not wanted:
        raise ValueError("NDCG needs at least one relevant tool")
    dcg = sum(1 / math.log2(i + 2) for i, name in enumerate(ranked[:k]) if name in wanted)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(k, len(wanted))))
    return dcg / ideal


def parse_tool_names(text: str, names: Sequence[str]) -> list[str]:
    """The names of ``names`` that ``text`` mentions as whole identifiers, in order of first mention
    (where two overlap, the longer one)."""
    found: list[tuple[int, int, str]] = []
    for name in sorted(set(names), key=len, reverse=True):
        for match in re.finditer(r"(?<![\w.])" + re.escape(name) + r"(?![\w])", text or ""):
            found.append((match.start(), match.end(), name))
    found.sort(key=lambda f: (f[0], -(f[1] - f[0])))
    out: list[str] = []
    end = -1
    for start, stop, name in found:
        if start >= end:
            end = stop
            if name not in out:
                out.append(name)
    return out


def selection_messages(query: str, pool: Sequence[Any] | None) -> list[Message]:
    """The selection prompt: the pool's tools listed (``pool`` of ``Tool``), or none (``None``: the
    model must know the tools' names itself)."""
    if pool is None:
        ask = (f"Request: {query}\n\nWhich tools (function names) are needed for this request? Answer with the "
               "tool names only, most relevant first, one per line.")  # fmt: skip
    else:
        listing = "\n".join(f"- {t.brief}" for t in pool)
        ask = (f"Tools:\n{listing}\n\nRequest: {query}\n\nWhich of these tools are needed for this request? "
               "Answer with the tool names only, most relevant first, one per line.")  # fmt: skip
    return [{"role": "user", "content": ask}]


def constrained_ranking(model: Any, messages: Sequence[Message], candidates: Sequence[str]) -> list[tuple[str, float]]:
    """``(name, mean log-probability per token)`` of each candidate as the start of the answer of an
    ``hf`` client (``render``, ``tokenizer``, ``model``, ``device``), best first. Only candidates
    can come out."""
    import copy
    import inspect

    import torch

    if not candidates:
        raise ValueError("no candidates to choose from")
    prompt = list(model.tokenizer(model.render([dict(m) for m in messages], None), add_special_tokens=False).input_ids)
    device = model.device
    # the cache keyword: ``cache`` in newer transformers, ``past_key_values`` before
    word = "cache" if "cache" in inspect.signature(model.model.forward).parameters else "past_key_values"
    scores = []
    with torch.no_grad():
        out = model.model(torch.tensor([prompt], device=device), use_cache=True)
        cache = getattr(out, "cache", None) or out.past_key_values
        first = torch.log_softmax(out.logits[0, -1].float(), -1)
        for name in candidates:
            ids = list(model.tokenizer(name, add_special_tokens=False).input_ids)
            logps = [float(first[ids[0]])]
            if len(ids) > 1:  # the rest of the name against a copy of the prompt's cache
                step = model.model(torch.tensor([ids[:-1]], device=device), use_cache=True,
                                   **{word: copy.deepcopy(cache)})  # fmt: skip
                rest = torch.log_softmax(step.logits[0].float(), -1)
                logps += [float(rest[j, t]) for j, t in enumerate(ids[1:])]
            scores.append((name, sum(logps) / len(logps)))
    return sorted(scores, key=lambda s: -s[1])


def ranking_scores(ranked: Sequence[str], relevant: Sequence[str], ks: Sequence[int] = KS) -> dict[str, float]:
    out = {f"recall@{k}": recall_at_k(ranked, relevant, k) for k in ks}
    out.update({f"ndcg@{k}": ndcg_at_k(ranked, relevant, k) for k in ks})
    return out


def _mean(rows: Sequence[Mapping[str, Any]], key: str) -> float | None:
    values = [float(r[key]) for r in rows if r.get(key) is not None]
    return sum(values) / len(values) if values else None


def selection_table(methods: Mapping[str, Sequence[Mapping[str, Any]]], ks: Sequence[int] = KS) -> dict[str, Any]:
    """Per method (``free``, ``constrained``, ``embedding_pool``, ``embedding_catalogue``; rows with
    ``tier`` and the ``recall@k`` / ``ndcg@k`` keys) and tier: n and mean scores; then the ratio
    free@k / constrained@k of recall per tier (kate's internalization figure)."""
    keys = [f"{m}@{k}" for m in ("recall", "ndcg") for k in ks]
    table: dict[str, Any] = {}
    for method, rows in methods.items():
        if rows is None:
            continue
        tiers = {"all": list(rows), **{f"tier{t}": [r for r in rows if r["tier"] == t]
                                        for t in sorted({r["tier"] for r in rows})}}  # fmt: skip
        table[method] = {tier: {"n": len(rs), **{k: _mean(rs, k) for k in keys}} for tier, rs in tiers.items()}
    ratio: dict[str, Any] = {}
    if "free" in table and "constrained" in table:
        for tier, row in table["constrained"].items():
            free = table["free"].get(tier, {})
            ratio[tier] = {f"recall@{k}": (free.get(f"recall@{k}") / row[f"recall@{k}"])
                           if row.get(f"recall@{k}") and free.get(f"recall@{k}") is not None else None
                           for k in ks}  # fmt: skip
    return {"methods": table, "internalization": ratio}


def accuracy_block(records: Sequence[Mapping[str, Any]], baseline: float) -> dict[str, Any]:
    n = len(records)
    accuracy = sum(bool(r.get("valid")) for r in records) / n if n else None
    return {"n": n, "accuracy": accuracy, "baseline": baseline,
            "unparsed": sum(r.get("chosen") is None for r in records)}  # fmt: skip


def selection_markdown(table: Mapping[str, Any], ks: Sequence[int] = KS) -> str:
    """The selection table as Markdown: one row per method and tier."""
    head = " | ".join(f"R@{k}" for k in ks) + " | " + " | ".join(f"NDCG@{k}" for k in ks)
    lines = [f"| method | tier | n | {head} |", "|---|---|---|" + "---|" * (2 * len(ks))]
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    for method, tiers in table["methods"].items():
        for tier, row in tiers.items():
            cells = " | ".join(fmt(row[f"{m}@{k}"]) for m in ("recall", "ndcg") for k in ks)
            lines.append(f"| {method} | {tier} | {row['n']} | {cells} |")
    if table.get("internalization"):
        lines += ["", "| internalization (free / constrained recall) | " + " | ".join(f"@{k}" for k in ks) + " |",
                  "|---|" + "---|" * len(ks)]  # fmt: skip
        for tier, row in table["internalization"].items():
            lines.append(f"| {tier} | " + " | ".join(fmt(row[f"recall@{k}"]) for k in ks) + " |")
    return "\n".join(lines)


def toolsense_markdown(summary: Mapping[str, Any]) -> list[str]:
    """The report's ToolSense section (lines) from ``toolsense/summary.json``."""
    cat, gen = summary["catalogue"], summary["generation"]
    pct = lambda v: "-" if v is None else f"{100 * v:.1f}%"  # noqa: E731
    queries = gen["queries"]
    made = ("Queries written by" if gen.get("probes_from") == "catalogue" else "Probes written by")
    built = (" MCQ and QA built from the catalogue (a tool's own description against its farthest pool neighbours'; "
             "answers known by construction)." if gen.get("probes_from") == "catalogue" else "")  # fmt: skip
    lines = ["## Tool knowledge (ToolSense probes)", "",
             f"Catalogue `{cat['source']}`: {cat['n']} tools ({cat['names']} names). {made} "
             f"`{gen['writer']}`, judged by `{gen['judge']}`.{built} Kept: queries "
             + ", ".join(f"{k} {v}" for k, v in queries.items()) + f", MCQ {gen['mcq']}, QA {gen['qa']} "
             f"({gen['qa_yes']} Yes). Writer requests this run: {gen['asked']} asked, {gen['cached']} from the cache.",
             "", "Checks (answers per outcome): "
             + "; ".join(f"{kind}: " + ", ".join(f"{r} {n}" for r, n in sorted(row.items()))
                         for kind, row in sorted(gen["stats"].items())), ""]  # fmt: skip
    if summary.get("selection"):
        pool = "the pool's names and descriptions listed" if summary["show_pool"] else "no tools listed"
        lines += [f"Tool selection over each query's pool of 14 ({pool}). Free: greedy answer, catalogue names "
                  f"parsed in order of mention. Constrained: {summary['constrained_method']}. Embedding: kate's "
                  "index, tools by cosine to the query (pool, and the whole catalogue).", "",
                  selection_markdown(summary["selection"], summary["ks"]), ""]  # fmt: skip
    for key, label in (("mcq", "MCQ (4 options)"), ("qa", "Yes/no QA")):
        block = summary[key]
        lines.append(f"- {label}: accuracy {pct(block['accuracy'])} of n = {block['n']} (random baseline "
                     f"{pct(block['baseline'])}; unparsed answers {block['unparsed']})")  # fmt: skip
    return lines + [""]
