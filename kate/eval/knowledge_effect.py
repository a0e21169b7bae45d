"""Does injected knowledge fix or break an answer? Per arm (a way of retrieving knowledge) and category:
how many questions received knowledge, and of those how many the model answered right without it and with
it, fixed and broke. Resumable: one record per (question, arm) in a JSONL file, each pair answered once
(bench/selection_llm.py runs it on BFCL's training halves)."""

from __future__ import annotations

import collections
import sys
from pathlib import Path
from typing import Any

from kate.agent import KnowledgeContext
from kate.io import append_jsonl, read_jsonl


def stored(records_path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """The records a previous run wrote, keyed by (entry id, arm); a torn last line is dropped."""
    if not records_path.is_file():
        return {}
    return {(r["id"], r["arm"]): r for r in read_jsonl(records_path)}


def tally(questions: dict[str, list], arms: list[str], knowledge_of: dict[str, Any], answer,
          records_path: Path) -> dict[str, dict[str, collections.Counter]]:  # fmt: skip
    """Per arm and category, the counts over ``questions``; each (question, arm) that received knowledge
    is answered once, its record appended to ``records_path``. A rerun resumes: a pair already recorded
    there is counted from its record and neither answered nor appended again (the records carry no
    model or settings: another model or setting needs another ``--out``)."""
    done = stored(records_path)
    counts: dict[str, dict[str, collections.Counter]] = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    direct_cache: dict[str, bool] = {key[0]: bool(r["direct"]) for key, r in done.items()}
    for category, entries in questions.items():
        for entry in entries:
            for arm in arms:
                context = KnowledgeContext("single_turn", api_classes=(), tools=tuple(entry.tools))
                retrieved = knowledge_of[arm](str(entry.turns[0][-1]["content"]), [], context)
                c = counts[arm][category]
                c["questions"] += 1
                if retrieved is None:
                    continue
                if (entry.id, arm) in done:
                    before, after = bool(done[entry.id, arm]["direct"]), bool(done[entry.id, arm]["with_knowledge"])
                else:
                    if entry.id not in direct_cache:
                        direct_cache[entry.id] = bool(answer(entry, None)["valid"])
                    record = answer(entry, retrieved.text)
                    before, after = direct_cache[entry.id], bool(record["valid"])
                    append_jsonl(records_path, {"id": entry.id, "arm": arm, "direct": before, "with_knowledge": after,
                                                "hits": list(retrieved.hits), "calls": record["calls"],
                                                "outputs": record.get("outputs"), "error_type": record.get("error_type")})
                    print(f"[select] {arm[:20]} {entry.id}: direct {before} -> {after}", file=sys.stderr, flush=True)
                c["with_knowledge"] += 1
                c["direct_correct"] += before
                c["knowledge_correct"] += after
                c["fixed"] += after and not before
                c["broken"] += before and not after
    return counts
