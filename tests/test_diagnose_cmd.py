"""`kate diagnose`: the config composes (a typo fails at start), and every diagnostic runs end to
end on a scripted model for a tiny arithmetic set through the plain function, resumably, the
report written at the end."""

from __future__ import annotations

import json
import re

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ConfigKeyError, ValidationError

from kate.cli import CONF_DIR, SUBCOMMANDS
from kate.diagnose.arithmetic import arithmetic_items
from kate.diagnose.calculator import calculator
from kate.diagnose_cmd import run_diagnose
from kate.llm.base import completion_from_text

REQUESTS: list[dict] = []
LADDER = "skip=[replay,near_miss,first_token,trajectory,keyword,toolsense]"  # Diagnostics II: tests of their own


class ScriptedArithmetic:
    """Knows the arithmetic set's questions: without tools right k = len(expr) % 3 of n times; with
    tools it calls the calculator when len(expr) is odd (or when steered to), answers from a tool
    result; states a plan when asked. Takes ``prefill=`` as llama.cpp does."""

    name = "scripted-arithmetic"
    options = ("prefill",)

    def chat(self, messages, tools=None, *, n=1, temperature=0.0, max_tokens=256, seed=None, stop=None,
             logprobs=False, prefill=None):  # fmt: skip
        REQUESTS.append({"tools": bool(tools), "n": n, "prefill": prefill})
        last = messages[-1]
        if last["role"] == "tool":
            return [completion_from_text(f"\\boxed{{{last['content']}}}")] * n
        question = next(m["content"] for m in messages if m["role"] == "user")
        expr = re.search(r"What is (.+?)\?", question).group(1)
        answer = calculator(expr)
        if "Do not solve the task yet" in last["content"]:
            plan = (
                '{"call": true, "tool": "calculator", "arguments": {}}'
                if len(expr) % 2
                else '{"call": false, "tool": null, "arguments": {}}' if len(expr) % 4 else "no plan"
            )
            return [completion_from_text(plan)] * n
        if prefill and prefill.endswith('{"name": "'):  # hard mode: the call's opening is given
            return [completion_from_text(prefill + 'calculator", "arguments": ' + json.dumps({"expression": expr})
                                         + "}\n</tool_call>")] * n  # fmt: skip
        if tools is None:
            k = len(expr) % 3
            return [completion_from_text(f"\\boxed{{{answer if j < k else 'x'}}}") for j in range(n)]
        call = json.dumps({"name": "calculator", "arguments": {"expression": expr}})
        steer_tool, steer_none = prefill and "tool for this" in prefill, prefill and "directly" in prefill
        text = (
            f"<tool_call>\n{call}\n</tool_call>"
            if (len(expr) % 2 or steer_tool) and not steer_none
            else f"\\boxed{{{answer}}}"
        )
        return [completion_from_text((prefill or "") + text)] * n


def _compose(overrides):
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("diagnose", overrides=overrides)


def test_diagnose_is_a_kate_subcommand_and_typos_fail_at_start():
    assert SUBCOMMANDS["diagnose"][:2] == ("diagnose", "kate.diagnose_cmd:run_diagnose")
    cfg = _compose([])
    assert cfg.name.name == "all" and cfg.set.name == "arithmetic" and cfg.necessity.samples == 10
    assert cfg.out_dir is None and cfg.hf.model == cfg.llm.model
    for typo in ("name=probe", "set=arith", "gate.mode=medium", "act=turns"):
        with pytest.raises((ConfigCompositionException, ValidationError)):
            _compose([typo])
    with pytest.raises((ConfigCompositionException, ConfigKeyError)):
        _compose(["necessity.sample=3"])
    with pytest.raises(ValueError, match="user.path"):
        run_diagnose(_compose(["set=user", "llm=fake", "hf=null"]))


