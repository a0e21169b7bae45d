"""The gate: a belief below tau prefills the no-tool text, above it the tool text (soft) or the
call opening (hard), through the client's prefill option; a client without one is an error; the
tau sweep reads the gated, steered and ungated runs; the probe belief on the 135M model's states."""

from __future__ import annotations

import numpy as np
import pytest

from kate.agent.policy import Policy
from kate.diagnose.arithmetic import arithmetic_items
from kate.diagnose.gate import GateSweepTask, ProbeBelief, load_probe, save_probe, sweep_markdown, tau_sweep
from kate.diagnose.probes import When2ToolProbe
from kate.diagnose.tasks import VerifiableTask
from kate.eval.runner import open_run, run_task
from kate.llm.base import completion_from_text
from kate.llm.fake import FakeChatModel
from kate.sampling.gate import GatedStep, GateError, GateSampler, gate_action

CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2 + 2"}}\n</tool_call>'
TOOLS = arithmetic_items(1)[0].tools


class PrefillFake(FakeChatModel):
    """The scripted model, taking ``prefill=`` as llama.cpp does (the returned text starts with it)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, options=("prefill",), **kwargs)

    def chat(self, messages, tools=None, *, prefill=None, **kwargs):
        completions = super().chat(messages, tools, **kwargs)
        self.requests[-1]["prefill"] = prefill
        return [completion_from_text((prefill or "") + c.text, formats=self.formats) for c in completions]


def _act(p, tau, mode="soft", tau_high=None, tools=TOOLS, messages=None, script=CALL):
    model = PrefillFake([script], repeat_last=True)
    gate = GateSampler(lambda m, t: p, tau=tau, tau_high=tau_high, mode=mode, call_opening="```json\n")
    step = gate.act(model, messages or [{"role": "user", "content": "What is 2 + 2?"}], list(tools) if tools else None)
    return step, model.requests[-1]["prefill"]


@pytest.mark.parametrize("p, tau, mode, tau_high, action, prefill", [
    (0.2, 0.5, "soft", None, "no_tool", "I can answer this directly, without calling a tool. "),
    (0.7, 0.5, "soft", None, "tool", "I need to call a tool for this.\n"),
    (0.7, 0.5, "hard", None, "tool", "```json\n"),
    (0.2, 0.5, "hard", None, "no_tool", "I can answer this directly, without calling a tool. "),
    (0.5, 0.5, "soft", None, "tool", "I need to call a tool for this.\n"),  # at tau: the tool side
    (0.6, 0.3, "soft", 0.8, "none", None),  # between the thresholds: the inner sampler alone
    (0.9, 0.3, "hard", 0.8, "tool", "```json\n"),
])  # fmt: skip
def test_the_gate_chooses_the_prefill_per_tau_and_mode(p, tau, mode, tau_high, action, prefill):
    step, sent = _act(p, tau, mode, tau_high)
    assert isinstance(step, GatedStep)
    assert step.gate == {"belief": p, "action": action, "prefill": prefill or ""}
    assert sent == prefill
    assert gate_action(p, tau, tau_high) == action


def test_the_steered_text_is_parsed_whole():
    step, _ = _act(0.9, 0.5)
    assert step.text.startswith("I need to call a tool") and [c.name for c in step.calls] == ["calculator"]
    step, _ = _act(0.1, 0.5, script="\\boxed{4}")
    assert not step.calls and step.text.endswith("\\boxed{4}")


def test_nothing_is_gated_without_tools_or_after_a_tool_result():
    step, sent = _act(0.1, 0.5, tools=None)
    assert sent is None and step.gate["action"] == "none" and step.gate["belief"] is None
    after = [{"role": "user", "content": "q"}, {"role": "assistant", "content": CALL}, {"role": "tool", "content": "4"}]
    step, sent = _act(0.1, 0.5, messages=after)
    assert sent is None and step.gate["action"] == "none"


def test_a_client_without_prefill_is_a_clear_error():
    gate = GateSampler(lambda m, t: 0.9)
    with pytest.raises(GateError, match="does not take prefill"):
        gate.act(FakeChatModel([CALL]), [{"role": "user", "content": "q"}], list(TOOLS))
    with pytest.raises(ValueError, match="mode"):
        GateSampler(lambda m, t: 0.5, mode="medium")
    with pytest.raises(ValueError, match="tau"):
        GateSampler(lambda m, t: 0.5, tau=0.8, tau_high=0.2)


def test_the_tau_sweep_on_known_inputs():
    def rec(i, belief, base, no_tool, tool):
        return {"id": f"i{i}", "belief": belief, "outcome": {
            "base": dict(zip(("called", "valid"), base)), "no_tool": dict(zip(("called", "valid"), no_tool)),
            "tool": dict(zip(("called", "valid"), tool))}}  # fmt: skip

    records = [
        rec(0, 0.1, (True, True), (False, True), (True, True)),  # unnecessary, overused: gate fixes it
        rec(1, 0.9, (True, True), (False, False), (True, True)),  # necessary, called
        rec(2, 0.8, (False, False), (False, False), (True, True)),  # necessary, underused: gate fixes it
        rec(3, 0.3, (False, True), (False, True), (True, True)),
    ]  # unnecessary, not called
    necessary = {"i0": False, "i1": True, "i2": True, "i3": False}
    rows = tau_sweep(records, necessary, [0.0, 0.5, 1.0])
    assert [r["calls"] for r in rows] == [4, 2, 0] and {r["calls_base"] for r in rows} == {2}
    assert [r["mismatch"] for r in rows] == [0.5, 0.0, 0.5] and rows[0]["mismatch_base"] == 0.5
    assert [r["accuracy"] for r in rows] == [1.0, 1.0, 0.5] and rows[0]["accuracy_base"] == 0.75
    assert [r["call_reduction"] for r in rows] == [-1.0, 0.0, 1.0]
    assert [(r["steered_no_tool"], r["steered_tool"]) for r in rows] == [(0, 4), (2, 2), (4, 0)]
    banded = tau_sweep(records, necessary, [0.2], tau_high=0.85)  # i0 -> no tool, i1 -> tool, others ungated
    assert banded[0]["calls"] == 1 and banded[0]["accuracy"] == 0.75
    assert "| 0.5 | 4 | 2 / 2 | 2 (2) | +0.0% | 0.0% (50.0%) | 100.0% (75.0%) |" in sweep_markdown(rows)
    with pytest.raises(ValueError, match="no necessity label"):
        tau_sweep(records, {}, [0.5])


def test_the_sweep_task_runs_three_ways_through_the_runner(tmp_path):
    items = arithmetic_items(3, seed=1)

    def scripted(messages, tools, n):
        item = next(i for i in items if i.question == messages[-1]["content"])
        return [f"\\boxed{{{item.answer}}}"] * n

    model = PrefillFake([scripted], repeat_last=True)
    beliefs = {items[0].id: 0.1, items[1].id: 0.9}
    task = GateSweepTask(VerifiableTask(items, act="step"), beliefs)
    policy = Policy(model)
    records = run_task(task, policy, open_run(tmp_path / "gate", arm="gate", task=task, policy=policy, seed=0,
                                              config={}), seed=0)  # fmt: skip
    assert [r["id"] for r in records] == [items[0].id, items[1].id]  # the item without a belief is left out
    assert [q["prefill"] for q in model.requests[:3]] == [None, "I can answer this directly, without calling a tool. ",
                                                          "I need to call a tool for this.\n"]  # fmt: skip
    assert records[0]["outcome"]["base"] == {"called": False, "valid": True}
    assert records[0]["runs"]["tool"]["first_step"]["text"].startswith("I need to call a tool")


def test_the_sweep_reads_the_ungated_run_from_the_breakdowns_records(tmp_path):
    items = arithmetic_items(2, seed=1)
    model = PrefillFake([lambda messages, tools, n: ["\\boxed{0}"] * n], repeat_last=True)
    base = {items[0].id: {"id": items[0].id, "category": "x", "seed": 0, "called": True, "valid": True, "steps": []}}
    task = GateSweepTask(VerifiableTask(items, act="step"), {i.id: 0.5 for i in items}, base=base)
    policy = Policy(model)
    store = open_run(tmp_path / "gate", arm="gate", task=task, policy=policy, seed=0, config={})
    records = {r["id"]: r for r in run_task(task, policy, store, seed=0)}
    assert len(model.requests) == 2 + 3  # the first item's base run is not generated again
    assert records[items[0].id]["outcome"]["base"] == {"called": True, "valid": True}
    assert records[items[0].id]["runs"]["base"]["from"] == "breakdown"
    assert "from" not in records[items[1].id]["runs"]["base"]
    plain = GateSweepTask(VerifiableTask(items, act="step"), {i.id: 0.5 for i in items})
    assert plain.describe() != task.describe()  # a sweep on other ungated runs is another run folder
    with pytest.raises(ValueError, match="must say whether it called"):
        GateSweepTask(VerifiableTask(items, act="step"), {i.id: 0.5 for i in items}, base={items[0].id: {"id": "a"}})


def _probe_file(tmp_path, dim, layers, direction):
    probe = When2ToolProbe(direction, 0.0, np.zeros(dim * len(layers)), np.ones(dim * len(layers)))
    return save_probe(tmp_path / "probe.npz", probe, layers, {"label": "necessary"})


def test_probe_files_round_trip(tmp_path):
    path = _probe_file(tmp_path, 2, [1, 3], np.array([1.0, 0.0, 0.0, -1.0]))
    probe, layers, meta = load_probe(path)
    assert layers == (1, 3) and meta == {"label": "necessary"} and probe.coef.tolist() == [1.0, 0.0, 0.0, -1.0]
    (tmp_path / "bad.npz").write_text("no")
    with pytest.raises(ValueError, match="bad.npz"):
        load_probe(tmp_path / "bad.npz")


@pytest.mark.model
def test_the_probe_belief_reads_the_135m_models_hidden_states(tmp_path, small_hf):
    """The hidden-state path: the belief is sigmoid(probe logit / 2) of the decision-point states."""
    from kate.diagnose.hidden import decision_states

    dim = small_hf.model.config.hidden_size
    rng = np.random.default_rng(0)
    direction = rng.normal(size=2 * dim) / np.sqrt(dim)
    belief = ProbeBelief(str(_probe_file(tmp_path, dim, [-1, 5], direction)), model=small_hf)
    item = arithmetic_items(1, seed=2)[0]
    messages, tools = item.prompt(), list(item.tools)
    count = small_hf.model.config.num_hidden_layers + 1
    states = decision_states(small_hf, [(messages, tools)], k=1, layers=[count - 1, 5], progress=False).states
    expected = 1 / (1 + np.exp(-(states[0, :, -1].reshape(-1) @ direction) / 2.0))
    p = belief(messages, tools)
    assert p == pytest.approx(float(expected), rel=1e-4)
    model = PrefillFake([CALL], repeat_last=True)
    step = GateSampler(belief, tau=min(1.0, p + 0.01) if p < 1 else 0.5).act(model, messages, tools)
    assert step.gate["belief"] == pytest.approx(p) and step.gate["action"] in ("no_tool", "tool")


def test_the_gate_is_selectable_like_any_sampler_in_kate_eval(tmp_path):
    """`kate eval sampling=gate sampling.belief.probe=...`: composes, checks and builds (the hf
    model is not loaded until a gated step)."""
    from hydra import compose, initialize_config_dir

    from kate.cli import CONF_DIR
    from kate.eval.arm import check_arm
    from kate.eval.config import instantiate

    path = _probe_file(tmp_path, 2, [1], np.array([1.0, 0.0]))
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("eval", overrides=["sampling=gate", f"sampling.belief.probe={path}", "sampling.mode=hard"])
    check_arm(cfg.sampling, None, "arm")
    gate = instantiate(cfg.sampling)
    assert isinstance(gate, GateSampler) and gate.mode == "hard" and gate.call_opening == '<tool_call>\n{"name": "'
    assert gate.belief.hf["model"] == cfg.llm.model and gate.belief.model is None
    assert "ProbeBelief(probe=" in repr(gate) and "sha256=" in repr(gate)
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        unset = instantiate(compose("eval", overrides=["sampling=gate"]).sampling)  # builds (kate's config test)
    with pytest.raises(GateError, match="sampling.belief.probe"):  # and stops the run at the first gated step
        unset.act(PrefillFake([CALL]), [{"role": "user", "content": "q"}], list(TOOLS))
