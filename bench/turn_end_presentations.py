"""How the 0.5B model's step after a correct call depends on how the result is shown (train half only).
For each own-tools train question whose recorded first step (bench/runs/own_tools/direct) was a call,
the step after its result is generated under each variant (greedy, 60 tokens):
tool | tool_named | user | notools | notools_named (presentations) and pre1 | pre2 | pre3 (prefills).

    .venv/bin/python bench/turn_end_presentations.py pre1,pre2,pre3   # -> bench/results/turn_end_step1_<variants>.json
    .venv/bin/python bench/turn_end_presentations.py tool,user --model <registry name or path>

What ran: the five presentations on the first 7 questions (stopped there: no plain answer in any of
the 35; bench/results/turn_end_presentations.jsonl, one line per step); the three prefills on all 24
such questions (bench/results/turn_end_prefills.json).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from kate.agent.settings import AGENT_SYSTEM_PROMPT
from kate.envs.python_functions import PythonFunctionsEnv
from kate.io import atomic_write_json
from kate.tasks.own_tools import OwnToolsTask, answer_holds
from kate.tasks.own_tools_data import TOOLS
from kate.toolcall import ToolCall, to_openai_tool_calls

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "bench" / "runs" / "own_tools" / "direct" / "seed_0" / "records.jsonl"
DEFAULT_MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
VARIANTS = ("tool", "tool_named", "user", "notools", "notools_named", "pre1", "pre2", "pre3")


def fmt_call(c: dict) -> str:
    return f"{c['name']}(" + ", ".join(f"{k}={v!r}" for k, v in c["arguments"].items()) + ")"


def presentation(v: str, base: list[dict], asst: dict, call: dict, obs: str, question: str, tools):
    """(messages, tools, prefill) of variant ``v`` for the step after the call's result ``obs``."""
    tool_msg = {"role": "tool", "tool_call_id": "call_0", "name": call["name"], "content": obs}
    if v == "tool":
        return base + [asst, tool_msg], tools, None
    if v == "tool_named":
        content = f"{fmt_call(call)} returned: {obs}\nIf this answers the request, reply to the user in plain text now."
        return base + [asst, {**tool_msg, "content": content}], tools, None
    if v == "user":
        content = f"{fmt_call(call)} returned: {obs}\nUsing this result, answer my question in plain text: {question}"
        return base + [asst, {"role": "user", "content": content}], tools, None
    if v == "notools":
        return base + [asst, tool_msg], None, None
    if v == "notools_named":
        return base + [asst, {**tool_msg, "content": f"{fmt_call(call)} returned: {obs}"}], None, None
    prefill = {"pre1": "Based on the result, ", "pre2": "The answer is", "pre3": "According to " + call["name"] + ", "}[v]
    return base + [asst, tool_msg], tools, prefill


def run(model, variants: list[str]) -> list[dict]:
    recs = {json.loads(line)["id"]: json.loads(line) for line in RECORDS.open()}
    items = [i for i in OwnToolsTask(split="train").items() if i.calls]
    out = []
    for it in items:
        r = recs[it.id]
        s0 = r["steps"][0]
        if not s0["calls"]:
            continue
        tools = PythonFunctionsEnv([TOOLS[t] for t in it.tools]).tools()
        call, obs = s0["calls"][0], s0["observations"][0]["content"]
        base = [{"role": "system", "content": AGENT_SYSTEM_PROMPT}, {"role": "user", "content": it.question}]
        tc = to_openai_tool_calls((ToolCall(call["name"], call["arguments"], call_id="call_0"),))
        asst = {"role": "assistant", "content": "", "tool_calls": tc}
        for v in variants:
            t0 = time.time()
            messages, use_tools, pre = presentation(v, base, asst, call, obs, it.question, tools)
            c = model.chat(messages, use_tools, n=1, temperature=0.0, max_tokens=60, prefill=pre)[0]
            ok = (not c.tool_calls) and "{" not in c.text and answer_holds(it.answer, c.text)
            out.append(dict(id=it.id, v=v, call_ok=call == r["calls"][0] if r["calls"] else None,
                            calls=len(c.tool_calls), ok=ok, text=c.text[:150], s=round(time.time() - t0, 1)))  # fmt: skip
            print(json.dumps(out[-1]), flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("variants", help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="registry name or GGUF path (default: %(default)s)")
    args = parser.parse_args(argv)
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    from kate.llm.llamacpp import LlamaCppChatModel  # the engine loads only for a run

    out = run(LlamaCppChatModel(model=args.model, n_ctx=4096), variants)
    atomic_write_json(ROOT / "bench" / "results" / f"turn_end_step1_{args.variants}.json", out)
    for v in variants:
        rows = [o for o in out if o["v"] == v]
        print(v, len(rows), "answered", sum(o["calls"] == 0 for o in rows), "ok", sum(o["ok"] for o in rows))


if __name__ == "__main__":
    main()
