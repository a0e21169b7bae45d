"""KATE's AppWorld knowledge: ST entries (task instruction -> solution code) from solved tasks,
retrieved top-3 at p = 0.5 for a new task's instruction, filtered to the task's apps.

Sources: AppWorld's train split (ground-truth solutions through the worker; needs the task data)
or the stand-in tasks (for tests). Entries are ordinary ``KnowledgeEntry`` ST rows whose payload
carries ``code`` instead of ``calls``; the store, index, retriever and hook are kate's own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from tqdm import tqdm

from kate.knowledge.embedder import Embedder
from kate.knowledge.entries import KnowledgeEntry
from kate.knowledge.index import IndexSpec
from kate.knowledge.store import KnowledgeBase
from kate.retrieval.inject import Template

CODE_TEMPLATE = Template(
    header="[Reference only: solved examples from OTHER tasks. Use them as patterns for which APIs to use and "
           "how; take every value from your own task and the outputs you see.]",  # fmt: skip
    items={"ST": "Past example {n}:\n  Task: {question}\n  Solution:\n```python\n{code}\n```"},
    footer="[End of reference examples. Now solve your own task, one code step at a time.]",
    max_chars=6000,
)


def solution_entries(solutions: Iterable[Mapping[str, Any]], source: str) -> list[KnowledgeEntry]:
    """One ST entry per solved task: ``{task_id, instruction, solution_code, allowed_apps, required_apis}``."""
    entries = []
    for item in solutions:
        apis = tuple(item.get("required_apis", ()))
        apps = tuple(sorted({a.split(".")[0] for a in apis} - {"supervisor"})) or tuple(item.get("allowed_apps", ()))
        entries.append(KnowledgeEntry(
            id=f"{source}:{item['task_id']}", type="ST", text=item["instruction"],
            payload={"question": item["instruction"], "code": item["solution_code"]},
            api_classes=apps, tool_names=apis, source_ids=(item["task_id"],), source=source,
        ))  # fmt: skip
    return entries


def appworld_solutions(client: Any, dataset: str = "train", limit: int | None = None) -> list[dict[str, Any]]:
    """Ground-truth solutions of a dataset's tasks, from AppWorld (raises AppWorldDataMissing without data)."""
    task_ids = client.task_ids(dataset)[:limit]
    return [client.ground_truth(t) for t in tqdm(task_ids, desc=f"AppWorld {dataset} solutions", unit="task")]


def stand_in_solutions() -> list[dict[str, Any]]:
    from kate.appworld.stand_in import STAND_IN_TASKS

    return [{"task_id": t.task_id, "instruction": t.instruction, "solution_code": t.solution_code,
             "allowed_apps": ["supervisor", "notes"]} for t in STAND_IN_TASKS.values()]  # fmt: skip


def build_code_kb(solutions: list[dict[str, Any]], *, name: str, source: str, embedder: Embedder,
                  save_to: str | Path | None = None,
                  log: Callable[[str], None] = print) -> KnowledgeBase:  # fmt: skip
    entries = solution_entries(solutions, source)
    if not entries:
        raise ValueError(f"no solved tasks to build {name!r} from")
    kb = KnowledgeBase.create(entries, embedder.embed([e.text for e in entries]), embedding=embedder.identity(),
                              index_spec=IndexSpec(), name=name, sources={"kind": source, "tasks": len(entries)},
                              build_config={"source": source, "types": ["ST"]})  # fmt: skip
    if save_to is not None:
        kb.save(save_to)
        log(f"[appworld] saved {len(entries)} ST entries to {save_to}")
    return kb
