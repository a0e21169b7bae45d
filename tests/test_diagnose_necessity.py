"""Model-adaptive necessity on a scripted model: an item answered right k of N times is necessary
unless k >= r; the sampling runs through kate's resumable runner; counts are cached per model
weights, task set and sampling config."""

from __future__ import annotations

import dataclasses
import json

import pytest

from kate.agent.policy import Policy
from kate.diagnose.arithmetic import arithmetic_items
from kate.diagnose.items import task_set_sha256
from kate.diagnose.necessity import (NecessityCache, NecessityConfig, NecessityTask, counts_from_records,
                                     label_summary, labels_for, necessity_labels, weights_sha256)  # fmt: skip
from kate.eval.runner import open_run, run_task
from kate.llm.fake import FakeChatModel
from kate.llm.registry import SMALL_TEST_MODEL, spec_of

ITEMS = arithmetic_items(6, seed=5)
RIGHT = {item.question: k for item, k in zip(ITEMS, (10, 9, 8, 0, 10, 1))}  # right k of 10 times


def scripted(messages, tools, n):
    """Right ``RIGHT[question]`` of n times, wrong (or unboxed) otherwise; no tools ever offered."""
    assert tools is None
    item = next(i for i in ITEMS if i.question == messages[-1]["content"])
    k = RIGHT[item.question]
    wrong = [f"\\boxed{{{item.answer + 1}}}", f"It is {item.answer}."]  # a wrong number, an unboxed right one
    return [f"\\boxed{{{item.answer}}}"] * k + [wrong[j % 2] for j in range(n - k)]


def test_labels_on_a_scripted_model_through_the_runner(tmp_path):
    model = FakeChatModel([scripted], repeat_last=True)
    config = NecessityConfig()
    task = NecessityTask(ITEMS, config)
    store = open_run(tmp_path / "run", arm="necessity", task=task, policy=Policy(model), seed=0, config={})
    records = run_task(task, Policy(model), store, seed=0)
    assert {(r["n"], r["temperature"], r["tools"]) for r in model.requests} == {(10, 0.7, None)}
    counts = counts_from_records(records)
    assert counts == {item.id: RIGHT[item.question] for item in ITEMS}
    assert [r["necessary"] for r in records] == [False, True, True, True, False, True]  # r = N = 10
    labels9 = necessity_labels(counts, 10, r=9)
    assert [labels9[i.id] for i in ITEMS] == [False, False, True, True, False, True]
    assert label_summary(counts, config) == {"r=10": {"necessary": 4, "unnecessary": 2},
                                             "r=9": {"necessary": 3, "unnecessary": 3}}  # fmt: skip
    again = run_task(task, Policy(model), store, seed=0)  # resumable: nothing is sampled again
    assert len(model.requests) == len(ITEMS) and again == records


def test_known_labels_win_over_measured_ones():
    known = dataclasses.replace(ITEMS[0], necessary=True)  # right 10 of 10, but the data says a tool is needed
    counts = {item.id: RIGHT[item.question] for item in ITEMS}
    labels = labels_for([known, *ITEMS[1:3]], counts, 10)
    assert labels == {ITEMS[0].id: True, ITEMS[1].id: True, ITEMS[2].id: True}
    assert labels_for(ITEMS[1:2], counts, 10, r=9) == {ITEMS[1].id: False}
    with pytest.raises(ValueError, match="neither"):
        labels_for(ITEMS[:2], {}, 10)


def test_threshold_config_and_errors():
    assert NecessityConfig().threshold == 10 and NecessityConfig(r=9).reported == (9, 10)
    assert NecessityConfig(samples=5).reported == (5,)
    with pytest.raises(ValueError, match="more than samples"):
        NecessityConfig(samples=5, r=6)
    with pytest.raises(ValueError, match="samples"):
        NecessityConfig(samples=0)
    with pytest.raises(ValueError, match="r must be"):
        necessity_labels({"a": 3}, 10, r=0)
    with pytest.raises(ValueError, match="outside"):
        necessity_labels({"a": 11}, 10)


