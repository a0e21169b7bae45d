"""Server overhead and cross-request batching: ``bench/results/serve.json``.

The same policy (the local 0.5B engine, the shipped single-turn knowledge preset, greedy or width 8
with the schema-valid vote) answers the same chat requests two ways: through ``kate serve``'s app
over HTTP on 127.0.0.1 (uvicorn in this process, the real ``openai`` client) and by calling
``ChatService.complete`` in process. Each way runs with 1 and 4 concurrent clients; p50 / p99
latency and requests per second per setting, the server's overhead on p50 at 4 clients, and the
throughput of 4 clients over 1 (batching across requests: serialized requests give 1.0x).

    .venv/bin/python bench/serve.py                 # ~10 min on 2 cores
    .venv/bin/python bench/serve.py --requests 4    # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from kate.io import atomic_write_json  # noqa: E402
from kate.llm.registry import DEFAULT_AGENT_MODEL  # noqa: E402

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city.",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "convert_currency", "description": "Convert an amount of money.",
     "parameters": {"type": "object", "properties": {"amount": {"type": "number"}, "from_currency": {"type": "string"},
                    "to_currency": {"type": "string"}}, "required": ["amount", "from_currency", "to_currency"]}}},
]  # fmt: skip
QUESTIONS = [
    "What's the weather in Paris right now?", "How warm is it in Tokyo, in fahrenheit?",
    "Convert 250 US dollars to euros.", "Is it raining in London?", "How many yen is 40 euros?",
    "Weather in Cairo in celsius, please.", "Convert 1200 Swiss francs into British pounds.",
    "What is the weather like in Lima?", "How much is 75 Canadian dollars in US dollars?",
    "Tell me the current weather in Oslo.", "Convert 3 bitcoin to US dollars.", "What's it like outside in Rome?",
]  # fmt: skip


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def run_setting(call, clients: int, requests: int, offset: int) -> dict:
    latencies: list[float] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        start = time.perf_counter()
        call(QUESTIONS[(offset + i) % len(QUESTIONS)], seed=i)
        with lock:
            latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(one, range(requests)))
    wall = time.perf_counter() - start
    return {"clients": clients, "requests": requests, "wall_s": round(wall, 3),
            "requests_per_s": round(requests / wall, 4),
            "p50_s": round(statistics.median(latencies), 4), "p99_s": round(percentile(latencies, 0.99), 4)}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=8, help="requests per client count (x clients at 4)")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--out", default=str(REPO / "bench/results/serve.json"))
    args = parser.parse_args(argv)

    import openai

    from kate.llm.llamacpp import LlamaCppChatModel
    from kate.retrieval.config import RetrievalConfig
    from kate.serve.app import ServerSettings, create_app
    from kate.serve.knowledge import ServedKnowledge
    from kate.serve.process import ThreadedServer
    from kate.serve.request import read_request
    from kate.serve.service import ChatService, ServeSettings

    model = LlamaCppChatModel(DEFAULT_AGENT_MODEL, n_ctx=16384, max_parallel=32)
    # the shipped single-turn preset's filters (conf/retrieval/single_turn.yaml)
    knowledge = ServedKnowledge(RetrievalConfig(kb="bfcl_train", root=str(REPO / "knowledge_bases"), filter_tools=True,
                                                min_task_tools=2, include_no_call=False,
                                                template={"preset": "guarded_restated", "call_format": "json"}))  # fmt: skip
    knowledge.open_all()
    service = ChatService(lambda name: model, knowledge, ServeSettings(width=1, max_tokens=args.max_tokens))
    app = create_app(service, ServerSettings(model_names=(model.name,), max_concurrent=8, max_queue=64))
    results: dict = {"model": model.name, "engine": model.runtime(), "max_tokens": args.max_tokens,
                     "tools": [t["function"]["name"] for t in TOOLS], "settings": []}  # fmt: skip
    with ThreadedServer(app) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="-", max_retries=0, timeout=600)

        def body(question: str, seed: int, width: int) -> dict:
            return {"model": model.name, "messages": [{"role": "user", "content": question}], "tools": TOOLS,
                    "seed": seed, "kate": {"n": width}}  # fmt: skip

        def through_server(width: int):
            def call(question: str, seed: int) -> None:
                b = body(question, seed, width)
                client.chat.completions.create(**{k: v for k, v in b.items() if k != "kate"},
                                               extra_body={"kate": b["kate"]})  # fmt: skip
            return call

        def in_process(width: int):
            return lambda question, seed: service.complete(read_request(body(question, seed, width)))

        through_server(1)("warm up", 0)
        offset = 0
        for width in (1, 8):
            for clients in (1, 4):
                for way, make in (("in_process", in_process), ("server", through_server)):
                    n = args.requests * clients
                    load = os.getloadavg()[0]
                    row = {"way": way, "width": width, **run_setting(make(width), clients, n, offset),
                           "load_before": round(load, 2)}  # fmt: skip
                    offset += n
                    results["settings"].append(row)
                    print(json.dumps(row), flush=True)
    model.close()
    rows = {(r["way"], r["width"], r["clients"]): r for r in results["settings"]}
    summary = {}
    for width in (1, 8):
        inproc, served = rows[("in_process", width, 4)], rows[("server", width, 4)]
        summary[f"width_{width}"] = {
            "server_overhead_p50_at_4_clients": round(served["p50_s"] / inproc["p50_s"] - 1, 4),
            "throughput_4_over_1_server": round(served["requests_per_s"] / rows[("server", width, 1)]["requests_per_s"], 3),
            "throughput_4_over_1_in_process": round(inproc["requests_per_s"]
                                                    / rows[("in_process", width, 1)]["requests_per_s"], 3),
        }  # fmt: skip
    results["summary"] = summary
    results["targets"] = {"server_overhead_p50_at_4_clients": "<= 0.05", "greedy_throughput_4_over_1": ">= 1.8"}
    results["command"] = "python bench/serve.py " + " ".join(argv if argv is not None else sys.argv[1:])
    results["cpu_count"] = os.cpu_count()
    atomic_write_json(Path(args.out), results)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
