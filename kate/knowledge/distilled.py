"""Distilled knowledge: short lessons (a title, when it applies, what to do, what to avoid) written by a
local model from the policy model's judged answers on the training halves, successes and failures
alike (the experience-memory recipe of ReasoningBank and Agent Workflow Memory: abstracted
strategies, not raw trajectories).

The cases and their grouping (by category and verdict kind: why, in ``kate.knowledge.distilled_cases``)
come from run folders of kate's runner judged by BFCL's official checkers; each chunk of a group is
one request to the writer (``kate.knowledge.distilled_prompt``), answered through the ``LLMCache``
(a rebuild asks nothing again: same cases, same prompt, same key). An answer that lacks a field, or
whose fields carry the cases' literal argument values (stripped or refused, ``copied``), is a
recorded skip (the manifest's ``build_stats.distilled.skipped``: group and reason), never a crash.

Each entry is embedded by its title and when-line followed by up to ``embed_examples`` of its cases'
requests (an abstract sentence alone sits far from any concrete request in the embedder's space; the
requests are embedded only, never shown). It is shown as its four fields (``kate.retrieval.inject``,
type ``distilled``), retrieved as ST is: top-K at cosine >= p through ``RetrievalConfig``. It names no
function (``tool_names`` is empty), so the single-turn tool filter keeps it for any request; a dialogue's
lesson keeps its cases' API classes for the multi-turn class filter.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from kate.knowledge.build import cache_path
from kate.knowledge.distilled_cases import Case, group_cases, read_cases, runs_sha
from kate.knowledge.distilled_prompt import check_copied, copied_values, distil_messages, parse_fields
from kate.knowledge.embedder import Embedder
from kate.knowledge.entries import KnowledgeEntry
from kate.knowledge.index import IndexSpec
from kate.knowledge.llm_cache import LLMCache
from kate.knowledge.specs import DistilledSpec  # noqa: F401  (the spec, light: kate.knowledge.specs)
from kate.knowledge.store import KnowledgeBase
from kate.knowledge.trajectory import Trajectory
from kate.llm.base import ChatModel

TYPE = "distilled"
PURPOSE = "distilled/1"




def distilled_entry(group: str, cases: Sequence[Case], fields: Mapping[str, str], *, stripped: int,
                    embed_examples: int, writer: str) -> KnowledgeEntry:  # fmt: skip
    first = cases[0]
    examples = [c.request[:300] for c in cases[:embed_examples]]
    text = " ".join([f"{fields['title']}. {fields['when']}", *examples])
    classes = tuple(sorted({cls for c in cases for cls in c.api_classes}))
    return KnowledgeEntry(
        id=f"{TYPE}:{group}", type=TYPE, text=text,
        payload={**fields, "category": first.category, "verdict": first.verdict, "cases": [c.id for c in cases],
                 "stripped": stripped},
        api_classes=classes, tool_names=(), source_ids=tuple(dict.fromkeys(s for c in cases for s in c.source_ids)),
        source=first.category, written_by=writer,
    )  # fmt: skip


def distilled_entries(cases: Sequence[Case], model: ChatModel, cache: LLMCache, spec: DistilledSpec, *,
                      progress: Callable[[int, int], None] | None = None
                      ) -> tuple[list[KnowledgeEntry], list[dict[str, str]]]:  # fmt: skip
    """The entries of ``cases``' chunks, and the skips (``{"group", "reason"}``) in chunk order."""
    chunks = group_cases(cases, spec.cases_per_entry)
    if spec.max_entries is not None:
        chunks = chunks[: spec.max_entries]
    done = 0

    def ask(members: Sequence[Case]) -> str:
        nonlocal done
        answer = cache.chat(model, distil_messages(members), purpose=PURPOSE, temperature=spec.temperature,
                            max_tokens=spec.max_tokens, seed=spec.seed)
        with lock:
            done += 1
            if progress is not None:
                progress(done, len(chunks))
        return answer

    lock = threading.Lock()
    with ThreadPoolExecutor(max_workers=max(1, spec.workers)) as pool:
        answers = list(pool.map(ask, [members for _, members in chunks]))
    entries, skipped = [], []
    for (group, members), answer in zip(chunks, answers):
        parsed = parse_fields(answer, spec.max_words)
        if parsed.fields is not None:
            parsed = check_copied(parsed.fields, copied_values(members), spec.copied, spec.max_stripped)
        if parsed.fields is None:
            skipped.append({"group": group, "reason": parsed.reason})
        else:
            entries.append(distilled_entry(group, members, parsed.fields, stripped=parsed.stripped,
                                           embed_examples=spec.embed_examples, writer=model.name))
    return entries, skipped


def _trajectories(spec: DistilledSpec) -> list[Trajectory]:
    from kate.knowledge.bfcl_source import bfcl_trajectories

    return bfcl_trajectories(spec.categories, spec.split, execute=False, limit=spec.limit)


def build_distilled(spec: DistilledSpec, *, writer: ChatModel, embedder: Embedder | None = None,
                    trajectories: list[Trajectory] | None = None, save: bool = True,
                    log: Callable[[str], None] | None = None) -> KnowledgeBase:  # fmt: skip
    """Build (and by default save under ``spec.root/spec.name``) the distilled base of ``spec``."""
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    started = time.time()
    given = trajectories is not None
    trajectories = trajectories if given else _trajectories(spec)
    cases = read_cases(spec.runs, trajectories)
    cache = LLMCache(cache_path(spec.cache_dir, writer.name))
    log(f"[kb] distilled: {len(cases)} cases from {len(spec.runs)} run(s); writer {writer.name}, "
        f"cache {cache.path} ({len(cache)} answers)")

    def progress(done: int, total: int) -> None:
        if done == total or done % 5 == 0:
            log(f"[kb] distilled: {done}/{total} ({time.time() - started:.0f}s)")

    entries, skipped = distilled_entries(cases, writer, cache, spec, progress=progress)
    log(f"[kb] distilled: {len(entries)} entries, {len(skipped)} skipped")
    embedder = embedder or Embedder(spec.embedding_model)
    embeddings = embedder.embed([e.text for e in entries])
    sources = {"kind": "given" if given else "bfcl", "categories": list(spec.categories), "split": spec.split,
               "runs": runs_sha(spec.runs), "cases": len(cases), "trajectories": len(trajectories)}
    kb = KnowledgeBase.create(entries, embeddings, embedding=embedder.identity(), index_spec=IndexSpec(**spec.index),
                              name=spec.name, sources=sources, build_config=spec.to_dict())
    kb.manifest["build_stats"] = {
        "distilled": {"chunks": len(entries) + len(skipped), "entries": len(entries), "skipped": skipped},
        "llm": {"writer": writer.name, "asked": cache.asked, "cached": cache.hits},
        "seconds": round(time.time() - started, 1),
    }
    if save:
        kb.save(spec.path)
        log(f"[kb] saved {len(entries)} entries to {spec.path} ({kb.manifest['build_stats']['seconds']}s)")
    return kb
