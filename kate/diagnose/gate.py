"""The probe behind the gate (When2Tool, arXiv 2605.09252), and the gate's tau sweep.

``ProbeBelief`` is the belief ``kate.sampling.gate.GateSampler`` reads: When2Tool's all-layers
probe (``kate.diagnose.probes.When2ToolProbe``, saved by ``save_probe``) on the decision-point
hidden states of an ``hf`` client, read as ``sigmoid(logit / T)`` (T = 2). The hf model loads on
the first call, so a config that names it costs nothing until the gate acts.

The sweep does not rerun the model per tau. ``GateSweepTask`` runs each item three ways with the
acting task's own solve: ungated (``base``), with the "no tool" text prefilled (``no_tool``) and
with the tool text or call opening prefilled (``tool``), and records the item's belief. The ungated
run is the breakdown's (the same greedy solve, model and seed): given those records as ``base``,
it is read from them instead of generated again (a third of the sweep's cost; ``kate.diagnose.acted``).
``tau_sweep`` then reads, for every tau, the run the gate would have chosen (``gate_action``):
calls made, mismatch against necessity and accuracy, with and without the gate.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from kate.agent.policy import Policy
from kate.diagnose.acted import acted_runs, acted_sha256
from kate.diagnose.hidden import decision_states
from kate.diagnose.probes import When2ToolProbe, last_token_features
from kate.io import atomic_open
from kate.llm.base import Message, ToolSchema
from kate.sampling.gate import GATE_MODES, GateError, GateSampler, gate_action

DEFAULT_TEMPERATURE = 2.0  # When2Tool's T
SWEEP_RUNS = ("base", "no_tool", "tool")


def save_probe(path: str | Path, probe: When2ToolProbe, layers: Sequence[int], meta: Mapping[str, Any]) -> Path:
    """The probe, the hidden-state layers it reads and what it was trained on, as one ``.npz`` (atomically)."""
    buffer = io.BytesIO()
    np.savez(buffer, coef=probe.coef, intercept=np.array(probe.intercept), mean=probe.mean, scale=probe.scale,
             layers=np.array(list(layers), dtype=np.int64), meta=np.array(json.dumps(dict(meta), default=str)))  # fmt: skip
    with atomic_open(path, "wb") as fh:
        fh.write(buffer.getvalue())
    return Path(path)


def load_probe(path: str | Path) -> tuple[When2ToolProbe, tuple[int, ...], dict[str, Any]]:
    """(probe, layers, meta) from ``save_probe``'s file; a file that is not one is an error naming it."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no probe file (kate diagnose name=probes writes one)")
    try:
        with np.load(path, allow_pickle=False) as data:
            probe = When2ToolProbe(data["coef"], float(data["intercept"]), data["mean"], data["scale"])
            return probe, tuple(int(x) for x in data["layers"]), json.loads(str(data["meta"]))
    except (KeyError, ValueError, OSError) as exc:
        raise ValueError(f"{path}: not a kate probe file ({exc})") from None


@dataclass
class ProbeBelief:
    """``belief(messages, tools)``: When2Tool's probe on an hf client's decision-point states."""

    probe: str | None  # the .npz path; None: unset (a config to complete), an error at the first gated step
    hf: dict[str, Any] = field(default_factory=dict)  # HFChatModel keywords (model, device, dtype), loaded lazily
    temperature: float = DEFAULT_TEMPERATURE
    model: Any = None  # an hf client already loaded (tests, or the job's own), instead of ``hf``

    def __post_init__(self) -> None:
        if self.temperature <= 0:
            raise ValueError(f"the belief's temperature must be > 0, got {self.temperature!r}")
        self._probe, self.layers, self.meta, self.sha256 = None, (), {}, ""
        if self.probe is not None:
            self._probe, self.layers, self.meta = load_probe(self.probe)
            self.sha256 = hashlib.sha256(Path(self.probe).read_bytes()).hexdigest()

    def __repr__(self) -> str:
        return f"ProbeBelief(probe={self.probe!r}, sha256={self.sha256[:16]}, temperature={self.temperature})"

    def _model(self) -> Any:
        if self.model is None:
            if not self.hf.get("model"):
                raise ValueError("ProbeBelief needs an hf model: hf.model (a kate model name or path) or model=")
            from kate.llm.hf import HFChatModel

            self.model = HFChatModel(**self.hf)
        return self.model

    def __call__(self, messages: list[Message], tools: list[ToolSchema] | None) -> float:
        if self._probe is None:
            raise GateError("the gate has no probe: set sampling.belief.probe to the probe.npz that "
                            "`kate diagnose name=probes` writes (probes/probe.npz)")  # fmt: skip
        states = decision_states(self._model(), [(messages, tools)], k=1, layers=self.layers, progress=False)
        return float(self._probe.probability(last_token_features(states.states), self.temperature)[0])


def constant_belief(value: float) -> Any:
    """A belief that is always ``value`` (the sweep's forced runs)."""

    def belief(messages: list[Message], tools: list[ToolSchema] | None) -> float:
        return value

    return belief


