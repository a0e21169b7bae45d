"""Several entries in flight in the one runner: an engine failure in one entry is that entry's
recorded failure (the others finish), a resume redoes it, and the number in flight is not part of a
run's fingerprint."""

from __future__ import annotations

import threading

from kate.agent import Policy
from kate.bfcl.data import load_entries
from kate.eval.runner import ENGINE_ERROR, open_run, run_task
from kate.llm.base import EngineError
from kate.llm.fake import FakeChatModel
from kate.sampling.policy import GreedySampler
from kate.tasks.bfcl import BFCLTask

ENTRIES = load_entries("simple_python", "test", 6)
BAD = ENTRIES[2].turns[0][-1]["content"]


class FlakyModel(FakeChatModel):
    """Calls the first tool; the request of one entry fails in the engine while ``broken`` is set."""

    broken = True

    def chat(self, messages, tools=None, **kwargs):
        if self.broken and messages[-1]["content"].startswith(BAD):
            raise EngineError("fake: llama_decode returned 1")
        return super().chat(messages, tools, **kwargs)


def answer(messages, tools, n):
    return ['<tool_call>{"name": "' + tools[0]["function"]["name"] + '", "arguments": {}}</tool_call>'] * n


def test_an_engine_error_fails_its_entry_alone_and_a_resume_redoes_it(tmp_path):
    task = BFCLTask(ENTRIES)
    model = FlakyModel([answer], repeat_last=True)
    policy = Policy(model, GreedySampler())
    store = open_run(tmp_path, arm="a", task=task, policy=policy, seed=0, config={}, workers=4)
    records = run_task(task, policy, store, workers=4)
    assert len(records) == 6
    failed = [r for r in records if r.get("error_type") == ENGINE_ERROR]
    assert [r["id"] for r in failed] == [ENTRIES[2].id] and "llama_decode" in failed[0]["error"]

    model.broken = False
    store = open_run(tmp_path, arm="a", task=task, policy=policy, seed=0, config={}, workers=1)
    records = run_task(task, policy, store, workers=1)
    ids = [r["id"] for r in store.records()]
    assert len(ids) == len(set(ids)) == 6  # the failed entry redone, nothing written twice
    assert not any(r.get("error_type") == ENGINE_ERROR for r in records)


def test_entries_are_really_in_flight_together(tmp_path):
    task = BFCLTask(ENTRIES[:4])
    arrived = threading.Barrier(4, timeout=30)

    def together(messages, tools, n):
        arrived.wait()  # only passes when four requests are waiting at once
        return answer(messages, tools, n)

    policy = Policy(FakeChatModel([together], repeat_last=True), GreedySampler())
    store = open_run(tmp_path, arm="a", task=task, policy=policy, seed=0, config={}, workers=4)
    assert len(run_task(task, policy, store, workers=4)) == 4
