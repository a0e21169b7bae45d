"""One BFCL single-turn entry and two steps of a multi-turn dialogue on the real default model
(Qwen2.5-Coder-0.5B, llama.cpp), through the one runner, scored by BFCL's official checkers."""

from __future__ import annotations

import dataclasses

from kate.agent import LoopSettings, Policy
from kate.bfcl.data import load_entries
from kate.eval.run_store import load_run
from kate.eval.runner import open_run, run_task
from kate.sampling import GreedySampler
from kate.tasks.bfcl import BFCLTask


def test_a_bfcl_entry_and_two_dialogue_steps_on_the_default_model(default_llamacpp, tmp_path):
    [single] = [e for e in load_entries("simple_python", "test", 1)]  # simple_python_1: factorial of 5
    [dialogue] = [e for e in load_entries("multi_turn_base", "test", 1)]  # file system: ls, cd, ...
    first_turn = dataclasses.replace(dialogue, turns=dialogue.turns[:1], ground_truth=dialogue.ground_truth[:1])
    task = BFCLTask([single, first_turn])
    policy = Policy(default_llamacpp, GreedySampler(max_tokens=96), None, LoopSettings(max_steps=2, one_call=True))
    store = open_run(tmp_path, arm="direct", task=task, policy=policy, seed=0, config={"llm": "default"})
    one, multi = run_task(task, policy, store, seed=0)

    assert one["id"] == "simple_python_1" and one["valid"], one  # the official AST checker accepts the call
    assert one["calls"] == [{"name": "math.factorial", "arguments": {"number": 5}}]
    assert multi["turns_total"] == 1 and len(multi["turns"][0]["steps"]) <= 2
    step = multi["turns"][0]["steps"][0]
    offered = {f["name"] for f in dialogue.functions}
    assert step["executed"] and step["calls"][0]["name"] in offered  # a real call, run on BFCL's backend
    assert step["observations"][0]["content"]
    assert isinstance(multi["valid"], bool) and "turn_fraction" in multi
    meta, records = load_run(tmp_path)
    assert [r["id"] for r in records] == ["simple_python_1", "multi_turn_base_1"]
    assert meta["runtime"]["engine"] == "llama-cpp-python" and meta["runtime"]["system_info"]
