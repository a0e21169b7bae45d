"""Baseline on the OLD code: greedy arms direct/st and width st_w8v on a slice; records to /tmp/baseline/old/<arm>.jsonl"""
import json, sys
sys.path.insert(0, "/tmp/old"); sys.path.insert(0, "/tmp/old/bench")
import bfcl as B  # old bench/bfcl.py
from kate.bfcl.data import load_entries
from kate.eval.bfcl_runner import run_entry
from kate.eval.prompts import resolve_system_prompt
from kate.eval.knowledge_arm import build_retrieve_factory
from kate.llm.llamacpp import LlamaCppChatModel
from kate.llm.registry import DEFAULT_AGENT_MODEL
SINGLE = ["simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance", "live_simple", "live_multiple"]
def slice_for(arm):
    single = [e for c in SINGLE for e in load_entries(c, "test", 2 if arm != "st_w8v" else 1)][: (14 if arm != "st_w8v" else 4)]
    multi = [e for e in load_entries("multi_turn_base", "test", 10) if e.id in ({"multi_turn_base_13", "multi_turn_base_19"} if arm != "st_w8v" else {"multi_turn_base_19"})]
    return single + multi
model = LlamaCppChatModel(DEFAULT_AGENT_MODEL, n_ctx=32768, max_parallel=8)
out = sys.argv[1]
for arm in sys.argv[2].split(","):
    kind, overrides, knowledge = B.ARMS[arm]
    sampler = B.sampler_of(kind, overrides)
    factory = build_retrieve_factory(knowledge, intent_model=model)[0] if knowledge else None
    with open(f"{out}/{arm}.jsonl", "w") as f:
        for e in slice_for(arm):
            r = run_entry(e, model, sampler, factory, 0, max_steps=20, repeat_policy="warn", system_prompt=resolve_system_prompt("kate"), one_call=True)
            r.pop("seconds")
            f.write(json.dumps(r, ensure_ascii=False) + "\n"); f.flush()
            print(arm, e.id, r["valid"], flush=True)
