"""Faults survived: `kate eval llm=openai` through the fault proxy (kate/testing/fault_proxy.py) against
llama-cpp-python's server, undisturbed and with every fault kind injected at a fixed rate; writes
bench/results/faults.json.

* The upstream is llama-cpp-python's OpenAI-compatible server (``start_llamacpp_server``) on
  127.0.0.1, serving the default 0.5B model; greedy sampling, one seed, the direct arm.
* The entries: ``--limit`` single-turn entries of each ``--single`` category and ``--multi``
  multi_turn_base dialogues (a second `kate eval` call into the same folder, since `kate eval`
  takes one limit for all its categories; the same arm, so the folder extends).
* Both runs go through a proxy on 127.0.0.1: the undisturbed one with no faults (every byte passes
  through; the proxy measures the slowest upstream answer), the faulted one with every ``--every``-th
  chat request faulted, the six kinds in turn (HTTP 500, 503, a stall longer than the client's
  timeout, a connection dropped before the answer or in the middle of the body, a body shorter than
  its Content-Length): a fixed rate, and the same schedule on every machine.
* The client's timeout must outlast every genuine answer, since a stall only shows as one when the
  timeout fires: unless ``--timeout`` is given it is three times the undisturbed run's slowest answer
  (at least 60 s), and ``clients_gone`` counts genuine answers that came after their client had left.
* The server runs with its own settings (``--variants default``). A fault that reaches it (mid-body
  drop, truncation) is answered and asked again, and the retry finds its prompt in llama-cpp-python's
  KV cache, so the server evaluates it in another batch shape than the undisturbed run did and a
  greedy near-tie can flip (``note`` in the JSON; ``differing`` says where, if anywhere).
  ``--variants default,batch1`` adds a run with ``n_batch=1`` (single-turn entries only; one token
  per batch makes the numerics independent of the cache), slow here: a ~200-token prompt is 200
  decode steps of the 0.5B model. tests/test_fault_proxy.py pins it for the 135M model.
* `kate eval` runs in process (its plain function, as tests do), each run in a fresh folder.
* Accounting from each ``records.jsonl``: records expected (entries), present (distinct ids),
  duplicated (lines beyond one per id), failed (upstream failures, ``kate:upstream_error``), and
  whether every record (all but its wall time) and the per-category scores equal the undisturbed run's.
* The machine's 1-minute load average is sampled every 5 s during each run (2 cores, shared).

    .venv/bin/python bench/faults.py                                    # the committed run
    .venv/bin/python bench/faults.py --limit 1 --multi 0 --out /tmp/faults.json   # a quick trial
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
from contextlib import contextmanager
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from kate.eval.model_folders import DEFAULT_MODEL  # noqa: E402
from kate.io import atomic_write_json  # noqa: E402

DEFAULT_SINGLE = ("simple_python", "multiple", "irrelevance")
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


def segments(args: argparse.Namespace) -> list[tuple[list[str], int]]:
    """(categories, limit) of each `kate eval` call into one folder: `kate eval` takes one limit
    for all its categories, so the dialogues are a second call (same arm, so the folder extends)."""
    return [(args.single, args.limit)] + ([(["multi_turn_base"], args.multi)] if args.multi else [])


def eval_config(base_url: str, model: str, args: argparse.Namespace, timeout: float, out_dir: Path,
                categories: list[str], limit: int):  # fmt: skip
    from kate.cli import CONF_DIR  # (importing it registers the typed job schemas)
    from kate.eval.arms import compose_eval

    overrides = ["llm=openai", f"llm.model={model}", f"llm.base_url={base_url}", f"llm.timeout={timeout}",
                 f"llm.max_retries={args.max_retries}", f"llm.backoff={args.backoff}", f"max_steps={args.max_steps}",
                 f"sampling.max_tokens={args.max_tokens}", f"categories=[{','.join(categories)}]", f"limit={limit}",
                 f"out_dir={out_dir}", "name=faults"]  # fmt: skip
    return compose_eval(overrides, conf_dir=CONF_DIR)


def expected_ids(args: argparse.Namespace) -> list[str]:
    from kate.bfcl.data import load_entries

    return [e.id for categories, limit in segments(args) for c in categories for e in load_entries(c, "test", limit)]


def account(folder: Path, expected: list[str]) -> dict:
    """Records expected, present, duplicated, failed (and missing, unexpected ids), from the file itself."""
    records = [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]
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


def one_run(label: str, proxy, schedule, model: str, args: argparse.Namespace, timeout: float, out_dir: Path,
            expected: list[str]) -> dict:  # fmt: skip
    from kate.eval.report import summarize
    from kate.eval.run_eval import run_eval
    from kate.eval.run_store import load_run

    proxy.schedule = schedule
    before = proxy.stats()
    log(f"{label} run: {len(expected)} entries, client timeout {timeout:.0f} s")
    start = time.perf_counter()
    with LoadSampler() as load:
        for categories, limit in segments(args):
            run_eval(eval_config(proxy.base_url, model, args, timeout, out_dir, categories, limit))
    seconds = time.perf_counter() - start
    after = proxy.stats()
    counts = {k: after[k] - before[k] for k in ("requests", "forwarded", "upstream_errors", "clients_gone")}
    faults = {k: after["faults"][k] - before["faults"][k] for k in after["faults"]}
    log(f"{label} run: {seconds:.0f} s, {counts}, faults {faults}")
    return {"seconds": round(seconds, 1), "load_average_1m": load.summary(), "proxy": counts,
            "faults_injected": faults, "faults_total": sum(faults.values()),
            "slowest_upstream_s": after["slowest_upstream_s"], "records": account(out_dir / "seed_0", expected),
            "per_category": summarize(load_run(out_dir / "seed_0")[1])}  # fmt: skip


def differences(a: object, b: object, path: str = "") -> list[dict]:
    """Where two records differ: each differing leaf's path and both values (cut to 200 characters)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in differences(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    if a == b:
        return []
    return [{"path": path, "undisturbed": json.dumps(a)[:200], "faulted": json.dumps(b)[:200]}]


