"""How the 0.5B model's step after a correct call depends on how the result is shown (train half only).
For each own-tools train question whose recorded first step (bench/runs/own_tools/direct) was a call,
the step after its result is generated under each variant (greedy, 60-80 tokens):
tool | tool_named | user | notools | notools_named (presentations) and pre1 | pre2 | pre3 (prefills).

    .venv/bin/python bench/turn_end_presentations.py pre1,pre2,pre3   # -> bench/results/turn_end_step1_<variants>.json

What ran: the five presentations on the first 7 questions (stopped there: no plain answer in any of
the 35; bench/results/turn_end_presentations.jsonl, one line per step); the three prefills on all 24
such questions (bench/results/turn_end_prefills.json: a plain-text reply in 24 of 24 for each).
"""
import json, sys, time
from pathlib import Path
ROOT = Path(__file__).resolve().parents[1]
from kate.io import atomic_write_json
from kate.llm.llamacpp import LlamaCppChatModel
from kate.tasks.own_tools import OwnToolsTask, answer_holds
from kate.envs.python_functions import PythonFunctionsEnv
from kate.tasks.own_tools_data import TOOLS
from kate.toolcall import ToolCall, to_openai_tool_calls
from kate.agent.settings import AGENT_SYSTEM_PROMPT
import kate.tasks.own_tools as ot

recs = {json.loads(l)['id']: json.loads(l) for l in open(ROOT / 'bench/runs/own_tools/direct/seed_0/records.jsonl')}
task = OwnToolsTask(split="train")
items = [i for i in task.items() if i.calls]
model = LlamaCppChatModel(model="qwen2.5-coder-0.5b-instruct-q4_k_m", n_ctx=4096)
variants = sys.argv[1].split(',')

def fmt_call(c):
    return f"{c['name']}(" + ", ".join(f"{k}={v!r}" for k, v in c['arguments'].items()) + ")"

out = []
for it in items:
    r = recs[it.id]
    s0 = r['steps'][0]
    if not s0['calls']:
        continue
    env = PythonFunctionsEnv([TOOLS[t] for t in it.tools]) if hasattr(PythonFunctionsEnv, '__init__') else None
    tools = env.tools()
    call = s0['calls'][0]; obs = s0['observations'][0]['content']
    base = [{"role": "system", "content": AGENT_SYSTEM_PROMPT}, {"role": "user", "content": it.question}]
    tc = to_openai_tool_calls((ToolCall(call['name'], call['arguments'], call_id='call_0'),))
    asst = {"role": "assistant", "content": "", "tool_calls": tc}
    for v in variants:
        t0 = time.time()
        use_tools = tools
        if v == 'tool':
            h = base + [asst, {"role": "tool", "tool_call_id": "call_0", "name": call['name'], "content": obs}]
        elif v == 'tool_named':
            h = base + [asst, {"role": "tool", "tool_call_id": "call_0", "name": call['name'],
                 "content": f"{fmt_call(call)} returned: {obs}\nIf this answers the request, reply to the user in plain text now."}]
        elif v == 'user':
            h = base + [asst, {"role": "user", "content": f"{fmt_call(call)} returned: {obs}\nUsing this result, answer my question in plain text: {it.question}"}]
        elif v == 'notools':
            h = base + [asst, {"role": "tool", "tool_call_id": "call_0", "name": call['name'], "content": obs}]
            use_tools = None
        elif v == 'notools_named':
            h = base + [asst, {"role": "tool", "tool_call_id": "call_0", "name": call['name'],
                 "content": f"{fmt_call(call)} returned: {obs}"}]
            use_tools = None
        pre = None
        if v.startswith('pre'):
            h = base + [asst, {"role": "tool", "tool_call_id": "call_0", "name": call['name'], "content": obs}]
            pre = {'pre1': "Based on the result, ", 'pre2': "The answer is", 'pre3': "According to " + call['name'] + ", "}[v]
        c = model.chat(h, use_tools, n=1, temperature=0.0, max_tokens=60, prefill=pre)[0]
        ok = (not c.tool_calls) and '{' not in c.text and answer_holds(it.answer, c.text)
        out.append(dict(id=it.id, v=v, call_ok=call == r['calls'][0] if r['calls'] else None, calls=len(c.tool_calls), ok=ok, text=c.text[:150], s=round(time.time()-t0,1)))
        print(json.dumps(out[-1]), flush=True)
atomic_write_json(ROOT / 'bench' / 'results' / f'turn_end_step1_{sys.argv[1]}.json', out)
from collections import Counter
for v in variants:
    rows=[o for o in out if o['v']==v]
    print(v, len(rows), 'answered', sum(o['calls']==0 for o in rows), 'ok', sum(o['ok'] for o in rows))
