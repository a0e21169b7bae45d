"""Faults survived: `kate eval llm=openai` through the fault proxy (tests/fault_proxy.py) against
llama-cpp-python's server, undisturbed and with every fault kind injected at a fixed rate; writes
bench/results/faults.json.

* The upstream is llama-cpp-python's OpenAI-compatible server (``start_llamacpp_server``) on
  127.0.0.1, serving the default 0.5B model; greedy sampling, one seed, the direct arm.
* Both runs go through a proxy on 127.0.0.1: the undisturbed one with no faults (the proxy then
  passes every byte through; it measures the slowest upstream answer), the faulted one with each
  chat request faulted with probability ``--rate``, its kind drawn uniformly from the six kinds
  (HTTP 500, 503, a stall longer than the client's timeout, a connection dropped before the answer
  or in the middle of the body, a body shorter than its Content-Length), seeded.
* The client's timeout must outlast every genuine answer, since a stall is only a stall once the
  timeout fires: unless ``--timeout`` is given it is three times the undisturbed run's slowest
  answer (at least 30 s), and ``clients_gone`` counts genuine answers that arrived too late.
* `kate eval` runs in process (its plain function, as tests do), each run in a fresh folder.
* Accounting from each ``records.jsonl``: records expected (entries), present (distinct ids),
  duplicated (lines beyond one per id), failed (upstream failures, ``kate:upstream_error``), and
  whether every record (all but its wall time) and the per-category scores equal the undisturbed run's.
* The machine's load average is sampled every 5 s during each run (2 cores shared with other work).

    .venv/bin/python bench/faults.py                                # the committed run
    .venv/bin/python bench/faults.py --limit 1 --out /tmp/faults.json   # a quick trial
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from kate.io import atomic_write_json  # noqa: E402

DEFAULT_MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
DEFAULT_CATEGORIES = ("simple_python", "multiple", "parallel", "irrelevance", "multi_turn_base")
UPSTREAM_ERROR = "kate:upstream_error"


def log(message: str) -> None:
    print(f"[faults {datetime.now().strftime('%H:%M:%S')}] {message}", flush=True)


class LoadSampler:
    """The 1-minute load average every ``every`` seconds while in a ``with`` block."""

    def __init__(self, every: float = 5.0) -> None:
        self.every, self.samples, self._stop = every, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(self.every)

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict:
        s = self.samples or [os.getloadavg()[0]]
        return {"mean": round(sum(s) / len(s), 2), "max": round(max(s), 2), "samples": len(s)}


def eval_config(base_url: str, model: str, out_dir: Path, args: argparse.Namespace, timeout: float):
    from hydra import compose, initialize_config_dir

    import kate.configs  # noqa: F401  (the typed job schemas)
    from kate.cli import CONF_DIR

    categories = {c: args.limit for c in args.categories}  # `kate eval` takes one limit for all categories
    overrides = ["llm=openai", f"llm.model={model}", f"llm.base_url={base_url}", f"llm.timeout={timeout}",
                 f"llm.max_retries={args.max_retries}", f"llm.backoff={args.backoff}", f"max_steps={args.max_steps}",
                 f"sampling.max_tokens={args.max_tokens}", f"categories=[{','.join(categories)}]",
                 f"limit={args.limit}", f"out_dir={out_dir}", "name=faults"]  # fmt: skip
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("eval", overrides=overrides), categories


def select(categories: dict[str, int]) -> list[str]:
    from kate.bfcl.data import load_entries

    return [e.id for c, k in categories.items() for e in load_entries(c, "test", k)]


def account(folder: Path, expected: list[str]) -> dict:
    """Records expected, present, duplicated, failed (and missing, unexpected ids), from the file itself."""
    lines = (folder / "records.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    ids = [r["id"] for r in records]
    return {
        "expected": len(expected),
        "present": len(set(ids) & set(expected)),
        "duplicated": len(ids) - len(set(ids)),
        "failed": sum(r.get("error_type") == UPSTREAM_ERROR for r in records),
        "missing": sorted(set(expected) - set(ids)),
        "unexpected": sorted(set(ids) - set(expected)),
    }


def comparable(folder: Path) -> dict[str, dict]:
    from kate.eval.run_store import load_run

    return {r["id"]: {k: v for k, v in r.items() if k != "seconds"} for r in load_run(folder)[1]}


def one_run(label: str, proxy, schedule, base_args, out_dir: Path, expected: list[str]) -> dict:
    from kate.eval.run_eval import run_eval

    cfg, _ = eval_config(proxy.base_url, *base_args, out_dir)
    proxy.schedule = schedule
    before = proxy.stats()
    log(f"{label} run: {len(expected)} entries")
    start = time.perf_counter()
    with LoadSampler() as load:
        summary = run_eval(cfg)
    seconds = time.perf_counter() - start
    after = proxy.stats()
    proxy_counts = {k: after[k] - before[k] for k in ("requests", "forwarded", "upstream_errors", "clients_gone")}
    faults = {k: after["faults"][k] - before["faults"][k] for k in after["faults"]}
    log(f"{label} run: {seconds:.0f} s, {proxy_counts}, faults {faults}")
    return {"seconds": round(seconds, 1), "load_average_1m": load.summary(), "proxy": proxy_counts,
            "faults_injected": faults, "faults_total": sum(faults.values()),
            "slowest_upstream_s": after["slowest_upstream_s"], "records": account(out_dir / "seed_0", expected),
            "per_category": summary["per_category"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--categories", type=lambda s: s.split(","), default=list(DEFAULT_CATEGORIES))
    parser.add_argument("--limit", type=int, default=2, help="entries per category (KATE's test split, index order)")
    parser.add_argument("--max-steps", type=int, default=3, help="steps per user turn (bounds a dialogue's requests)")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--rate", type=float, default=0.15, help="share of chat requests faulted")
    parser.add_argument("--seed", type=int, default=0, help="the fault schedule's seed")
    parser.add_argument("--timeout", type=float, default=None, help="the client's timeout (default: 3x slowest answer)")
    parser.add_argument("--max-retries", type=int, default=5)
    parser.add_argument("--backoff", type=float, default=0.2)
    parser.add_argument("--n-ctx", type=int, default=16384)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "faults.json")
    args = parser.parse_args()

    from kate.llm.local_server import start_llamacpp_server
    from tests.fault_proxy import FAULT_KINDS, FaultProxy, no_faults, seeded

    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="kate-faults-"))
    with start_llamacpp_server(args.model, n_ctx=args.n_ctx) as server, FaultProxy(server.base_url) as proxy:
        _, categories = eval_config(proxy.base_url, server.model, args, 120.0, work)
        expected = select(categories)
        plain_timeout = args.timeout or 600.0
        plain = one_run("undisturbed", proxy, no_faults, (server.model, args, plain_timeout), work / "plain", expected)
        timeout = args.timeout or max(30.0, round(3 * plain["slowest_upstream_s"]))
        proxy.stall_seconds = timeout + 10
        faulted = one_run("faulted", proxy, seeded(args.rate, args.seed), (server.model, args, timeout),
                          work / "faulted", expected)  # fmt: skip
    a, b = comparable(work / "plain" / "seed_0"), comparable(work / "faulted" / "seed_0")
    differing = sorted(i for i in set(a) | set(b) if a.get(i) != b.get(i))
    result = {
        "what": "kate eval llm=openai through a loopback fault proxy vs undisturbed, llama-cpp-python's server",
        "command": shlex.join([".venv/bin/python", "bench/faults.py", *sys.argv[1:]]),
        "started": started,
        "model": args.model,
        "entries": {"categories": categories, "ids": expected},
        "settings": {"rate": args.rate, "fault_seed": args.seed, "fault_kinds": list(FAULT_KINDS),
                     "client_timeout_s": timeout, "undisturbed_client_timeout_s": plain_timeout,
                     "stall_s": timeout + 10, "max_retries": args.max_retries, "backoff_s": args.backoff,
                     "max_steps": args.max_steps, "max_tokens": args.max_tokens, "n_ctx": args.n_ctx,
                     "sampling": "greedy", "arm": "direct", "workers": 1},  # fmt: skip
        "undisturbed": plain,
        "faulted": faulted,
        "records_equal": not differing,
        "differing_ids": differing,
        "scores_equal": plain["per_category"] == faulted["per_category"],
        "machine": {"cpu_count": os.cpu_count(), "load_average_before": [round(x, 2) for x in load_before],
                    "load_average_after": [round(x, 2) for x in os.getloadavg()], "python": platform.python_version(),
                    "llama_cpp_python": metadata.version("llama_cpp_python"), "openai": metadata.version("openai"),
                    "note": "2 cores shared with other jobs: see each run's load_average_1m"},  # fmt: skip
    }
    atomic_write_json(args.out, result)
    log(f"wrote {args.out}: records equal {result['records_equal']}, scores equal {result['scores_equal']}")


if __name__ == "__main__":
    main()