@dataclass
class GateSweepTask:
    """Each item with a belief, run ungated, steered to no tool and steered to a tool (see above)."""

    acting: Any  # VerifiableTask or BFCLDecisionTask
    beliefs: Mapping[str, float]  # item id -> probe belief (items without one are left out)
    mode: str = "soft"
    texts: Mapping[str, str] = field(default_factory=dict)  # GateSampler's no_tool_text / tool_text / call_opening
    name: str = "gate"
    base: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # item id -> its ungated run's record

    def __post_init__(self) -> None:
        if self.mode not in GATE_MODES:
            raise ValueError(f"gate mode must be one of {GATE_MODES}, got {self.mode!r}")
        self._items = [item for item in self.acting.items() if item.id in self.beliefs]
        if not self._items:
            raise ValueError("no item of the set has a probe belief (run the probes first)")
        self.base = acted_runs(self.base)

    def items(self) -> Sequence[Any]:
        return self._items

    def describe(self) -> dict[str, Any]:
        beliefs = json.dumps({i.id: round(float(self.beliefs[i.id]), 6) for i in self._items}, sort_keys=True)
        out = {**self.acting.describe(), "diagnostic": "gate", "mode": self.mode, "texts": dict(self.texts),
               "beliefs_sha256": hashlib.sha256(beliefs.encode()).hexdigest()}  # fmt: skip
        if self.base:  # where the ungated runs come from is part of what the sweep is
            out["base_sha256"] = acted_sha256(self.base, [i.id for i in self._items])
        return out

    def data(self) -> Any:
        data = getattr(self.acting, "data", None)
        return data() if callable(data) else None

    def steered(self, policy: Policy, run: str) -> Policy:
        if run == "base":
            return policy
        gate = GateSampler(constant_belief(0.0 if run == "no_tool" else 1.0), tau=0.5, mode=self.mode,
                           inner=policy.sampler, **dict(self.texts))  # fmt: skip
        return replace(policy, sampler=gate)

    def solve(self, item: Any, policy: Policy, seed: int) -> dict[str, Any]:
        runs = {}
        for run in SWEEP_RUNS:
            if run == "base" and item.id in self.base:
                runs[run] = {**self.base[item.id], "from": "breakdown"}
                continue
            trace = self.acting.solve(item, self.steered(policy, run), seed)
            runs[run] = {**trace, **self.acting.score(item, trace)}
        return {"belief": float(self.beliefs[item.id]), "runs": runs}

    def score(self, item: Any, trace: Mapping[str, Any]) -> dict[str, Any]:
        runs = trace.get("runs", {})
        outcome = {run: {"called": bool(runs[run].get("called")), "valid": bool(runs[run].get("valid"))}
                   for run in SWEEP_RUNS if run in runs}  # fmt: skip
        return {"valid": bool(outcome.get("base", {}).get("valid")), "necessary": self.acting.necessary(item),
                "outcome": outcome}  # fmt: skip


def _rate(part: float, whole: int) -> float | None:
    return part / whole if whole else None


def tau_sweep(records: Sequence[Mapping[str, Any]], necessary: Mapping[str, bool], taus: Sequence[float],
              tau_high: float | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """One row per tau: the gated run's calls, mismatch and accuracy beside the ungated run's.

    A record needs ``belief`` and ``outcome`` (``GateSweepTask``); ``necessary`` labels every record.
    """
    missing = [r["id"] for r in records if r["id"] not in necessary]
    if missing:
        raise ValueError(f"{len(missing)} gate records have no necessity label, e.g. {missing[:3]}")
    n = len(records)
    base = [r["outcome"]["base"] for r in records]
    base_calls = sum(o["called"] for o in base)
    base_mismatch = _rate(sum(o["called"] != necessary[r["id"]] for o, r in zip(base, records)), n)
    base_accuracy = _rate(sum(o["valid"] for o in base), n)
    rows = []
    for tau in taus:
        actions = [gate_action(float(r["belief"]), tau, tau_high) for r in records]
        chosen = [r["outcome"]["base" if a == "none" else a] for r, a in zip(records, actions)]
        calls = sum(o["called"] for o in chosen)
        rows.append({
            "tau": tau, "n": n, "steered_no_tool": actions.count("no_tool"), "steered_tool": actions.count("tool"),
            "calls": calls, "calls_base": base_calls,
            "call_reduction": None if not base_calls else 1 - calls / base_calls,
            "mismatch": _rate(sum(o["called"] != necessary[r["id"]] for o, r in zip(chosen, records)), n),
            "mismatch_base": base_mismatch,
            "accuracy": _rate(sum(o["valid"] for o in chosen), n), "accuracy_base": base_accuracy,
        })  # fmt: skip
    return rows


def sweep_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The sweep as a markdown table."""

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}%"

    lines = ["| tau | n | steered no tool / tool | calls (ungated) | call change | mismatch (ungated) "
             "| accuracy (ungated) |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        change = "-" if not r["calls_base"] else f"{100 * (r['calls'] / r['calls_base'] - 1):+.1f}%"
        lines.append(f"| {r['tau']:g} | {r['n']} | {r['steered_no_tool']} / {r['steered_tool']} | {r['calls']} "
                     f"({r['calls_base']}) | {change} | {pct(r['mismatch'])} ({pct(r['mismatch_base'])}) | "
                     f"{pct(r['accuracy'])} ({pct(r['accuracy_base'])}) |")  # fmt: skip
    return "\n".join(lines) + "\n"
