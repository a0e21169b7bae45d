"""Where an entry's time goes: per category of a run folder, the prompt (prefill) and completion
(decode) tokens an entry costs, summed over its steps, and the seconds it took in flight; with
``--measure``, this machine's prefill and decode rates on the run's model, timed one request at a
time, and the floor they put under a whole run (prefill tokens / prefill rate + decode tokens /
decode rate, with nothing batched).

    .venv/bin/python bench/entry_cost.py                       # the full-n direct arm's records
    .venv/bin/python bench/entry_cost.py --measure             # and this machine's rates
    .venv/bin/python bench/entry_cost.py --run bench/runs/full/direct/seed_0 --out bench/results/full/entry_cost.json
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict
from pathlib import Path

from kate.eval.run_store import load_run
from kate.io import atomic_write_json

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "bench" / "runs" / "full" / "direct" / "seed_0"
OUT = ROOT / "bench" / "results" / "full" / "entry_cost.json"


def steps_of(record: dict) -> list[dict]:
    """A single-turn record is one step; a dialogue's steps are its turns' steps."""
    if "turns" in record:
        return [s for t in record["turns"] for s in t.get("steps", [])]
    return [record]


def per_category(records: list[dict]) -> dict[str, dict]:
    sums: dict[str, dict] = defaultdict(lambda: {"n": 0, "steps": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                                 "seconds": 0.0})  # fmt: skip
    for r in records:
        row = sums[r["category"]]
        row["n"] += 1
        row["seconds"] += float(r.get("seconds") or 0.0)
        for s in steps_of(r):
            usage = s.get("usage") or {}
            row["steps"] += 1
            row["prompt_tokens"] += int(usage.get("prompt_tokens") or 0)
            row["completion_tokens"] += int(usage.get("completion_tokens") or 0)
    out = {}
    for category, row in sorted(sums.items()):
        n = row["n"]
        out[category] = {"n": n, "steps_per_entry": round(row["steps"] / n, 2),
                         "prompt_tokens_per_entry": round(row["prompt_tokens"] / n, 1),
                         "completion_tokens_per_entry": round(row["completion_tokens"] / n, 1),
                         "prompt_tokens_per_step": round(row["prompt_tokens"] / max(row["steps"], 1), 1),
                         "seconds_in_flight_per_entry": round(row["seconds"] / n, 2),
                         "totals": row}  # fmt: skip
    return out


def measure_rates(model_name: str, repeats: int = 3) -> dict:
    """Prefill and decode tokens per second of one request at a time on this machine (median)."""
    from kate.llm.llamacpp import LlamaCppChatModel

    model = LlamaCppChatModel(model_name, n_ctx=4096)
    filler = " ".join(f"word{i}" for i in range(600))  # about 1,800 prompt tokens
    prefill, decode = [], []
    for i in range(repeats):
        messages = [{"role": "user", "content": f"{i} {filler}\nSay hello."}]
        start = time.perf_counter()
        out = model.chat(messages, max_tokens=1, seed=i)[0]
        prefill.append(out.usage.prompt_tokens / (time.perf_counter() - start))
        start = time.perf_counter()
        out = model.chat([{"role": "user", "content": f"{i} Count from one to one hundred in words."}],
                         max_tokens=64, ignore_eos=True, seed=i)[0]  # fmt: skip
        decode.append(out.usage.completion_tokens / (time.perf_counter() - start))
    return {"model": model_name, "repeats": repeats, "prefill_tokens_per_s": round(sorted(prefill)[repeats // 2], 1),
            "decode_tokens_per_s": round(sorted(decode)[repeats // 2], 1),
            "note": "decode timed with a short prompt, so its prefill is included; one request at a time",
            "load_average_before": list(os.getloadavg()), "cpu_count": os.cpu_count()}  # fmt: skip


def floor(categories: dict[str, dict], rates: dict) -> dict:
    prompt = sum(c["totals"]["prompt_tokens"] for c in categories.values())
    completion = sum(c["totals"]["completion_tokens"] for c in categories.values())
    seconds = prompt / rates["prefill_tokens_per_s"] + completion / rates["decode_tokens_per_s"]
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "prefill_seconds": round(prompt / rates["prefill_tokens_per_s"], 1),
            "decode_seconds": round(completion / rates["decode_tokens_per_s"], 1),
            "unbatched_seconds": round(seconds, 1)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, default=RUN, help="a run folder (meta.json, records.jsonl)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--measure", action="store_true", help="time this machine's prefill and decode rates")
    args = parser.parse_args()
    meta, records = load_run(args.run)
    categories = per_category(records)
    result = {"command": ".venv/bin/python bench/entry_cost.py" + (" --measure" if args.measure else ""),
              "run": str(args.run.relative_to(ROOT)), "records": len(records), "per_category": categories}
    if args.measure:
        name = (meta.get("config") or {}).get("llm", {}).get("model") or "qwen2.5-coder-0.5b-instruct-q4_k_m"
        result["rates"] = measure_rates(name)
        for part, names in {"single_turn": [c for c in categories if not c.startswith("multi_turn")],
                            "multi_turn": [c for c in categories if c.startswith("multi_turn")]}.items():
            if names:
                result[f"floor_{part}"] = floor({c: categories[c] for c in names}, result["rates"])
    atomic_write_json(args.out, result)
    for category, c in categories.items():
        print(f"{category:24s} n={c['n']:4d} prompt/entry={c['prompt_tokens_per_entry']:8.1f} "
              f"completion/entry={c['completion_tokens_per_entry']:6.1f} steps={c['steps_per_entry']}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
