"""Hammer-style function masking: names and parameter names become random strings in the tools,
the history, the knowledge shown and the target, consistently, descriptions kept; unmasking gives
the original back; a share of 0 leaves the dataset (and its sha256) as before; live_irrelevance's
training half gives no-call steps."""

from __future__ import annotations

import json

import pytest

from kate.llm.fake import FakeChatModel
from kate.llm.registry import DEFAULT_AGENT_MODEL
from kate.toolcall import ToolCall
from kate.train.data import load_dataset_dir
from kate.train.masking import is_masked, mask_step, masking_for
from kate.train.steps import SolvedStep
from kate.train.teacher import Target

TOOLS = [
    {"type": "function", "function": {"name": "math.hypot", "description": "Length of the hypotenuse.",
     "parameters": {"type": "object", "properties": {"x": {"type": "number", "description": "one side"},
                                                     "y": {"type": "number", "description": "the other"}},
                    "required": ["x", "y"]}}},
    {"type": "function", "function": {"name": "add", "description": "Add two numbers.",
     "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                    "required": ["a"]}}},
]  # fmt: skip
KNOWLEDGE = ('Examples:\n1. "What is 3 plus 4?" -> add(a=3, b=4)\n'
             '2. "Hypotenuse of 1 and 2" -> {"name": "math.hypot", "arguments": {"x": 1, "y": 2}}\n'
             '3. "Other" -> multiply(a=1, b=2)')  # fmt: skip


def _step() -> SolvedStep:
    prompt = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Add 2 and 3 where a=2, then the hypotenuse of 3 and 4.\n\n" + KNOWLEDGE},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]},
        {"role": "tool", "name": "add", "tool_call_id": "call_0", "content": "5"},
    ]  # fmt: skip
    target = Target((ToolCall("math.hypot", {"x": 3, "y": 4}),), None, "call")
    hits = [{"id": "ST:x", "text": "What is 3 plus 4 with add?"}]
    return SolvedStep("s/t0/s1", "s", "multiple", 0, 1, prompt, TOOLS, target, None, hits)


def test_a_masked_step_calls_only_names_its_tools_offer_and_keeps_descriptions():
    step = _step()
    masking = masking_for(step.tools, step.source_id, seed=0)
    masked = mask_step(step, masking)
    offered = {t["function"]["name"]: t["function"] for t in masked.tools}
    assert set(offered) == set(masking.functions.values()) and not {"add", "math.hypot"} & set(offered)
    assert [t["function"]["description"] for t in masked.tools] == [t["function"]["description"] for t in TOOLS]
    for call in masked.target.calls:
        assert call.name in offered
        assert set(call.arguments) <= set(offered[call.name]["parameters"]["properties"])
    hypot = offered[masking.functions["math.hypot"]]["parameters"]
    assert hypot["required"] == [masking.params["math.hypot"][p] for p in ("x", "y")]
    history = masked.prompt[2]["tool_calls"][0]["function"]
    assert history["name"] == masking.functions["add"] and set(json.loads(history["arguments"])) == {
        masking.params["add"]["a"], masking.params["add"]["b"]}
    assert masked.prompt[3]["name"] == masking.functions["add"]
    user = masked.prompt[1]["content"]
    assert "add(" not in user and "math.hypot" not in user
    assert user.startswith("Add 2 and 3 where a=2, then the hypotenuse")  # the question's own words kept
    a, b = masking.params["add"]["a"], masking.params["add"]["b"]
    assert f"{masking.functions['add']}({a}=3, {b}=4)" in user
    x, y = masking.params["math.hypot"]["x"], masking.params["math.hypot"]["y"]
    assert f'"name": "{masking.functions["math.hypot"]}", "arguments": {{"{x}": 1, "{y}": 2}}' in user
    assert "multiply(a=1, b=2)" in user  # a function the tools do not offer stays as it is
    assert masked.hits == step.hits  # the recorded questions, plain text


def test_unmasking_maps_back_to_the_original_and_the_mapping_is_seeded():
    step = _step()
    masking = masking_for(step.tools, step.source_id, seed=0)
    for call in (*step.target.calls, ToolCall("add", {"a": 1, "b": 2})):
        assert masking.unmask_call(masking.call(call)) == call
    assert masking_for(step.tools, step.source_id, seed=0) == masking
    assert masking_for(step.tools, step.source_id, seed=1) != masking
    assert masking_for(step.tools, "other", seed=0) != masking
    names = [*masking.functions.values(), *(p for ps in masking.params.values() for p in ps.values())]
    assert all(n.isidentifier() for n in names)


def test_the_masked_share_follows_the_setting():
    keys = [f"simple_python_{i}" for i in range(400)]
    assert not any(is_masked(k, 0, 0.0) for k in keys) and all(is_masked(k, 0, 1.0) for k in keys)
    assert 100 < sum(is_masked(k, 0, 0.5) for k in keys) < 300


@pytest.fixture(scope="module")
def tokenizer():
    from kate.train.render import load_tokenizer

    return load_tokenizer(DEFAULT_AGENT_MODEL)


def _build(tmp_path, tokenizer, name: str, share: float):
    from kate.train.build import build_data
    from kate.train.config import DataConfig

    cfg = DataConfig(model=DEFAULT_AGENT_MODEL, categories=["simple_python", "multiple", "live_irrelevance"], limit=2,
                     own_tools_split=None, out_dir=str(tmp_path / name))  # fmt: skip
    cfg.writer.cache = str(tmp_path / "answers.jsonl")
    cfg.masking.share = share
    manifest = build_data(cfg, writer=FakeChatModel(["Done."], repeat_last=True), knowledge=None, tokenizer=tokenizer,
                          progress=False)  # fmt: skip
    return load_dataset_dir(cfg.out_dir)[0], manifest


def test_a_masked_dataset_and_an_unmasked_one(tmp_path, tokenizer):
    plain, plain_manifest = _build(tmp_path, tokenizer, "plain", 0.0)
    masked, manifest = _build(tmp_path, tokenizer, "masked", 1.0)
    assert "masking" not in plain_manifest and "masked" not in plain_manifest["stats"]
    assert not any(plain["masked"]) and all(masked["masked"])
    assert manifest["masking"] == {"share": 1.0, "seed": 0} and manifest["stats"]["masked"] == len(masked)
    assert manifest["sha256"] != plain_manifest["sha256"]
    from kate.train.data import rows_sha256

    rows = list(plain)
    assert plain_manifest["sha256"] == rows_sha256(rows) == rows_sha256([{k: v for k, v in r.items() if k != "masked"}
                                                                         for r in rows])  # fmt: skip
    for before, after in zip(rows, masked):
        assert before["id"] == after["id"] and before["kind"] == after["kind"]
        offered = {t["function"]["name"] for t in json.loads(after["tools"])}
        original = {t["function"]["name"] for t in json.loads(before["tools"])}
        assert not offered & original
        assert {c["name"] for c in json.loads(after["target_calls"])} <= offered
        for name in original:
            assert f'"name": "{name}"' not in after["prompt_text"]  # the tools as the template shows them, masked
    irrelevant = [r for r in masked if r["category"] == "live_irrelevance"]
    assert len(irrelevant) == 2 and all(r["kind"] == "no_call" and r["target_calls"] == "[]" for r in irrelevant)
    assert set(manifest["source_data"]) == {"simple_python", "multiple", "live_irrelevance"}


def test_masking_share_out_of_range_is_refused(tmp_path):
    from kate.train.build import build_data
    from kate.train.config import DataConfig

    cfg = DataConfig(model=DEFAULT_AGENT_MODEL, categories=[], own_tools_split=None, out_dir=str(tmp_path))
    cfg.masking.share = 1.5
    with pytest.raises(ValueError, match="masking.share"):
        build_data(cfg, writer=FakeChatModel([]), knowledge=None, tokenizer=object())
