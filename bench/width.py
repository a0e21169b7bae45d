"""Width activation on the real default model: accuracy and cost of greedy, N = 1, 4, 8, 16 with a
majority vote, and N = 8 with the critic, on a small arithmetic tool environment.

A question is answered correctly when the step's chosen calls, executed, give the right number
(or, for the questions that need no tool, when no call is made). Writes bench/results/width.json
and bench/results/width.png.

    .venv/bin/python bench/width.py [--questions 30]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path


from kate.envs import PythonFunctionsEnv  # noqa: E402
from kate.eval.report import plot_accuracy_vs_n  # noqa: E402
from kate.io import atomic_write_json  # noqa: E402
from kate.llm.registry import DEFAULT_AGENT_MODEL  # noqa: E402
from kate.sampling.policy import GreedySampler, WidthSampler  # noqa: E402


def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def subtract(a: float, b: float) -> float:
    """Subtract b from a."""
    return a - b


def multiply(a: float, b: float) -> float:
    """Multiply two numbers."""
    return a * b


def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


OPS = {"add": ("plus", add), "subtract": ("minus", subtract), "multiply": ("times", multiply), "divide": ("divided by", divide)}
CHAT = ["Hi there, how are you today?", "Who wrote Pride and Prejudice?", "Say thanks in French.",
        "What colour is the sky on a clear day?"]  # fmt: skip


def questions(count: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        if i % 6 == 5:
            out.append({"text": CHAT[(i // 6) % len(CHAT)], "answer": None})
            continue
        name = list(OPS)[i % 4]
        a, b = rng.randint(12, 999), rng.randint(2, 99)
        word, fn = OPS[name]
        style = i % 3
        text = [f"What is {a} {word} {b}?", f"Please compute {a} {word} {b} for me.", f"I need {a} {word} {b}, exactly."][style]
        out.append({"text": text, "answer": fn(a, b)})
    return out


def correct(env: PythonFunctionsEnv, calls, answer) -> bool:
    if answer is None:
        return not calls
    if len(calls) != 1:
        return False
    observation = env.execute(calls[0])
    try:
        return observation.ok and abs(float(observation.content) - answer) < 1e-6 * max(1.0, abs(answer))
    except ValueError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=30)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "width.json"))
    args = parser.parse_args()
    from kate.llm.llamacpp import LlamaCppChatModel

    model = LlamaCppChatModel(DEFAULT_AGENT_MODEL, n_ctx=8192, max_parallel=16)
    env = PythonFunctionsEnv([add, subtract, multiply, divide])
    tools = env.tools()
    items = questions(args.questions)
    arms = {
        "greedy": GreedySampler(max_tokens=96),
        "N=1": WidthSampler(n=1, aggregate="majority", max_tokens=96),
        "N=4": WidthSampler(n=4, aggregate="majority", max_tokens=96),
        "N=8": WidthSampler(n=8, aggregate="majority", max_tokens=96),
        "N=16": WidthSampler(n=16, aggregate="majority", max_tokens=96),
        "N=8 critic": WidthSampler(n=8, aggregate="critic", max_tokens=96),
    }
    model.chat([{"role": "user", "content": "warm up"}], tools, max_tokens=4)
    results = {}
    for name, sampler in arms.items():
        right, seconds, margins = 0, 0.0, []
        for k, item in enumerate(items):
            start = time.perf_counter()
            step = sampler.act(model, [{"role": "user", "content": item["text"]}], tools, seed=k)
            seconds += time.perf_counter() - start
            right += correct(env, step.calls, item["answer"])
            if step.vote is not None:
                margins.append(step.vote.margin)
        results[name] = {
            "accuracy": right / len(items),
            "correct": right,
            "n": len(items),
            "seconds_per_step": seconds / len(items),
            "mean_vote_margin": sum(margins) / len(margins) if margins else None,
        }
        print(name, json.dumps(results[name]), flush=True)
    ratio = results["N=8"]["seconds_per_step"] / results["N=1"]["seconds_per_step"]
    summary = {
        "model": DEFAULT_AGENT_MODEL,
        "engine": "llamacpp (kate batched n-sampling, shared prefill)",
        "task": "one step of arithmetic tool use (4 tools) plus questions that need no tool",
        "temperature": 1.0,
        "results": results,
        "cost_ratio_n8_over_n1": round(ratio, 3),
        "cost_ratio_target": 1.5,
        "note": "the ratio here includes parsing, voting and the short prompts of this task; "
        "bench/results/backends.json has the engine-only figure at an 800-token prompt",
    }
    atomic_write_json(args.out, summary)
    ns = {1: "N=1", 4: "N=4", 8: "N=8", 16: "N=16"}
    plot_accuracy_vs_n({n: results[k]["accuracy"] for n, k in ns.items()},
                       {n: results[k]["seconds_per_step"] for n, k in ns.items()},
                       Path(args.out).with_suffix(".png"), title=f"width activation, {DEFAULT_AGENT_MODEL}")  # fmt: skip
    print(f"wrote {args.out}; N=8/N=1 cost ratio {ratio:.2f}")


if __name__ == "__main__":
    main()
