"""The task probe: at every save, the model being trained solves a fixed set of held-out training-half
items with kate's default loop (greedy), scored by the tasks' own checkers: BFCL's official ones for
BFCL entries, the own-tools task's for its questions (a right call and a right final answer).

The items are the source entries of the dataset's part that the job does not train on (for SFT on
the ``sft`` part: ``rl``), so the probe reads what training generalizes to, never a test half. A job
after another (DPO or GRPO from an SFT adapter) should train on the same part as the one before it,
or its "held-out" items are the earlier job's training items; rows record the part (``items_from``). One share
per category (``valid``) and their mean; the checkpoint with the best mean is the run's choice
(``best_step``: ties go to the earlier step), a rule fixed before any curve existed. By default the
items run on llama.cpp with the checkpoint's adapter (``engine_client``): what a user runs, quantized, several
items decoded together, rather than generating with the model being trained in float32.

    probe = task_probe_set(held_out_rows, ["own_tools", "irrelevance"], per_category=8, seed=0)
    task_probe(client, probe)  # {"own_tools": {"n": 8, "valid": 0.5, ...}, ..., "mean": 0.44}
"""

from __future__ import annotations

import hashlib
import json
import random
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from kate.agent.policy import Policy
from kate.agent.settings import LoopSettings
from kate.llm.base import supports
from kate.sampling.policy import GreedySampler

OWN_TOOLS = "own_tools"
DEFAULT_CATEGORIES = ("own_tools", "irrelevance", "live_irrelevance", "simple_python", "multiple")


@dataclass(frozen=True)
class TaskProbeSet:
    """Source ids per category (held-out training-half items), in the order they are solved."""

    items: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return sum(len(ids) for ids in self.items.values())


def task_probe_set(rows: Sequence[Mapping[str, Any]], categories: Sequence[str], *, per_category: int,
                   seed: int = 0) -> TaskProbeSet:  # fmt: skip
    """Up to ``per_category`` source entries of each category among ``rows`` (a seeded sample of the
    sorted ids, so the set is fixed for a dataset); a category with no row is left out."""
    out: dict[str, tuple[str, ...]] = {}
    for category in categories:
        ids = sorted({str(r["source_id"]) for r in rows if r["category"] == category})
        if ids and per_category > 0:  # one draw per category: adding a category changes no other's items
            rng = random.Random(f"{seed}:{category}")
            out[category] = tuple(sorted(rng.sample(ids, min(per_category, len(ids)))))
    return TaskProbeSet(out)


def _task(category: str, ids: Sequence[str]) -> tuple[Any, list[Any]]:
    """The task solving ``ids`` and its items, in the order of ``ids`` (an unknown id fails loudly)."""
    if category == OWN_TOOLS:
        from kate.tasks.own_tools import OwnToolsTask

        task: Any = OwnToolsTask(split="train")
    else:
        from kate.bfcl.data import load_entries
        from kate.tasks.bfcl import BFCLTask

        task = BFCLTask(load_entries(category, "train"), split="train")
    by_id = {item.id: item for item in task.items()}
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise ValueError(f"task probe: {category} has no training-half item {missing[0]!r}")
    return task, [by_id[i] for i in ids]


def task_probe(client: Any, probe: TaskProbeSet, *, max_tokens: int = 256, max_steps: int = 4, seed: int = 0,
               workers: int = 1, progress: bool = True) -> dict[str, Any]:  # fmt: skip
    """Each category's share of items solved (``valid``; own tools also ``answer_ok``) and the mean.
    ``workers`` items in flight at once (a llama.cpp client decodes them together; an ``hf`` one: 1)."""
    # a Policy's own default loop (the answering settings where the model takes prefill=, as for a user's
    # tools), no knowledge: what a user of the checkpoint gets from the Python API
    settings = (LoopSettings.answering if supports(client, "prefill") else LoopSettings)(max_steps=max_steps)
    policy = Policy(client, GreedySampler(max_tokens=max_tokens), settings=settings)
    out: dict[str, Any] = {}
    bar = tqdm(total=probe.n, desc="task probe", unit="item", disable=not progress)

    def solved(task: Any, item: Any) -> dict[str, Any]:
        score = task.score(item, task.solve(item, policy, seed))
        bar.update(1)
        return score

    for category, ids in probe.items.items():
        task, items = _task(category, ids)
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            scores = list(pool.map(lambda item: solved(task, item), items))
        row = {"n": len(scores), "valid": round(sum(bool(s.get("valid")) for s in scores) / len(scores), 4)}
        if category == OWN_TOOLS:
            row["answer_ok"] = round(sum(bool(s.get("answer_ok")) for s in scores) / len(scores), 4)
        out[category] = row
    bar.close()
    if out:
        out["mean"] = round(sum(r["valid"] for r in out.values()) / len(out), 4)
        out["fingerprint"] = probe_fingerprint(probe, max_tokens=max_tokens, max_steps=max_steps,
                                               engine=str(getattr(client, "name", "")))  # fmt: skip
    return out


def probe_fingerprint(probe: TaskProbeSet, **settings: Any) -> str:
    """A short hash of the items and settings: only rows that share it are compared (a resumed run may
    change the probe; the curve's earlier rows then stay, but no longer compete for ``best/``)."""
    text = json.dumps({"items": probe.items, **settings}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def engine_client(model: str, adapter: str | Path | None, *, workers: int) -> Any:
    """The model as users run it: llama.cpp over the quantized base, the adapter (a PEFT folder,
    converted into its ``adapter.gguf``) applied at run time; None: the base alone."""
    from kate.llm.llamacpp import LlamaCppChatModel

    return LlamaCppChatModel(model, n_ctx=8192, kv_cells=8192 * max(1, workers), max_parallel=max(1, workers),
                             lora=str(adapter) if adapter else None, name="task-probe")  # fmt: skip


def best_step(rows: Sequence[Mapping[str, Any]], *, include_start: bool = False) -> int | None:
    """The step whose task probe has the highest mean (the earlier on ties) among the rows probed like
    the latest (``fingerprint``); step 0 (the model before training) only with ``include_start``.
    None when no row has a task probe."""
    with_tasks = [r for r in rows if (r.get("tasks") or {}).get("mean") is not None]
    if not with_tasks:
        return None
    current = with_tasks[-1]["tasks"].get("fingerprint")  # rows probed as the latest was
    scored = [(r["tasks"]["mean"], -r["step"], r["step"]) for r in with_tasks
              if r["tasks"].get("fingerprint") == current and (include_start or r["step"] > 0)]  # fmt: skip
    return max(scored)[2] if scored else None