@contextmanager
def engine_batch(n_batch: int | None):
    """The server's prompt batch (llama-cpp-python reads N_BATCH/N_UBATCH from its environment)."""
    saved = {k: os.environ.get(k) for k in ("N_BATCH", "N_UBATCH")}
    if n_batch is not None:
        os.environ.update(N_BATCH=str(n_batch), N_UBATCH=str(n_batch))
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def variant(name: str, n_batch: int | None, args: argparse.Namespace, work: Path) -> dict:
    """One engine setting: the undisturbed run, then the faulted one, on one server, compared."""
    from kate.llm.local_server import start_llamacpp_server
    from kate.testing import FaultProxy, every, no_faults

    expected = expected_ids(args)
    log(f"variant {name}: {len(expected)} entries")
    with engine_batch(n_batch):
        server = start_llamacpp_server(args.model, n_ctx=args.n_ctx)
    with server, FaultProxy(server.base_url) as proxy:
        plain_timeout = args.timeout or 900.0
        plain = one_run("undisturbed", proxy, no_faults, server.model, args, plain_timeout, work / "plain", expected)
        timeout = args.timeout or max(60.0, float(round(3 * plain["slowest_upstream_s"])))
        proxy.stall_seconds = timeout + 10
        faulted = one_run("faulted", proxy, every(args.every), server.model, args, timeout, work / "faulted", expected)
    a, b = comparable(work / "plain" / "seed_0"), comparable(work / "faulted" / "seed_0")
    differing = sorted(i for i in set(a) | set(b) if a.get(i) != b.get(i))
    return {
        "engine_n_batch": n_batch or "default (512)",
        "entries": {"segments": [{"categories": c, "limit": k} for c, k in segments(args)], "ids": expected},
        "client_timeout_s": timeout, "undisturbed_client_timeout_s": plain_timeout, "stall_s": timeout + 10,
        "undisturbed": plain,
        "faulted": faulted,
        "all_kinds_injected": all(faulted["faults_injected"].values()),
        "records_equal": not differing,
        "scores_equal": plain["per_category"] == faulted["per_category"],
        "differing": {i: differences(a.get(i), b.get(i)) for i in differing},
    }  # fmt: skip


