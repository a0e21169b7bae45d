"""Entries in flight on the local engine: the same direct arm over the same test-half entries at
several ``workers`` (entries the one runner keeps in flight; their prefill and decode share
llama.cpp batches through kate.llm.llamacpp_batch), each pass into a fresh folder, one model.

For each pass it writes the wall time, entries/s, the scheduler's prefill and decode counters
(tokens and seconds: the engine's prefill tokens/s and decode tokens/s on this machine), and how
many greedy outputs differ from the ``workers=1`` pass (and the entries each side gets right). Per
category it gives the prompt and completion tokens of an entry (from the records' usage) and the
``workers=1`` seconds per entry. Results: ``bench/results/inflight.json``.

    .venv/bin/python bench/inflight.py --limit 2 --workers 1,2,4,8

Nothing else should run on the machine while it measures (``load_avg`` is recorded per pass).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from statistics import mean

from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from kate.bfcl.data import SINGLE_TURN
from kate.cli import CONF_DIR
from kate.eval.arm import arm_config, build_policy, loop_settings
from kate.eval.config import plain
from kate.eval.runner import open_run, run_task
from kate.io import atomic_write_json
from kate.tasks.bfcl import BFCLTask, select_entries

RESULTS = Path(__file__).resolve().parent / "results"


def compose_direct(overrides: list[str]) -> dict:
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return plain(compose("eval", overrides=["arm=direct", "llm.max_parallel=8", *overrides]))


def step_texts(record: dict) -> list[str]:
    """What the model wrote at each step of an entry (a single-turn entry has one)."""
    if "outputs" in record:
        return list(record["outputs"] or [])
    return [s.get("text") for turn in record.get("turns", []) for s in turn.get("steps", [])]


def usage_of(record: dict) -> tuple[int, int]:
    steps = [s for turn in record.get("turns", []) for s in turn.get("steps", [])]
    usage = [s.get("usage") or {} for s in steps] if steps else [record.get("usage") or {}]
    return sum(u.get("prompt_tokens", 0) for u in usage), sum(u.get("completion_tokens", 0) for u in usage)


def one_pass(model, c: dict, task: BFCLTask, workers: int, folder: Path) -> tuple[dict, list[dict]]:
    settings = loop_settings(c)
    policy = build_policy(model, c["sampling"], c["knowledge"], settings)
    config = arm_config(c["llm"], c["sampling"], c["knowledge"], settings)
    store = open_run(folder, arm="direct", task=task, policy=policy, seed=0, config=config, workers=workers)
    before = asdict(model.scheduler.stats)
    start = time.perf_counter()
    records = run_task(task, policy, store, seed=0, workers=workers, desc=f"workers={workers}")
    wall = time.perf_counter() - start
    after = asdict(model.scheduler.stats)
    delta = {k: after[k] - before[k] for k in ("steps", "prefills", "prefill_tokens", "prefill_seconds",
                                                "step_tokens", "step_seconds")}  # fmt: skip
    summary = {
        "workers": workers, "entries": len(records), "wall_s": round(wall, 1),
        "entries_per_s": round(len(records) / wall, 3), "right": sum(bool(r["valid"]) for r in records),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "scheduler": {k: round(v, 2) if isinstance(v, float) else v for k, v in delta.items()},
        "prefill_tokens_per_s": round(delta["prefill_tokens"] / max(delta["prefill_seconds"], 1e-9), 1),
        "decode_tokens_per_s": round(delta["step_tokens"] / max(delta["step_seconds"], 1e-9), 1),
        "tokens_per_decode_step": round(delta["step_tokens"] / max(delta["steps"], 1), 2),
    }  # fmt: skip
    return summary, records


def compare(base: list[dict], other: list[dict]) -> dict:
    """Greedy outputs of a pass against the workers=1 pass, entry by entry (same ids)."""
    by_id = {r["id"]: r for r in base}
    differ = [r["id"] for r in other if step_texts(r) != step_texts(by_id[r["id"]])]
    fixed = [r["id"] for r in other if r["valid"] and not by_id[r["id"]]["valid"]]
    broken = [r["id"] for r in other if not r["valid"] and by_id[r["id"]]["valid"]]
    return {"outputs_differ": len(differ), "differ_ids": differ, "fixed": fixed, "broken": broken}


def per_category(records: list[dict]) -> dict:
    out: dict[str, dict] = {}
    for category in dict.fromkeys(r["category"] for r in records):
        rs = [r for r in records if r["category"] == category]
        tokens = [usage_of(r) for r in rs]
        out[category] = {"n": len(rs), "prompt_tokens": round(mean(t[0] for t in tokens), 1),
                         "completion_tokens": round(mean(t[1] for t in tokens), 1),
                         "seconds_workers_1": round(mean(r["seconds"] for r in rs), 2)}  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=2, help="test-half entries per single-turn category")
    parser.add_argument("--workers", default="1,2,4,8")
    parser.add_argument("--categories", default=",".join(SINGLE_TURN))
    parser.add_argument("--llm", default="", help="extra llm overrides, comma-separated (llm.n_threads_step=2)")
    parser.add_argument("--out", default=str(RESULTS / "inflight.json"))
    args = parser.parse_args()
    c = compose_direct([o for o in args.llm.split(",") if o])
    task = BFCLTask(select_entries(args.categories.split(","), "test", args.limit), "test")
    model = instantiate(c["llm"])
    root = Path(tempfile.mkdtemp(prefix="kate-inflight-"))
    passes, base = [], None
    try:
        for workers in [int(w) for w in args.workers.split(",")]:
            summary, records = one_pass(model, c, task, workers, root / f"w{workers}")
            if base is None:
                base, categories = records, per_category(records)
            summary["against_first_pass"] = compare(base, records)
            passes.append(summary)
            print(json.dumps({k: v for k, v in summary.items() if k != "against_first_pass"}))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = {"command": f"bench/inflight.py --limit {args.limit} --workers {args.workers}"
                         + (f" --llm {args.llm}" if args.llm else ""),
              "model": c["llm"]["model"], "llm": c["llm"], "entries": len(task.items()), "split": "test",
              "cpu_count": os.cpu_count(), "runtime": model.runtime(), "passes": passes,
              "per_category": categories}  # fmt: skip
    atomic_write_json(Path(args.out), result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
