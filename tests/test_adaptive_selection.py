"""The adaptive vote's selection on stored training-half records: the gate replays each threshold from
a run whose gate never committed, and the rule fixed in advance picks the cheapest rule near fixed width 8."""

from __future__ import annotations

from kate.bfcl.data import load_entries
from kate.eval.adaptive_selection import choose, greedy_gate, paired, replay_gate, summarize

ENTRY = load_entries("simple_python", "train", 1)[0]  # calculate_triangle_area(base=10, height=5)
RIGHT = {"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}
WRONG = {"name": "calculate_triangle_area", "arguments": {"base": 3, "height": 5}}


def gate_record(greedy: dict, confidence: float, valid: bool, drawn: int = 5) -> dict:
    """A record of the never-committing gate: the greedy sample first, then the adaptive vote's own."""
    candidates = [{"kind": "call", "calls": [greedy], "samples": [0]},
                  {"kind": "call", "calls": [RIGHT if valid else WRONG], "samples": list(range(1, drawn))}]  # fmt: skip
    return {"id": ENTRY.id, "category": ENTRY.category, "valid": valid, "outputs": ["..."] * drawn,
            "vote": {"candidates": candidates, "adaptive": {"drawn": drawn, "gate": {"mean_logprob": confidence}}}}


def test_the_greedy_call_is_scored_by_the_official_checker():
    confidence, score = greedy_gate(gate_record(RIGHT, -0.04, False), ENTRY)
    assert confidence == -0.04 and score["valid"] is True
    confidence, score = greedy_gate(gate_record(WRONG, -0.5, True), ENTRY)
    assert confidence == -0.5 and score["valid"] is False


def test_a_threshold_commits_to_the_greedy_call_only_where_it_is_confident():
    records = [gate_record(RIGHT, -0.03, False), gate_record(WRONG, -0.3, True, drawn=8)]
    entries = {ENTRY.id: ENTRY}
    rules = replay_gate(records, entries, thresholds=(-0.05, -0.5, -0.01))
    assert rules["gate-0.05"]["drawn"] == [1, 8] and [bool(s["valid"]) for s in rules["gate-0.05"]["scored"]] == [True, True]
    assert rules["gate-0.5"]["drawn"] == [1, 1] and [bool(s["valid"]) for s in rules["gate-0.5"]["scored"]] == [True, False]
    assert rules["gate-0.01"]["drawn"] == [5, 8]  # nothing that confident: the recorded steps
    assert rules["gate-0.05"]["overrides"] == ["sampling.gate_logprob=-0.05"]


def test_the_rule_takes_the_fewest_samples_within_the_tolerance():
    def rule(valid: list[int], drawn: list[int]) -> dict:
        return {"scored": [{"valid": bool(v)} for v in valid], "drawn": drawn}

    hundred = [1] * 60 + [0] * 40
    rules = {"fixed_w8": rule(hundred, [8] * 100),
             "first2_step2": rule([1] * 59 + [0] * 41, [5] * 100),  # 1 point below: within 1.0
             "first3_step2": rule([1] * 60 + [0] * 40, [6] * 100),
             "gate-0.3": {**rule([1] * 55 + [0] * 45, [2] * 100), "overrides": ["sampling.gate_logprob=-0.3"]}}  # fmt: skip
    summary = summarize(rules)
    assert summary["first2_step2"]["overrides"] == ["sampling.first=2", "sampling.step=2", "sampling.act_first=false"]
    assert summary["first2_step2"]["against_fixed_w8"]["broken"] == 1
    assert choose(summary, tolerance=1.0) == "first2_step2"  # gate-0.3 is cheaper but 5 points below
    assert choose(summary, tolerance=0.0) == "first3_step2"
    assert choose(summary, tolerance=5.0) == "gate-0.3"


def test_paired_counts_fixed_and_broken():
    base = [{"valid": v} for v in (1, 1, 0, 0)]
    other = [{"valid": v} for v in (1, 0, 1, 1)]
    assert paired(base, other)["fixed"] == 2 and paired(base, other)["broken"] == 1
