"""Replay multi-turn dialogues' prompt sizes through kate's real BatchScheduler, on an engine that only
counts tokens, to see how much of each step's prompt the prefix cache holds at a given ``kv_cells``.

Each committed multi_turn_base record gives a dialogue's steps and prompt tokens; a dialogue's step
prompts are rebuilt as a first prompt plus a constant growth per step (``--growth``, tokens of the
model's call and the tool's result), summing to the recorded prompt tokens; dialogues of the same
API classes start with the same tokens (their system prompt and tool block: all of the class set's
shortest first prompt but its last ``--question`` tokens), as real ones do. ``--workers`` dialogues
run at once, each on its own thread, as ``kate eval`` runs them. Thread timing varies, so each setting
runs ``--repeats`` times and the file keeps every share. Nothing is decoded: the engine's cost is nil,
so dialogues interleave more tightly than on a real model (an upper bound on contention).

    .venv/bin/python bench/cache_replay.py                 # -> bench/results/cache_replay.json
"""

from __future__ import annotations

import argparse
import json
import random
import threading
from pathlib import Path

import numpy as np

from kate.bfcl.data import load_entries
from kate.io import atomic_write_json
from kate.llm.llamacpp_batch import BatchScheduler
from kate.llm.llamacpp_requests import Request, SamplingParams

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "bench/runs/full/direct/seed_0/records.jsonl"
OUT = ROOT / "bench/results/cache_replay.json"
VOCAB = 64


class CountingEngine:
    """A DecodeEngine that keeps no cells and computes nothing: the scheduler does the bookkeeping."""

    n_batch = 512

    def __init__(self, kv_cells: int, max_parallel: int) -> None:
        self.n_ctx = min(kv_cells, 32768)
        self.kv_cells, self.max_parallel = kv_cells, max_parallel

    def decode_batch(self, entries, *, step: bool = False) -> None: ...
    def logits_at(self, index: int) -> np.ndarray: return np.zeros(VOCAB, np.float32)
    def seq_rm(self, seq: int, p0: int, p1: int) -> None: ...
    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None: ...
    def is_eog(self, token: int) -> bool: return False
    def detokenize(self, tokens: list[int]) -> str: return ""


def dialogue_prompts(record: dict, growth: int) -> list[int]:
    """Prompt lengths of a dialogue's steps: first + j * growth, summing to the recorded prompt tokens."""
    steps = sum(len(t["steps"]) for t in record["turns"])
    total = sum(t["usage"]["prompt_tokens"] for t in record["turns"])
    first = max(256, int((total - growth * steps * (steps - 1) / 2) / steps))
    return [first + j * growth for j in range(steps)]


def shared_prefixes(records: list[dict], growth: int, question: int) -> dict[str, list[int]]:
    """Per API class set: the tokens its dialogues' first prompts share (system prompt and tools)."""
    classes = {r["id"]: ",".join(r.get("classes") or ["?"]) for r in records}
    shortest: dict[str, int] = {}
    for r in records:
        key = classes[r["id"]]
        shortest[key] = min(shortest.get(key, 10**9), dialogue_prompts(r, growth)[0])
    return {key: [random.Random(key).randrange(1, VOCAB) for _ in range(max(0, n - question))]
            for key, n in shortest.items()}  # fmt: skip


def replay(records: list[dict], kv_cells: int, workers: int, max_parallel: int, growth: int, completion: int,
           reserve: int, seed: int, question: int = 150) -> dict:  # fmt: skip
    scheduler = BatchScheduler(CountingEngine(kv_cells - workers * (reserve - completion), max_parallel))
    queue, lock, asked = list(range(len(records))), threading.Lock(), [0]
    prefixes = shared_prefixes(records, growth, question)

    def run_dialogue(record: dict, rng: random.Random) -> None:
        lengths = dialogue_prompts(record, growth)
        prompt = list(prefixes[",".join(record.get("classes") or ["?"])])
        for length in lengths:
            prompt += [rng.randrange(1, VOCAB) for _ in range(length - len(prompt))]
            params = SamplingParams(max_tokens=completion, ignore_eos=True)
            request = Request(prompt=list(prompt), n=1, round_size=1, params=params, rng=np.random.default_rng(0))
            with lock:
                asked[0] += len(prompt)
            scheduler.run(request)

    def worker(k: int) -> None:
        rng = random.Random(seed * 1000 + k)
        while True:
            with lock:
                if not queue:
                    return
                i = queue.pop(0)
            run_dialogue(records[i], rng)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"prompt_tokens": asked[0], "prefilled": scheduler.stats.prefill_tokens,
            "share_prefilled": round(scheduler.stats.prefill_tokens / asked[0], 3)}  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=Path, default=RECORDS, help="a run's records.jsonl (multi_turn_base)")
    parser.add_argument("--kv-cells", type=int, nargs="+", default=[32768, 65536, 131072])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 8], help="dialogues in flight")
    parser.add_argument("--max-parallel", type=int, default=8, help="the engine's sequence ids")
    parser.add_argument("--growth", type=int, default=220, help="prompt tokens a step adds")
    parser.add_argument("--completion", type=int, default=64, help="tokens generated per step")
    parser.add_argument("--reserve", type=int, default=256, help="cells reserved per step (max_tokens)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    lines = args.records.read_text().splitlines()
    records = [r for r in map(json.loads, lines) if r.get("category") == "multi_turn_base" and r.get("turns")]
    classes = {e.id: sorted(e.involved_classes or []) for e in load_entries("multi_turn_base", "test", None)}
    records = [{**r, "classes": classes.get(r["id"])} for r in records]
    rows = []
    for workers in args.workers:
        for kv_cells in args.kv_cells:
            runs = [replay(records, kv_cells, workers, args.max_parallel, args.growth, args.completion, args.reserve, s)
                    for s in range(args.repeats if workers > 1 else 1)]  # fmt: skip
            rows.append({"kv_cells": kv_cells, "workers": workers, "prompt_tokens": runs[0]["prompt_tokens"],
                         "share_prefilled": [r["share_prefilled"] for r in runs]})  # fmt: skip
            print(json.dumps(rows[-1]))
    out = {"records": str(args.records.relative_to(ROOT)) if args.records.is_relative_to(ROOT) else str(args.records),
           "dialogues": len(records), "settings": {k: v for k, v in vars(args).items() if k not in ("records", "out")},
           "rows": rows, "command": "python bench/cache_replay.py"}  # fmt: skip
    atomic_write_json(args.out, out)
    return out


if __name__ == "__main__":
    main()