def test_a_prompt_that_does_not_fit_counts_as_wrong():
    class TooLong(FakeChatModel):
        def chat(self, *args, **kwargs):
            raise ValueError("prompt too long")

    task = NecessityTask(ITEMS[:1])
    trace = task.solve(ITEMS[0], Policy(TooLong()), 0)
    score = task.score(ITEMS[0], trace)
    assert score["correct_count"] == 0 and score["necessary"] and score["error_type"] == "kate:model_error"


def test_cache_is_keyed_by_weights_task_set_and_sampling(tmp_path):
    cache = NecessityCache(tmp_path)
    sha, items_sha = "ab" * 32, task_set_sha256(ITEMS)
    sampling = NecessityConfig().sampling(seed=0)
    assert cache.load(sha, items_sha, sampling) is None
    path = cache.save(sha, items_sha, sampling, {"x": 3})
    assert cache.load(sha, items_sha, sampling) == {"x": 3}
    assert cache.load(sha, items_sha, {**sampling, "seed": 1}) is None
    assert cache.load("cd" * 32, items_sha, sampling) is None
    assert cache.load(sha, task_set_sha256(ITEMS[:3]), sampling) is None
    assert not list(tmp_path.glob(".*.tmp"))  # written atomically, nothing left behind
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "model_sha256": "ef" * 32}))
    with pytest.raises(ValueError, match="does not match"):
        cache.load(sha, items_sha, sampling)


def test_weights_hash_from_the_registry_or_a_clear_error():
    class Named:
        name = SMALL_TEST_MODEL

    assert weights_sha256(Named()) == spec_of(SMALL_TEST_MODEL).sha256
    with pytest.raises(ValueError, match="weights hash"):
        weights_sha256(FakeChatModel())


STREAMS = ["RRRRRRRRRR", "RRRRRRRRRW", "WRRRRRRRRR", "RWRRWRRRRR", "WWRRRRRRRR", "RRRRRRRRWW"]  # sample j right?


def streamed(drawn):
    """Each item's answers in a fixed order (``STREAMS``), whatever the rounds they are asked in."""

    def answer(messages, tools, n):
        item = next(i for i in ITEMS if i.question == messages[-1]["content"])
        stream = STREAMS[ITEMS.index(item)]
        start = drawn.get(item.id, 0)
        drawn[item.id] = start + n
        return [f"\\boxed{{{item.answer if c == 'R' else item.answer + 1}}}" for c in stream[start:start + n]]

    return answer


def test_stop_early_gives_the_full_labels_at_every_reported_r_from_fewer_samples(tmp_path):
    full, early = {}, {}
    for drawn, config, name in ((full, NecessityConfig(), "full"), (early, NecessityConfig(stop_early=True), "early")):
        model = FakeChatModel([streamed(drawn)], repeat_last=True)
        task = NecessityTask(ITEMS, config)
        store = open_run(tmp_path / name, arm="necessity", task=task, policy=Policy(model), seed=0, config={})
        records = run_task(task, Policy(model), store, seed=0)
        counts = counts_from_records(records)
        for r in (10, 9):
            labels = necessity_labels(counts, 10, r=r)
            if name == "full":
                full[f"labels{r}"] = labels
            else:
                assert labels == full[f"labels{r}"]
        if name == "early":
            assert [rec["drawn"] for rec in records] == [10, 10, 10, 5, 2, 10]  # stops at the 2nd wrong answer
            assert counts[ITEMS[4].id] == 0 and counts[ITEMS[3].id] == 3  # lower bounds where it stopped
            assert [r["n"] for r in model.requests][:2] == [2, 2]  # rounds of as many as could end the item
    assert config.sampling(0)["stop_after_wrong"] == 2 and "stop_after_wrong" not in NecessityConfig().sampling(0)
    assert NecessityConfig(stop_early=True, report_r=(10,)).stop_after_wrong == 1