def test_every_diagnostic_end_to_end_on_a_scripted_model(tmp_path):
    items = arithmetic_items(6, seed=0)
    beliefs = tmp_path / "beliefs.json"
    beliefs.write_text(json.dumps({item.id: b for item, b in zip(items, (0.1, 0.9, 0.4, 0.6, 0.2, 0.8))}))
    overrides = ["llm=fake", "llm._target_=tests.test_diagnose_cmd.ScriptedArithmetic", "llm.script=???",
                 "llm.repeat_last=???", "hf=null", "arithmetic.n=6", LADDER,
                 "necessity.samples=2", "necessity.report_r=[2,1]", "necessity.cache_dir=null", "progress=false",
                 f"gate.beliefs={beliefs}", "gate.taus=[0.0,0.5,1.0]", f"out_dir={tmp_path / 'out'}"]  # fmt: skip
    REQUESTS.clear()
    out = run_diagnose(_compose(overrides))
    counts = {item.id: len(item.meta["expression"]) % 3 for item in items}
    assert out["necessity"] == {"n": 6, "necessary": sum(k < 2 for k in counts.values())}
    table = out["breakdown"]["four_way"]["r=2"]
    called = {item.id: len(item.meta["expression"]) % 2 == 1 for item in items}
    assert table["n"] == 6 and table["N-C"] + table["UN-C"] == sum(called.values())
    assert set(out["breakdown"]["four_way"]) == {"r=2", "r=1"}
    assert out["probes"] is None and out["pcall"] is None  # no hf client
    assert out["plan"]["n"] == 6 and out["plan"]["execution_accuracy"] == 1 - table["mismatch"]
    rows = {r["tau"]: r for r in out["gate"]}
    assert rows[0.0]["calls"] == 6 and rows[1.0]["calls"] == 0 and rows[0.5]["calls"] == 3
    assert rows[0.5]["calls_base"] == sum(called.values()) and rows[1.0]["accuracy"] == 1.0
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## Four-way breakdown" in report and "## Gate: soft mode" in report and "| r=1 |" in report
    assert (tmp_path / "out" / "gate_soft.png").exists() and (tmp_path / "out" / "mismatch.png").exists()
    for folder in ("necessity", "breakdown", "plan", "gate_soft"):
        assert (tmp_path / "out" / folder / "meta.json").exists(), folder
    done = len(REQUESTS)
    again = run_diagnose(_compose(overrides))  # resumable: nothing runs again
    assert len(REQUESTS) == done and again["gate"] == out["gate"]
    only = run_diagnose(_compose([*overrides[:-1], f"out_dir={tmp_path / 'one'}", "name=necessity"]))
    assert only == {"necessity": out["necessity"]} and not (tmp_path / "one" / "breakdown").exists()


class CharTokenizer:
    """One token per character (ids 1..127; 0 pads)."""

    pad_token_id = 0

    def __call__(self, text, add_special_tokens=False):
        from types import SimpleNamespace

        return SimpleNamespace(input_ids=[1 + ord(ch) % 127 for ch in text])

    def decode(self, ids):
        return "".join(chr(i - 1) for i in ids)


class TinyHF:
    """A randomly initialised two-layer Llama with a character tokenizer: what the hidden-state
    pass reads (``model``, ``tokenizer``, ``render``, ``device``), no download."""

    name = "tiny-hf"

    def __init__(self, model=None, device="cpu", dtype="float32"):
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(0)
        config = LlamaConfig(vocab_size=128, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                             num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=2048)  # fmt: skip
        self.model, self.tokenizer, self.device = LlamaForCausalLM(config).eval(), CharTokenizer(), "cpu"

    def render(self, messages, tools=None):
        return "".join(f"{m['role']}: {m['content']}\n" for m in messages) + f"tools: {len(tools or ())}\nassistant:"


def test_probes_pcall_and_the_gate_from_the_hidden_state_pass(tmp_path):
    overrides = ["llm=fake", "llm._target_=tests.test_diagnose_cmd.ScriptedArithmetic", "llm.script=???",
                 "llm.repeat_last=???", "hf._target_=tests.test_diagnose_cmd.TinyHF", "hf.model=tiny", LADDER,
                 "arithmetic.n=20", "necessity.samples=2", "necessity.report_r=[2]",
                 "necessity.cache_dir=null", "progress=false", "probes.k=3", "probes.epochs=5",
                 "gate.taus=[0.5]", "gate.mode=hard", f"out_dir={tmp_path}"]  # fmt: skip
    with pytest.raises(ValueError):  # the hf node's keys are checked against the target at start
        run_diagnose(_compose([*overrides, "+hf.devices=cpu"]))
    out = run_diagnose(_compose(overrides))
    probes = out["probes"]
    assert probes["n"] == 20 and probes["layers"] == [0, 1, 2] and probes["positions"] == [-3, -2, -1]
    assert len(probes["necessity"]["mcc"]) == 3 and probes["necessity"]["n_test"] == 6
    assert len(probes["cosine"]) == 3 and all(-1 <= c <= 1 for row in probes["cosine"] for c in row)
    assert probes["when2tool"]["necessity"]["n_test"] == 6
    opening = out["pcall"]["opening"]["detected"]
    assert opening["token"] == "<" and opening["calls"] == opening["calls_starting"]  # the calls open with <tool_call>
    assert out["pcall"]["agreement"]["n"] == 20
    rows = [json.loads(line) for line in (tmp_path / "probes" / "items.jsonl").read_text().splitlines()]
    assert sum(r["split"] == "test" for r in rows) == 6 and all(
        0 <= r["belief"] <= 1 and 0 <= r["p_call"] <= 1 for r in rows
    )
    assert out["gate"][0]["n"] == 6  # held-out items only
    assert (tmp_path / "probes" / "probe.npz").exists()
    for png in ("mcc.png", "cosine.png", "alluvial.png", "belief_vs_pcall.png", "gate_hard.png"):
        assert (tmp_path / png).exists(), png


