"""The one runner: a task's items through a policy, one record per item written as it finishes,
resumable, with bounded parallelism and a progress bar (running share of items solved).

A model server that stays unavailable through the client's retries (``UpstreamUnavailable``), or a
local engine that fails on one request (``EngineError``: a decode with no room, a closed model),
makes an explicit failure record of that item (``error_type: kate:upstream_error`` or
``kate:engine_error``), not a crash of the run or of the items in flight beside it; it says nothing
of the policy, so a resume (the same command) drops those records and redoes their items, as it
redoes items with no record. Every other record is kept, model errors included.

    store = open_run(folder, arm="st_w8v", task=task, policy=policy, seed=0, config=arm_config)
    records = run_task(task, policy, store, seed=0, workers=8)

``kate eval``, ``kate main``, ``kate appworld`` and ``bench/`` all run through it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tqdm import tqdm

from kate.agent.policy import Policy
from kate.eval.record import Record
from kate.eval.run_store import RunStore, load_run
from kate.io import atomic_write_text
from kate.llm.base import EngineError
from kate.llm.identity import model_runtime
from kate.llm.openai import UpstreamUnavailable
from kate.tasks.base import Item, Task


def run_meta(arm: str, task: Task, policy: Policy, seed: int, config: Mapping[str, Any],
             items: Sequence[Item], workers: int = 1) -> dict[str, Any]:  # fmt: skip
    """Everything that determines the records (fingerprinted), plus what helps reproduce them
    elsewhere (``runtime``: engine build, CPU kernels, threads) and the items planned."""
    data = getattr(task, "data", None)
    return {
        "arm": arm,
        "config": dict(config),
        "policy": policy.describe(),
        "task": {"name": task.name, **task.describe()},
        "seed": seed,
        "items": [item.id for item in items],
        "data": data() if callable(data) else None,
        "runtime": model_runtime(policy.model),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "workers": workers,
    }


def open_run(folder: str | Path, *, arm: str, task: Task, policy: Policy, seed: int, config: Mapping[str, Any],
             workers: int = 1) -> RunStore:  # fmt: skip
    """The result folder of one arm and seed (a folder holding another configuration is refused)."""
    return RunStore(folder, run_meta(arm, task, policy, seed, config, task.items(), workers))


UPSTREAM_ERROR = "kate:upstream_error"  # the model server stayed unavailable: a failure a resume redoes
ENGINE_ERROR = "kate:engine_error"  # the local engine failed on this item's request: a resume redoes it too
REDONE = (UPSTREAM_ERROR, ENGINE_ERROR)


def run_item(task: Task, item: Any, policy: Policy, seed: int) -> Record:
    start = time.perf_counter()
    try:
        trace = task.solve(item, policy, seed)
    except (UpstreamUnavailable, EngineError) as error:
        kind = UPSTREAM_ERROR if isinstance(error, UpstreamUnavailable) else ENGINE_ERROR
        score = {"valid": False, "error_type": kind, "error": str(error)}
        return Record(item.id, item.category, seed, score, {}, round(time.perf_counter() - start, 3))
    score = task.score(item, trace)
    return Record(item.id, item.category, seed, score, trace, round(time.perf_counter() - start, 3))


def _drop_upstream_failures(store: RunStore, wanted: set[str]) -> None:
    """Rewrite ``records.jsonl`` (atomically) without the upstream failures of ``wanted`` items, so
    they are redone like missing ones and no item ever has two records."""
    records = store.records()
    kept = [r for r in records if not (r["id"] in wanted and r.get("error_type") in REDONE)]
    if len(kept) < len(records):
        atomic_write_text(store.records_path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept))


def _keep_finished(futures: Sequence[Any], taken: set[Any], store: RunStore) -> None:
    """After a stop: wait for the items that were running and store their records (a stop loses no
    finished work and never records an item twice)."""
    for future in futures:
        if future in taken or future.cancelled():
            continue
        try:
            store.append(future.result())
        except Exception:  # noqa: BLE001  (the stop is what is raised; this item is redone on resume)
            continue


def run_task(task: Task, policy: Policy, store: RunStore, *, seed: int = 0, workers: int = 1,
             items: Sequence[Any] | None = None, desc: str | None = None,
             on_record: Callable[[Record], None] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Run every item (default: all of the task's) not yet in ``store``; returns the records of
    those items, old and new."""
    items = list(task.items() if items is None else items)
    wanted = {item.id for item in items}
    _drop_upstream_failures(store, wanted)
    records = [r for r in store.records() if r["id"] in wanted]
    done = {r["id"] for r in records}
    todo = [item for item in items if item.id not in done]
    solved = sum(bool(r["valid"]) for r in records)
    bar = tqdm(total=len(items), initial=len(records), desc=desc or task.name, unit="item", dynamic_ncols=True)
    bar.set_postfix(solved=f"{solved / max(len(records), 1):.3f}")
    taken: set[Any] = set()

    def take(future: Any) -> None:
        nonlocal solved
        taken.add(future)
        record = future.result()
        store.append(record)
        records.append(record.to_dict())
        solved += record.valid
        bar.update(1)
        bar.set_postfix(solved=f"{solved / len(records):.3f}")
        if on_record is not None:
            on_record(record)

    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    futures = [pool.submit(run_item, task, item, policy, seed) for item in todo]
    try:
        for future in as_completed(futures):
            take(future)
    except BaseException:  # a stop (Ctrl-C, SIGTERM's SystemExit) or a failure: start nothing new
        for future in futures:
            future.cancel()
        _keep_finished(futures, taken, store)  # items already running finish; their records are kept
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    bar.close()
    failed = sum(r.get("error_type") in REDONE for r in records)
    if failed:
        tqdm.write(f"{store.records_path}: {failed} item(s) failed on the model server or engine; the same command "
                   "redoes them")
    order = {item.id: i for i, item in enumerate(items)}
    return sorted(records, key=lambda r: order[r["id"]])


def rescore(task: Task, records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Score stored records again with the task's current checker (no generation): (records, changed)."""
    items = {item.id: item for item in task.items()}
    out, changed = [], 0
    for record in records:
        if record.get("error_type") in REDONE:  # no trace to score
            out.append(record)
            continue
        score = task.score(items[record["id"]], record)
        changed += any(record.get(k) != v for k, v in score.items())
        out.append({**record, **score})
    return out, changed


def rescore_run(folder: str | Path, task_for: Callable[[list[dict[str, Any]]], Task]) -> dict[str, int]:
    """Re-score every record of a run folder in place (atomically): ``{"records": n, "changed": k}``.
    ``task_for(records)`` gives a task whose items cover the records."""
    _, records = load_run(folder)
    rescored, changed = rescore(task_for(records), records)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rescored)
    atomic_write_text(Path(folder) / "records.jsonl", text)
    return {"records": len(records), "changed": changed}