NOTE = ("A drop_mid_body or truncate fault reaches the server, which answers, and kate asks again: the retry "
        "finds the whole prompt in llama-cpp-python's KV cache (it keeps the last request's tokens) and "
        "re-evaluates one token, where the undisturbed run evaluated the prompt's new tokens as one batch; with "
        "the default 512-token batch the two logits can differ in the last bits and flip a greedy near-tie. "
        "With n_batch=1 every token is evaluated alone whatever the cache holds, so the numerics do not depend on "
        "it and a retried request gets the same answer: that variant separates kate's accounting from the engine.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--single", type=lambda s: s.split(","), default=list(DEFAULT_SINGLE), help="single-turn categories")
    parser.add_argument("--limit", type=int, default=3, help="entries per single-turn category (KATE's test split)")
    parser.add_argument("--multi", type=int, default=1, help="multi_turn_base dialogues (engine-default variant)")
    parser.add_argument("--max-steps", type=int, default=1, help="steps per user turn (bounds a dialogue's requests)")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--every", type=int, default=3, help="every k-th chat request faulted, the kinds in turn")
    parser.add_argument("--timeout", type=float, default=None, help="the client's timeout (default: 3x slowest answer)")
    parser.add_argument("--max-retries", type=int, default=5)
    parser.add_argument("--backoff", type=float, default=0.2)
    parser.add_argument("--n-ctx", type=int, default=16384)
    parser.add_argument("--variants", default="default",
                        help="default: the server's own prompt batch, all entries; batch1: n_batch=1, single-turn "
                             "entries only (a one-token-at-a-time prefill of a dialogue's prompt is too slow here)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "faults.json")
    args = parser.parse_args()

    from kate.testing import FAULT_KINDS

    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="kate-faults-"))
    chosen = args.variants.split(",")
    variants = {}
    if "default" in chosen:
        variants["engine_default"] = variant("engine default", None, args, work / "default")
    if "batch1" in chosen:
        variants["n_batch_1"] = variant("n_batch=1", 1, argparse.Namespace(**{**vars(args), "multi": 0}), work / "batch1")
    result = {
        "what": "kate eval llm=openai through a loopback fault proxy, undisturbed vs every fault kind, "
                "llama-cpp-python's server",
        "command": shlex.join([".venv/bin/python", "bench/faults.py", *sys.argv[1:]]),
        "started": started,
        "model": args.model,
        "settings": {"schedule": f"every {args.every}th chat request, the kinds in turn", "fault_kinds": list(FAULT_KINDS),
                     "max_retries": args.max_retries, "backoff_s": args.backoff, "max_steps": args.max_steps,
                     "max_tokens": args.max_tokens, "n_ctx": args.n_ctx, "sampling": "greedy", "arm": "direct",
                     "workers": 1},  # fmt: skip
        "variants": variants,
        "note": NOTE,
        "machine": {"cpu_count": os.cpu_count(), "load_average_before": [round(x, 2) for x in load_before],
                    "load_average_after": [round(x, 2) for x in os.getloadavg()], "python": platform.python_version(),
                    "llama_cpp_python": metadata.version("llama_cpp_python"), "openai": metadata.version("openai"),
                    "note": "2 cores shared with other jobs: see each run's load_average_1m"},  # fmt: skip
    }
    atomic_write_json(args.out, result)
    for key, v in variants.items():
        log(f"{key}: records equal {v['records_equal']}, scores equal {v['scores_equal']}, "
            f"faults {v['faulted']['faults_injected']}, records {v['faulted']['records']}")
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
