"""What idle prefix caches cost the local engine: the default model's prefill and decode speed on a fresh
cache and with k other prompts' cells held idle in it (``kate.llm.llamacpp_batch`` keeps a finished
request's prompt for reuse). llama.cpp's attention reads the whole used range of the unified cache, so
every held cell slows every request, reused or not; the scheduler's ``idle_steps`` drops caches nobody
reuses. The model is loaded as ``conf/llm/llamacpp.yaml`` loads it (its ``kv_cells``, ``n_ctx``).

    .venv/bin/python bench/idle_cache.py --held 0,4,12     # bench/results/idle_cache.json

Run it with nothing else on the machine (each row is one timed prefill and one timed decode).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from hydra import compose, initialize_config_dir

from kate.cli import CONF_DIR
from kate.eval.config import instantiate, plain
from kate.io import atomic_write_json

OUT = Path(__file__).resolve().parent / "results" / "idle_cache.json"
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
LONG = 1500  # words in a prompt (1,662 tokens on the default model)
DECODE = 128  # tokens decoded for the decode figure


def long_prompt(i: int) -> list[dict]:
    text = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(LONG))
    return [{"role": "user", "content": f"Task {i}: {text} Summarize."}]


def one_row(llm_cfg, held: int) -> dict:
    model = instantiate(llm_cfg)
    try:
        model.scheduler.idle_steps = None  # keep what is held: the cost of holding it is the measurement
        for i in range(held):
            model.chat(long_prompt(100 + i), max_tokens=1, temperature=0.0)
        cells = sum(len(c) for c in model.scheduler._cached)
        start = time.perf_counter()
        prefill = model.chat(long_prompt(1), max_tokens=1, temperature=0.0)[0].usage
        prefill_s = time.perf_counter() - start
        start = time.perf_counter()
        ask = [{"role": "user", "content": "Count from 1 to 300, comma separated."}]
        decoded = model.chat(ask, max_tokens=DECODE, temperature=0.0, ignore_eos=True)[0].usage
        decode_s = time.perf_counter() - start
    finally:
        model.close()
    return {
        "held_prompts": held, "held_cells": cells, "prefill_tokens": prefill.prompt_tokens - prefill.cached_tokens,
        "prefill_s": round(prefill_s, 2), "prefill_tokens_per_s": round((prefill.prompt_tokens - prefill.cached_tokens)
                                                                       / prefill_s, 1),
        "decode_tokens": decoded.completion_tokens, "decode_s": round(decode_s, 2),
        "decode_tokens_per_s": round(decoded.completion_tokens / decode_s, 1),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held", default="0,4,12", help="idle prompts held, comma separated, one row each")
    args = parser.parse_args()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        llm_cfg = plain(compose("eval", overrides=["arm=direct"]).llm)
    rows = []
    for held in (int(k) for k in args.held.split(",")):
        rows.append(one_row(llm_cfg, held))
        print(rows[-1], flush=True)
    fresh = rows[0]
    for row in rows:
        row["prefill_slower_pct"] = round(100 * (row["prefill_s"] / fresh["prefill_s"] - 1), 1)
        row["decode_slower_pct"] = round(100 * (row["decode_s"] / fresh["decode_s"] - 1), 1)
    atomic_write_json(OUT, {
        "what": "prefill (a 1,662-token prompt) and decode (128 tokens, one request) on the default model with "
                "k other prompts' cells held idle in the unified cache; slower_pct against the first row",
        "command": f".venv/bin/python bench/idle_cache.py --held {args.held}", "cpu_count": os.cpu_count(),
        "llm": {k: llm_cfg[k] for k in ("model", "n_ctx", "kv_cells", "max_parallel")}, "rows": rows,
    })  # fmt: skip


if __name__ == "__main__":
    main()
