"""Choosing the adaptive vote's settings on stored training-half records, by one rule fixed in advance.

Three kinds of run feed it (bench/full.py's ``select_*`` parts, single-turn, the training half):

- a fixed width-8 run: its 8 stored samples replay every ``first`` / ``step`` rule
  (``AdaptiveWidthSampler.replay`` takes them in order, as the live sampler would have drawn them);
- a run of the greedy gate that never commits (``gate_logprob`` above 0): each step keeps its greedy
  sample (the pool's first) and its mean token log-probability, then goes on as the adaptive vote
  would after a gate that did not commit; so every threshold ``t`` replays exactly: the greedy call
  (1 sample) where it is a schema-valid call with confidence >= ``t``, else the step as recorded;
- a run of a cooler first draw (``first_temperature``), scored as it ran.

Every rule is scored by BFCL's official checker and paired entry by entry with the fixed width-8
vote. The rule (``choose``), written before any selection record existed: the rule with the fewest
mean samples among those whose right answers are at least the fixed width-8 vote's minus
``tolerance`` points; ties go to more right answers. Its overrides are what the benchmark's
adaptive arm runs with on the test half.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from kate.bfcl.checkers import score_single_turn
from kate.bfcl.data import BFCLEntry
from kate.eval.revote import revote_record, stored_samples
from kate.sampling.adaptive import AdaptiveWidthSampler
from kate.sampling.vote import AGGREGATORS

FIRST_STEP = {f"first{k}_step2{'_act_first' if act else ''}": {"first": k, "step": 2, "act_first": act}
              for k in (2, 3, 4) for act in (False, True)}  # fmt: skip
THRESHOLDS = (-0.01, -0.02, -0.05, -0.1, -0.2, -0.3, -0.5)
RULE = ("the rule with the fewest mean samples among those whose right answers on the selection set are at least "
        "the fixed width-8 vote's minus `tolerance` points; ties go to more right answers (fixed before any "
        "selection record existed)")


def paired(base: Sequence[Mapping], other: Sequence[Mapping]) -> dict[str, Any]:
    """Entries fixed and broken against ``base``, and the difference in points with its 95% interval."""
    diffs = [int(bool(b["valid"])) - int(bool(a["valid"])) for a, b in zip(base, other, strict=True)]
    mean = statistics.fmean(diffs) if diffs else 0.0
    half = 1.96 * statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else 0.0
    return {"fixed": diffs.count(1), "broken": diffs.count(-1), "points": round(100 * mean, 1),
            "ci95": [round(100 * (mean - half), 1), round(100 * (mean + half), 1)]}  # fmt: skip


def width_records(records: Sequence[Mapping]) -> list[Mapping]:
    """The single-turn records of a width run that keep their samples and vote."""
    return [r for r in records if r.get("outputs") and (r.get("vote") or {}).get("candidates")]


def replay_first_step(records: Sequence[Mapping], entries: Mapping[str, BFCLEntry],
                      rules: Mapping[str, Mapping[str, Any]] = FIRST_STEP) -> dict[str, dict]:  # fmt: skip
    """{rule: {"scored": per-record scores, "drawn": samples per record}}, and ``fixed_w8``."""
    out = {"fixed_w8": {"scored": [revote_record(entries[r["id"]], dict(r), "valid_majority") for r in records],
                        "drawn": [len(r["outputs"]) for r in records]}}  # fmt: skip
    for name, settings in rules.items():
        sampler = AdaptiveWidthSampler(n=8, **settings)
        scored, drawn = [], []
        for record in records:
            entry = entries[record["id"]]
            step = sampler.replay(stored_samples(dict(record)), entry.tools)
            parse_error = record.get("parse_error") if step.vote.failed else None
            scored.append(score_single_turn(entry, list(step.calls), parse_error))
            drawn.append(step.vote.adaptive["drawn"])
        out[name] = {"scored": scored, "drawn": drawn}
    return out


def greedy_gate(record: Mapping, entry: BFCLEntry) -> tuple[float | None, dict[str, Any] | None]:
    """(the greedy sample's confidence, its score when it is a schema-valid call, else None)."""
    gate = ((record.get("vote") or {}).get("adaptive") or {}).get("gate") or {}
    greedy = stored_samples(dict(record))[0]
    vote = AGGREGATORS["valid_majority"](None, [], entry.tools, [greedy])
    if vote.failed or vote.chosen.kind != "call" or vote.chosen.valid is False:
        return gate.get("mean_logprob"), None
    return gate.get("mean_logprob"), score_single_turn(entry, list(vote.chosen.calls))


def replay_gate(records: Sequence[Mapping], entries: Mapping[str, BFCLEntry],
                thresholds: Sequence[float] = THRESHOLDS) -> dict[str, dict]:  # fmt: skip
    """{f"gate{t}": {"scored", "drawn"}}: the greedy call where the gate would have committed."""
    gates = [greedy_gate(r, entries[r["id"]]) for r in records]
    out = {}
    for t in thresholds:
        scored, drawn = [], []
        for record, (confidence, greedy) in zip(records, gates):
            commits = greedy is not None and confidence is not None and confidence >= t
            scored.append(greedy if commits else record)
            drawn.append(1 if commits else record["vote"]["adaptive"]["drawn"])
        out[f"gate{t}"] = {"scored": scored, "drawn": drawn, "overrides": [f"sampling.gate_logprob={t}"]}
    return out


def as_ran(records: Sequence[Mapping], overrides: list[str]) -> dict[str, Any]:
    """A live run scored as it ran (its records' own verdicts and samples drawn)."""
    drawn = [((r.get("vote") or {}).get("adaptive") or {}).get("drawn") or 1 for r in records]
    return {"scored": list(records), "drawn": drawn, "overrides": overrides}


def overrides_of(name: str) -> list[str]:
    if name == "fixed_w8":  # all 8 at once, voted as scored (the plain schema-valid vote, not act-first)
        return ["sampling.first=8", "sampling.act_first=false"]
    settings = FIRST_STEP[name]
    return [f"sampling.first={settings['first']}", f"sampling.step={settings['step']}",
            f"sampling.act_first={str(settings['act_first']).lower()}"]  # fmt: skip


def summarize(rules: Mapping[str, Mapping[str, Any]]) -> dict[str, dict]:
    """Per rule: right answers, mean samples, the pairing with fixed width 8, and its overrides."""
    base = rules["fixed_w8"]["scored"]
    return {name: {"right": sum(bool(s["valid"]) for s in r["scored"]), "n": len(r["scored"]),
                   "samples": round(statistics.fmean(r["drawn"]), 2), "against_fixed_w8": paired(base, r["scored"]),
                   "overrides": r.get("overrides") or overrides_of(name)}
            for name, r in rules.items()}  # fmt: skip


def choose(summary: Mapping[str, Mapping[str, Any]], tolerance: float = 1.0) -> str:
    """The fewest mean samples among rules within ``tolerance`` points of fixed width 8 (see the module)."""
    floor = summary["fixed_w8"]["right"] - tolerance / 100 * summary["fixed_w8"]["n"]
    within = [name for name, s in summary.items() if s["right"] >= floor]
    return min(within, key=lambda name: (summary[name]["samples"], -summary[name]["right"], name))