def test_the_ladder_rungs_end_to_end_on_a_talking_model(tmp_path):
    """Replay, near-miss, the first-token probe (a tiny random Llama), strict vs keyword; the
    trajectory skipped in name=all without a folder, an error when named alone; the report's sections."""
    overrides = ["llm=fake", "llm._target_=kate.diagnose.vectrayx.talker_model", "llm.script=???", "llm.repeat_last=???",
                 "hf._target_=tests.test_diagnose_cmd.TinyHF", "hf.model=tiny", "progress=false",
                 "skip=[necessity,breakdown,probes,pcall,plan,gate,toolsense]", "replay.limit=2", "near_miss.limit=2",
                 "near_miss.irrelevance_limit=2", "first_token.limit=3", f"out_dir={tmp_path}"]  # fmt: skip
    out = run_diagnose(_compose(overrides))
    assert out["replay"]["all"]["n"] == 8 and out["replay"]["all"]["valid"] == 0 and out["replay"]["all"]["keyword"] == 1
    assert out["near_miss"]["all"] == {"n": 8, "no_call": 1.0, "called": 0.0, "attempted": 0.0,
                                       "keyword": out["near_miss"]["all"]["keyword"]}  # fmt: skip
    keyword = out["keyword"]
    assert keyword["replay"]["all"]["keyword_only"] == 8 and len(keyword["replay"]["disagreements"]) == 8
    assert keyword["near_miss"]["all"]["n"] == 8
    assert out["first_token"]["summary"]["call_due"]["n"] == 3 and out["first_token"]["summary"]["no_call_due"]["n"] == 3
    assert out["first_token"]["agreement"]["n"] == 6 and out["trajectory"] is None
    report = (tmp_path / "report.md").read_text()
    for section in ("## Verbatim replay", "## Near-miss negatives", "## Strict vs keyword scoring",
                    "## First-token probe", "## Checkpoint trajectory", "## Tool knowledge (ToolSense probes)"):  # fmt: skip
        assert section in report, section
    with pytest.raises(ValueError, match="trajectory.folder"):
        run_diagnose(_compose([*overrides, "name=trajectory"]))
    with pytest.raises(ValueError, match="hf client"):
        run_diagnose(_compose([*overrides, "name=first_token", "hf=null"]))


def test_the_plan_order_control_runs_into_its_own_folder_and_report_section(tmp_path):
    overrides = ["llm=fake", "llm._target_=tests.test_diagnose_cmd.ScriptedArithmetic", "llm.script=???",
                 "llm.repeat_last=???", "hf=null", "arithmetic.n=4", LADDER, "necessity.samples=2",
                 "necessity.report_r=[2]", "necessity.cache_dir=null", "progress=false", "name=plan",
                 f"out_dir={tmp_path}"]  # fmt: skip
    with pytest.raises((ConfigCompositionException, ValidationError)):
        _compose([*overrides, "plan.order=random"])
    first = run_diagnose(_compose(overrides))["plan"]
    REQUESTS.clear()
    swapped = run_diagnose(_compose([*overrides, "plan.order=no_call_first"]))["plan"]
    assert first["order"] == "call_first" and swapped["order"] == "no_call_first" and swapped["n"] == 4
    meta = json.loads((tmp_path / "plan_no_call_first" / "meta.json").read_text())
    instruction = json.dumps(meta)
    assert instruction.index('{\\"call\\": false') < instruction.index('{\\"call\\": true')
    assert (tmp_path / "plan" / "summary.json").exists()
    run_diagnose(_compose([*overrides[:-2], "name=all", "skip=[replay,near_miss,first_token,trajectory,keyword,"
                           "toolsense,gate]", f"out_dir={tmp_path}"]))  # fmt: skip
    report = (tmp_path / "report.md").read_text()
    assert "## Plan vs execute (call_first)" in report and "## Plan vs execute (no_call_first)" in report
