"""Batching across concurrent requests in the llama.cpp backend: greedy throughput of the default
0.5B model with one client vs four clients at once, each issuing the same short tool-calling chats.

One-token decoding is memory-bound, so a decode batch holding four requests' tokens costs little
more than one; the server's goal is four clients >= 1.8x the requests/s of one. Also records
whether each concurrent greedy answer equals the same question's answer alone, the scheduler's
counters (the most requests seen in one decode batch) and the machine's load average, since other
processes share its cores. Writes bench/results/llamacpp_batching.json.

    .venv/bin/python bench/llamacpp_batching.py [--requests 8] [--max-tokens 64] [--n-threads-step 0 2]
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from pathlib import Path


from kate.demo import DEMO_TOOLS  # noqa: E402
from kate.io import atomic_write_json  # noqa: E402
from kate.llm.llamacpp_batch import SchedulerStats  # noqa: E402
from kate.llm.registry import DEFAULT_AGENT_MODEL  # noqa: E402

CITIES = ["Paris", "Lima", "Oslo", "Cairo", "Hanoi", "Quito", "Perth", "Dakar", "Bergen", "Osaka"]


def questions(count: int) -> list[str]:
    """Short questions that want one call of a demo tool (weather or calculator), alternating."""
    out = []
    for i in range(count):
        if i % 2 == 0:
            out.append(f"What's the weather like in {CITIES[i % len(CITIES)]} right now?")
        else:
            out.append(f"What is {37 + 11 * i} * {13 + 7 * i}?")
    return out


def client(model, asks: list[str], max_tokens: int, answers: dict[str, str], tokens: list[int]) -> None:
    """One client: its questions one after another, as an agent loop would."""
    for ask in asks:
        [c] = model.chat([{"role": "user", "content": ask}], DEMO_TOOLS, max_tokens=max_tokens)
        answers[ask] = c.text
        tokens.append(c.usage.completion_tokens)


def arm(model, clients: int, asks: list[str], max_tokens: int) -> tuple[dict, list[dict[str, str]]]:
    """``clients`` threads at once, client k asking ``asks`` rotated by k; throughput and answers."""
    model.scheduler.stats = SchedulerStats()
    answers: list[dict[str, str]] = [{} for _ in range(clients)]
    tokens: list[list[int]] = [[] for _ in range(clients)]
    threads = [
        threading.Thread(target=client, args=(model, asks[k:] + asks[:k], max_tokens, answers[k], tokens[k]))
        for k in range(clients)
    ]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    requests, completion = sum(map(len, tokens)), sum(map(sum, tokens))
    stats = model.scheduler.stats
    return {
        "clients": clients, "requests": requests, "completion_tokens": completion, "seconds": seconds,
        "requests_per_s": requests / seconds, "completion_tokens_per_s": completion / seconds,
        "max_requests_per_step": stats.max_requests_per_step, "decode_steps": stats.steps,
        "prefill_tokens": stats.prefill_tokens,
    }, answers  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=8, help="requests per client")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--n-threads-step", type=int, nargs="+", default=[0],
                        help="decode-step threads, a run each; 0: the default")  # fmt: skip
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "llamacpp_batching.json"))
    args = parser.parse_args()
    from kate.llm.llamacpp import LlamaCppChatModel

    asks = questions(args.requests)
    runs = []
    for threads_step in args.n_threads_step:
        threads = threads_step or None
        model = LlamaCppChatModel(DEFAULT_AGENT_MODEL, n_ctx=8192, max_parallel=8, n_threads_step=threads)
        model.chat([{"role": "user", "content": "warm up"}], DEMO_TOOLS, max_tokens=4)
        load_before = os.getloadavg()
        one, [solo] = arm(model, 1, asks, args.max_tokens)
        print(json.dumps(one), flush=True)
        four, answers = arm(model, 4, asks, args.max_tokens)
        print(json.dumps(four), flush=True)
        same = sum(a[q] == solo[q] for a in answers for q in a)
        runs.append({
            "runtime": model.runtime(),
            "load_average_before": load_before, "load_average_after": os.getloadavg(),
            "one_client": one, "four_clients": four,
            "requests_per_s_ratio": four["requests_per_s"] / one["requests_per_s"],
            "completion_tokens_per_s_ratio": four["completion_tokens_per_s"] / one["completion_tokens_per_s"],
            "greedy_equal_to_solo": same, "greedy_compared": sum(map(len, answers)),
        })  # fmt: skip
        print(f"n_threads_step={model.runtime()['n_threads_step']}: ratio {runs[-1]['requests_per_s_ratio']:.2f}x, "
              f"{same}/{runs[-1]['greedy_compared']} equal to solo", flush=True)  # fmt: skip
        model.close()
    result = {
        "model": DEFAULT_AGENT_MODEL, "requests_per_client": args.requests, "max_tokens": args.max_tokens,
        "temperature": 0.0, "tools": [t["function"]["name"] for t in DEMO_TOOLS], "goal_ratio": 1.8, "runs": runs,
    }  # fmt: skip
    atomic_write_json(Path(args.out), result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
