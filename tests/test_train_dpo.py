"""DPO's preference pairs from the step dataset (a wrong call, a call where none is due, another call
instead of the answer; rendered like the targets, deterministic), and a real TRL DPOTrainer run of 2
steps on the 135M model that saves an adapter, probed, then one more from that adapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kate.knowledge.trajectory import trajectory_from_dict, write_trajectories
from kate.llm.fake import FakeChatModel
from kate.llm.registry import SMALL_TEST_MODEL
from kate.toolcall import ToolCall
from kate.train.config import DPOJobConfig, ProbeConfig
from kate.train.data import load_dataset_dir
from kate.train.examples import with_call_format
from kate.train.pairs import build_pairs, filled_call, wrong_call
from kate.train.rewards import call_correct, parse

from .train_fixtures import OWN

TOOLS = [
    {"type": "function", "function": {"name": "weather", "description": "The weather in a city.",
     "parameters": {"type": "object", "properties": {
         "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
         "days": {"type": "integer"}}, "required": ["city", "unit"]}}},
    OWN["tools"][0],
]  # fmt: skip


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    from kate.train.build import build_data
    from kate.train.config import DataConfig

    tmp = tmp_path_factory.mktemp("pairs")
    write_trajectories(tmp / "own.jsonl", [trajectory_from_dict(OWN)])
    cfg = DataConfig(model=SMALL_TEST_MODEL, categories=["simple_python", "multiple", "irrelevance"], limit=2,
                     trajectories=[str(tmp / "own.jsonl")], own_tools_split=None, out_dir=str(tmp / "data"))
    cfg.writer.cache = str(tmp / "answers.jsonl")
    build_data(cfg, writer=FakeChatModel(["Done."], repeat_last=True), knowledge=None, progress=False)
    return cfg.out_dir


@pytest.fixture(scope="module")
def renderer():
    from kate.train.render import StepRenderer, load_tokenizer

    return StepRenderer(load_tokenizer(SMALL_TEST_MODEL))


def test_pairs_for_each_kind_reject_the_mistake_the_step_invites(data_dir, renderer):
    rows = list(load_dataset_dir(data_dir)[0])
    pairs, counts = build_pairs(rows, renderer, seed=0)
    by_id = {r["id"]: r for r in rows}
    assert {p["kind"] for p in pairs} == {"call", "no_call", "answer"} and counts["pairs"] == len(pairs)
    assert counts["no_pair"] == {}
    for p in pairs:
        row = by_id[p["id"]]
        assert p["prompt"] == row["prompt_text"] and p["chosen"] == row["completion_text"] != p["rejected"]
        assert p["rejected"].endswith(renderer.eos) and p["rejected"].startswith("<tool_call>\n")  # the template's form
        rejected = parse(p["rejected"])
        assert rejected.ok and rejected.calls == tuple(ToolCall.from_dict(c) for c in json.loads(p["rejected_calls"]))
        offered = {t["function"]["name"] for t in json.loads(row["tools"])}
        assert {c.name for c in rejected.calls} <= offered
        columns = {"target_calls": [row["target_calls"]] * 2, "kind": [row["kind"]] * 2,
                   "category": [row["category"]] * 2, "source_id": [row["source_id"]] * 2}  # fmt: skip
        assert call_correct([p["prompt"]] * 2, [p["chosen"], p["rejected"]], **columns) == [1.0, 0.0]
    kinds = {p["kind"]: p["rejected_kind"] for p in pairs}
    assert kinds["no_call"] == "call_where_none_due" and kinds["answer"] == "call_instead_of_answer"
    answer = next(p for p in pairs if p["kind"] == "answer")
    assert json.loads(answer["rejected_calls"]) == [{"name": "add", "arguments": {"a": 2, "b": 3}}]  # the call again
    again, _ = build_pairs(rows, renderer, seed=0)
    assert again == pairs  # deterministic
    only, counts = build_pairs(rows, renderer, seed=0, kinds=["no_call"])
    assert {p["kind"] for p in only} == {"no_call"} and counts["pairs"] == len(only) > 0


def test_json_call_format_writes_chosen_and_rejected_calls_as_json_as_sft_does(data_dir, renderer):
    rows = list(load_dataset_dir(data_dir)[0])
    template, _ = build_pairs(rows, renderer, seed=0)
    pairs, _ = build_pairs(rows, renderer, seed=0, call_format="json")
    assert [p["id"] for p in pairs] == [p["id"] for p in template]  # the same mistakes, another form
    by_id = {r["id"]: r for r in rows}
    for p in pairs:
        assert "<tool_call>" not in p["chosen"] + p["rejected"] and p["chosen"] != p["rejected"]
        rejected = parse(p["rejected"])  # kate's parsers read the JSON form as they read the blocks
        assert rejected.ok and rejected.calls == tuple(ToolCall.from_dict(c) for c in json.loads(p["rejected_calls"]))
        assert p["chosen"] == with_call_format(by_id[p["id"]], "json")["completion_text"]


def test_dpo_refuses_an_unknown_call_format_before_loading_anything(tmp_path):
    from kate.train.dpo import run_dpo

    cfg = DPOJobConfig(data_dir=str(tmp_path / "absent"), output_dir=str(tmp_path / "out"), call_format="xml")
    with pytest.raises(ValueError, match="call_format"):
        run_dpo(cfg)


def test_a_wrong_call_is_another_function_or_a_required_argument_changed_or_missing():
    right = ToolCall("weather", {"city": "Paris", "unit": "celsius", "days": 3})
    seen = {}
    for key in range(40):
        calls, way = wrong_call([right, ToolCall("add", {"a": 1, "b": 2})], TOOLS, 0, f"row{key}")
        seen[way] = calls[0]
        assert calls[0] != right and calls[1] == ToolCall("add", {"a": 1, "b": 2})
    assert set(seen) == {"other_function", "changed_argument", "missing_argument"}
    assert seen["other_function"] == ToolCall("add", {"a": 1.0, "b": 1.0})
    changed = {k for k in right.arguments if seen["changed_argument"].arguments[k] != right.arguments[k]}
    assert len(changed) == 1 and changed <= {"city", "unit"}  # a required one
    assert len(seen["missing_argument"].arguments) == 2 and "days" in seen["missing_argument"].arguments
    alone, way = wrong_call([ToolCall("add", {"a": 1, "b": 2})], TOOLS[1:], 0, "x")
    assert way in ("changed_argument", "missing_argument")  # no other function offered
    assert wrong_call([ToolCall("noop", {})], [{"type": "function", "function": {"name": "noop"}}], 0, "x") is None


def test_a_call_where_none_is_due_fills_the_required_arguments_from_the_schema():
    assert filled_call(TOOLS[0]["function"]) == ToolCall("weather", {"city": "example", "unit": "celsius"})
    integer = {"name": "f", "parameters": {"properties": {"n": {"type": "integer"}}}}
    assert filled_call(integer) == ToolCall("f", {"n": 1})


def test_dpo_refuses_unknown_pair_kinds_before_loading_anything(tmp_path):
    from kate.train.dpo import run_dpo

    cfg = DPOJobConfig(data_dir=str(tmp_path / "absent"), output_dir=str(tmp_path / "out"), pair_kinds=["refusal"])
    with pytest.raises(ValueError, match="pair_kinds"):
        run_dpo(cfg)


@pytest.mark.model
def test_dpo_trains_two_steps_saves_an_adapter_and_continues_one(data_dir, tmp_path):
    from kate.train.dpo import run_dpo

    cfg = DPOJobConfig(model=SMALL_TEST_MODEL, data_dir=data_dir, part="all", output_dir=str(tmp_path / "dpo"),
                       max_steps=2, save_steps=1, logging_steps=1, gradient_accumulation_steps=1, learning_rate=1e-4,
                       max_length=4096, probe=ProbeConfig(held_out=2, replay=1, near_miss=1, max_tokens=8),
                       gguf_adapter=True)  # fmt: skip
    summary = run_dpo(cfg)
    assert summary["global_step"] == 2 and summary["pairs"]["pairs"] > 0
    final = Path(summary["saved"]["final"])
    assert json.loads((final / "adapter_config.json").read_text())["base_model_name_or_path"] == SMALL_TEST_MODEL
    assert not (final / "ref").exists() and Path(summary["saved"]["gguf_adapter"]).stat().st_size > 0
    probes = [json.loads(line) for line in (tmp_path / "dpo" / "probe.jsonl").read_text().splitlines()]
    assert [p["step"] for p in probes] == [0, 1, 2]
    metrics = [json.loads(line) for line in (tmp_path / "dpo" / "metrics.jsonl").read_text().splitlines()]
    assert any("loss" in m for m in metrics) and any(any(k.startswith("rewards/") for k in m) for m in metrics)
    after = DPOJobConfig(model=SMALL_TEST_MODEL, data_dir=data_dir, part="all", output_dir=str(tmp_path / "more"),
                         init_adapter=str(final), pair_kinds=["no_call", "answer"], max_steps=1, save_steps=1,
                         gradient_accumulation_steps=1, max_length=4096, gguf_adapter=False,
                         probe=ProbeConfig(enabled=False))  # fmt: skip
    more = run_dpo(after)
    assert more["global_step"] == 1 and not (Path(more["saved"]["final"]) / "ref").exists()


@pytest.mark.model
def test_dpo_trains_on_json_form_pairs_and_records_the_form(data_dir, tmp_path):
    from kate.train.dpo import run_dpo

    cfg = DPOJobConfig(model=SMALL_TEST_MODEL, data_dir=data_dir, part="all", output_dir=str(tmp_path / "json"),
                       call_format="json", max_steps=1, save_steps=1, logging_steps=1, gradient_accumulation_steps=1,
                       max_length=4096, gguf_adapter=False, probe=ProbeConfig(enabled=False))  # fmt: skip
    summary = run_dpo(cfg)
    assert summary["global_step"] == 1 and summary["pairs"]["pairs"] > 0
    job = json.loads((tmp_path / "json" / "job.json").read_text())
    assert job["settings"]["call_format"] == "json"
    assert (Path(summary["saved"]["final"]) / "adapter_config.json").exists()
