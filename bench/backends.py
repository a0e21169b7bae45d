"""Benchmark the model backends on the default 0.5B model; writes bench/results/backends.json.

Per engine:
* decode tokens/s: one short prompt, n=1, 64 new tokens with EOS ignored, wall time of the call;
* the wall-time ratio n=8 / n=1 for one prompt of about 800 tokens with 64 new tokens per sample
  (EOS ignored), the same prompt and settings for every engine. Each call starts with a fresh
  random nonce, so no engine reuses a cached prefix from an earlier call: the ratio includes the
  prefill, as a new agent step would.

    .venv/bin/python bench/backends.py                       # every engine available
    .venv/bin/python bench/backends.py --engines llamacpp    # just one
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from kate.io import atomic_write_json  # noqa: E402
from kate.llm.registry import DEFAULT_AGENT_MODEL  # noqa: E402

NEW_TOKENS = 64
TARGET_RATIO = 1.5
FILLER = (
    "The inventory service keeps one record per warehouse item: its SKU, its shelf, the count on hand, the "
    "reorder threshold, and the supplier that restocks it. Each night a job compares counts with thresholds. "
)


def long_prompt(nonce: str) -> list[dict]:
    """About 800 tokens: a long system context, then a question that invites a long answer."""
    system = f"Session {nonce}. You are a careful assistant for a warehouse team.\n" + FILLER * 22
    question = "Write a detailed, step-by-step operating procedure for the nightly restocking job."
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def short_prompt(nonce: str) -> list[dict]:
    return [{"role": "user", "content": f"[{nonce}] Write a long story about a lighthouse keeper."}]


def _nonce() -> str:
    return uuid.uuid4().hex[:8]


def _timed(chat, messages, n: int) -> tuple[float, list]:
    start = time.perf_counter()
    out = chat(messages, n)
    return time.perf_counter() - start, out


def measure(name: str, chat, repeats: int) -> dict:
    """``chat(messages, n) -> completions`` with 64 new tokens, EOS ignored, temperature 1."""
    chat(short_prompt(_nonce()), 1)  # warm-up
    decode = []
    for _ in range(repeats):
        wall, [c] = _timed(chat, short_prompt(_nonce()), 1)
        decode.append(c.usage.completion_tokens / wall)
    n1, n8, prompt_tokens, tokens8 = [], [], 0, []
    for _ in range(repeats):
        wall, [c] = _timed(chat, long_prompt(_nonce()), 1)
        n1.append(wall)
        prompt_tokens = c.usage.prompt_tokens
        wall, out = _timed(chat, long_prompt(_nonce()), 8)
        n8.append(wall)
        tokens8 = [o.usage.completion_tokens for o in out]
    result = {
        "engine": name,
        "decode_tokens_per_s": round(statistics.median(decode), 2),
        "ratio_prompt_tokens": prompt_tokens,
        "ratio_new_tokens_per_sample": NEW_TOKENS,
        "completion_tokens_n8": tokens8,
        "wall_s_n1": round(statistics.median(n1), 3),
        "wall_s_n8": round(statistics.median(n8), 3),
    }
    result["ratio_n8_over_n1"] = round(result["wall_s_n8"] / result["wall_s_n1"], 3)
    print(json.dumps(result), flush=True)
    return result


def engine_llamacpp():
    from kate.llm.llamacpp import LlamaCppChatModel

    model = LlamaCppChatModel(DEFAULT_AGENT_MODEL, n_ctx=4096, max_parallel=8)
    return lambda m, n: model.chat(m, n=n, temperature=1.0, max_tokens=NEW_TOKENS, seed=0, ignore_eos=True), model.close


def engine_hf():
    from kate.llm.hf import HFChatModel

    model = HFChatModel(DEFAULT_AGENT_MODEL, device="cpu")
    return lambda m, n: model.chat(m, n=n, temperature=1.0, max_tokens=NEW_TOKENS, seed=0, ignore_eos=True), None


def _openai_engine(server):
    from kate.llm.openai import OpenAIChatModel

    client = OpenAIChatModel(server.model, base_url=server.base_url, max_concurrency=8,
                             extra_body={"min_tokens": NEW_TOKENS, "ignore_eos": True})  # fmt: skip
    return lambda m, n: client.chat(m, n=n, temperature=1.0, max_tokens=NEW_TOKENS, seed=0), server.stop


def engine_llamacpp_server():
    from kate.llm.local_server import start_llamacpp_server

    return _openai_engine(start_llamacpp_server(DEFAULT_AGENT_MODEL, n_ctx=4096))


def engine_vllm():
    from kate.llm.vllm_server import start_vllm_server, vllm_python

    if vllm_python() is None:
        return None
    return _openai_engine(start_vllm_server(DEFAULT_AGENT_MODEL))


ENGINES = {
    "llamacpp": engine_llamacpp,
    "openai+llama.cpp-server": engine_llamacpp_server,
    "openai+vllm-cpu": engine_vllm,
    "hf": engine_hf,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "backends.json"))
    args = parser.parse_args()
    results, skipped = [], {}
    for name in args.engines.split(","):
        try:
            made = ENGINES[name]()
        except ImportError as error:
            made, skipped[name] = None, f"not installed: {error}"
        if made is None:
            skipped.setdefault(name, "not installed")
            continue
        chat, close = made
        try:
            results.append(measure(name, chat, args.repeats))
        finally:
            if close:
                close()
    by_name = {r["engine"]: r for r in results}
    summary = {}
    if "llamacpp" in by_name:
        ratio = by_name["llamacpp"]["ratio_n8_over_n1"]
        summary["llamacpp_ratio_target"] = TARGET_RATIO
        summary["llamacpp_meets_target"] = ratio <= TARGET_RATIO
        if "openai+vllm-cpu" in by_name:
            summary["llamacpp_ratio_minus_vllm_ratio"] = round(ratio - by_name["openai+vllm-cpu"]["ratio_n8_over_n1"], 3)
    atomic_write_json(
        args.out,
        {
            "model": DEFAULT_AGENT_MODEL,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine()},
            "method": __doc__.strip().splitlines()[2:9],
            "results": results,
            "skipped": skipped,
            "summary": summary,
        },
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
