"""`kate diagnose`: the knowing-doing diagnostics on one verifiable set, one result folder
each under ``out_dir``, resumable (a rerun of the same command redoes only what is missing)::

    kate diagnose name=necessity set=arithmetic arithmetic.n=1000   # N samples per item, no tools
    kate diagnose name=breakdown set=bfcl                           # the four-way table
    kate diagnose name=probes        # hidden-state probes (the paper's grid, When2Tool's), P(call) too
    kate diagnose name=pcall         # P(call) at the decision point (the same forward pass)
    kate diagnose name=plan          # plan vs execute
    kate diagnose name=gate gate.mode=hard   # the probe-triggered gate's tau sweep
    kate diagnose name=replay set=bfcl replay.limit=20       # Diagnostics II: verbatim replay (greedy)
    kate diagnose name=near_miss near_miss.limit=20          # near-miss negatives: the correct no-call rate
    kate diagnose name=first_token llm=hf                    # P(call opening) over replay + near-miss prompts
    kate diagnose name=trajectory trajectory.folder=runs/train/x   # the same probe over saved checkpoints
    kate diagnose name=keyword [keyword.run=runs/bfcl/...]   # strict vs keyword scoring on stored records
    kate diagnose name=toolsense toolsense.queries_per_tier=100   # ToolSense's tool-knowledge probes
    kate diagnose name=all           # every one of them (skip=[...] leaves some out), then report.md + PNGs

Each diagnostic runs what it needs first (the breakdown needs necessity labels, the probes need the
breakdown's calls, the gate needs the probes' beliefs); done work is read back, not redone.
Necessity, breakdown, plan and gate are tasks run by kate's one runner (``necessity/``,
``breakdown/``, ``plan/``, ``gate_<mode>/``: ``meta.json`` + ``records.jsonl``, and a
``summary.json``); probes and P(call) are one batched hidden-state pass of the ``hf`` client
(``probes/``: ``results.json``, ``items.jsonl``, ``probe.npz`` for the gate; ``pcall/results.json``).
Without an hf client (``hf=null`` and a non-hf ``llm``) those and the gate are skipped, saying so.

Diagnostics II run whatever the set: ``replay/`` and ``near_miss/`` (runner folders and a
``summary.json``), ``first_token/`` (``probe_set.jsonl``, ``results.json``; an hf client),
``trajectory/`` (``first_token_trajectory.jsonl`` + PNG; ``trajectory.folder``), ``keyword/summary.json``
and ``toolsense/`` (``kate.diagnose.toolsense_run``). With ``name=all`` a rung that lacks its hf
client or folder is skipped, saying why; named alone it is an error.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig

from kate.agent.policy import Policy
from kate.agent.settings import LoopSettings
from kate.diagnose import internals
from kate.diagnose.breakdown import PAPER_ARITHMETIC_MISMATCH, four_way, four_way_by
from kate.diagnose.gate import GateSweepTask, sweep_markdown, tau_sweep
from kate.diagnose_setup import build_set, check_config
from kate.diagnose.necessity import (NecessityCache, NecessityConfig, NecessityTask, config_dict,
                                     counts_from_records, label_summary, labels_for, weights_sha256)  # fmt: skip
from kate.diagnose.plan_execute import PLAN_INSTRUCTIONS, PlanExecuteTask, plan_execute_summary
from kate.diagnose.report import write_report
from kate.diagnose.ladder_jobs import HF_TARGET, LadderJobs
from kate.eval.arm import fingerprinted_llm
from kate.eval.config import plain
from kate.eval.runner import REDONE, open_run, run_task
from kate.io import atomic_write_json
from kate.llm.base import supports
from kate.llm.identity import model_identity
from kate.sampling.policy import GreedySampler

DIAGNOSTICS = ("necessity", "breakdown", "probes", "pcall", "plan", "gate", "replay", "near_miss", "first_token",
               "trajectory", "keyword", "toolsense")

# build_set and check_config live in kate.diagnose_setup; importable from here too
__all__ = ["DIAGNOSTICS", "Diagnosis", "build_set", "check_config", "fingerprint", "run_diagnose"]


@dataclass
class Diagnosis(LadderJobs):
    """One `kate diagnose` job: the config, the set, the models (loaded when first needed)."""

    c: dict[str, Any]
    acting: Any = None
    done: dict[str, Any] = field(default_factory=dict)
    _model: Any = None
    _hf: Any = None

    def __post_init__(self) -> None:
        self.out = Path(self.c["out_dir"] or f"runs/diagnose/{self.c['set']}")
        self.acting = build_set(self.c) if self.acting is None else self.acting

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = instantiate(self.c["llm"])
        return self._model

    def hf(self) -> Any:
        """The hf client internals come from: the acting model when it is one, else ``hf``; None: none."""
        if self._hf is None:
            if self.c["llm"].get("_target_") == HF_TARGET:
                self._hf = self.model
            elif self.c["hf"] and self.c["hf"].get("model", True) is not None:  # hf.model null: no hf client
                self._hf = instantiate(self.c["hf"])
        return self._hf

    def policy(self) -> Policy:
        return Policy(
            self.model, GreedySampler(self.c["max_tokens"]), settings=LoopSettings(max_steps=self.c["max_steps"])
        )

    def run(self, folder: str, task: Any, config: Mapping[str, Any]) -> list[dict[str, Any]]:
        policy = self.policy()
        config = {"llm": fingerprinted_llm(self.c["llm"]), **config}
        store = open_run(self.out / folder, arm=folder, task=task, policy=policy, seed=self.c["seed"], config=config,
                         workers=self.c["workers"])  # fmt: skip
        return run_task(task, policy, store, seed=self.c["seed"], workers=self.c["workers"], desc=folder)

    # ------------------------------------------------------------------ the diagnostics

    def necessity(self) -> dict[str, bool]:
        """``{item id: necessary}`` (the data's own where given, else measured at r)."""
        if "necessity" in self.done:
            return self.done["necessity"]
        items = list(self.acting.items())
        config = NecessityConfig(**{k: v for k, v in self.c["necessity"].items() if k != "cache_dir"})
        measured = [i for i in items if self.acting.necessary(i) is None]
        counts: dict[str, int] = {}
        if measured:
            counts = self._counts(measured, config)
            summary = {"n": len(measured), "config": config_dict(config), "labels": label_summary(counts, config),
                       "histogram": {k: sum(v == k for v in counts.values()) for k in range(config.samples + 1)},
                       "model": model_identity(self.model)}  # fmt: skip
            if config.stop_early:  # stopped items' counts are lower bounds
                summary["stop_after_wrong"] = config.stop_after_wrong
            atomic_write_json(self.out / "necessity" / "summary.json", summary)
        known = {i.id: bool(self.acting.necessary(i)) for i in items if self.acting.necessary(i) is not None}
        labels = {**known, **labels_for(measured, counts, config.samples, config.r)} if measured else known
        self.done["necessity"] = labels
        self.done["counts"] = (counts, config)
        return labels

    def _counts(self, items: list[Any], config: NecessityConfig) -> dict[str, int]:
        task = NecessityTask(items, config)
        cache, key = self._cache(task)
        if cache is not None:
            cached = cache.load(*key)
            if cached is not None and all(i.id in cached for i in items):
                return {i.id: cached[i.id] for i in items}
        counts = counts_from_records(self.run("necessity", task, {}))
        if cache is not None:
            cache.save(*key, counts)
        return counts

    def _cache(self, task: NecessityTask) -> tuple[NecessityCache | None, tuple]:
        folder = self.c["necessity"]["cache_dir"]
        try:
            sha = weights_sha256(self.model) if folder else None
        except ValueError:  # e.g. a scripted model: no weights to key the cache by
            sha = None
        if sha is None:
            return None, ()
        return NecessityCache(folder), (sha, task.describe()["items_sha256"], task.config.sampling(self.c["seed"]))

    def breakdown(self) -> list[dict[str, Any]]:
        if "breakdown" in self.done:
            return self.done["breakdown"]
        labels = self.necessity()
        records = self.run(
            "breakdown", self.acting, {"max_tokens": self.c["max_tokens"], "max_steps": self.c["max_steps"]}
        )
        called = {r["id"]: bool(r.get("called")) for r in records}
        counts, config = self.done["counts"]
        if counts:  # measured necessity: the table at every reported r (the configured one first)
            items = list(self.acting.items())
            tables = {f"r={r}": four_way(labels_for(items, counts, config.samples, r), called).to_dict()
                      for r in config.reported}  # fmt: skip
        else:
            tables = {"data": four_way(labels, called).to_dict()}
        group = {r["id"]: r["category"] for r in records}
        by = {g: t.to_dict() for g, t in four_way_by(labels, called, group).items()}
        accuracy = sum(bool(r.get("valid")) for r in records) / max(len(records), 1)
        atomic_write_json(self.out / "breakdown" / "summary.json", {
            "set": self.c["set"], "n": len(records), "four_way": tables, "by_category": by, "accuracy": accuracy,
            "paper_arithmetic_mismatch": list(PAPER_ARITHMETIC_MISMATCH), "model": model_identity(self.model)})  # fmt: skip
        self.done["breakdown"] = records
        return records

    def internals(self) -> dict[str, Any] | None:
        """Probes and P(call) (one hidden-state pass); None when no hf client is configured."""
        if "internals" in self.done:
            return self.done["internals"]
        labels, records = self.necessity(), self.breakdown()
        model = self.hf()
        if model is None:
            print("kate diagnose: probes, P(call) and the gate need an hf client (hf=... or llm=hf); skipped")
            self.done["internals"] = None
            return None
        self.done["internals"] = internals.run_internals(
            model, self.acting, labels, records, self.out, probes=self.c["probes"], pcall=self.c["pcall"],
            temperature=self.c["gate"]["temperature"], progress=self.c["progress"])  # fmt: skip
        return self.done["internals"]

    def plan(self) -> dict[str, Any]:
        labels = self.necessity()
        order = self.c["plan"]["order"]
        folder = "plan" if order == "call_first" else f"plan_{order}"
        task = PlanExecuteTask(self.acting, max_tokens=self.c["plan"]["max_tokens"], executions=self._acted(),
                               instruction=PLAN_INSTRUCTIONS[order])  # fmt: skip
        records = self.run(folder, task, {"max_tokens": self.c["max_tokens"], "max_steps": self.c["max_steps"]})
        summary = {**plan_execute_summary(records, labels), "order": order}
        atomic_write_json(self.out / folder / "summary.json", summary)
        return summary

    def gate(self) -> list[dict[str, Any]] | None:
        g = self.c["gate"]
        if not supports(self.model, "prefill"):
            raise ValueError(
                f"the gate prefills answers; llm {self.model.name!r} does not take prefill= (use llm=llamacpp or llm=hf)"
            )
        labels = self.necessity()
        beliefs = self._beliefs()
        if beliefs is None:
            return None
        texts = {"no_tool_text": g["no_tool_text"], "tool_text": g["tool_text"], "call_opening": g["call_opening"]}
        task = GateSweepTask(self.acting, beliefs, mode=g["mode"], texts=texts, base=self._acted())
        folder = f"gate_{g['mode']}"
        records = self.run(folder, task, {"max_tokens": self.c["max_tokens"], "max_steps": self.c["max_steps"]})
        rows = tau_sweep(records, labels, g["taus"], g["tau_high"])
        atomic_write_json(self.out / folder / "sweep.json", {"mode": g["mode"], "tau_high": g["tau_high"],
                                                            "held_out_only": g["held_out_only"], "rows": rows})  # fmt: skip
        print(sweep_markdown(rows))
        return rows

    def _acted(self) -> dict[str, dict[str, Any]]:
        """The breakdown's greedy runs, which plan's execution and the gate's ungated run read back."""
        return {r["id"]: r for r in self.breakdown() if r.get("error_type") not in REDONE}

    def _beliefs(self) -> dict[str, float] | None:
        g = self.c["gate"]
        if g["beliefs"]:
            path = Path(g["beliefs"])
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                return {str(k): float(v) for k, v in data.items()}
            except (OSError, ValueError, AttributeError, TypeError) as exc:
                raise ValueError(f"gate.beliefs {path}: not a JSON object of item id -> belief ({exc})") from None
        found = self.internals()
        if found is None or found.get("beliefs") is None:
            why = "the probes need an hf client" if found is None else (
                f"When2Tool's probe: {found['probes']['when2tool']['necessity'].get('error')}")  # fmt: skip
            print(f"kate diagnose: no probe beliefs for the gate ({why}); skipped")
            return None
        return {i: p for i, (p, split) in found["beliefs"].items() if split == "test" or not g["held_out_only"]}


def fingerprint(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def run_diagnose(cfg: DictConfig, acting: Any = None) -> dict[str, Any]:
    """The plain function `kate diagnose` calls (tests call it too); ``acting`` replaces the set."""
    c = plain(cfg)
    check_config(c)
    job = Diagnosis(c, acting)
    names = tuple(n for n in DIAGNOSTICS if n not in c["skip"]) if c["name"] == "all" else (c["name"],)
    out: dict[str, Any] = {}
    for name in names:
        if name == "necessity":
            labels = job.necessity()
            out[name] = {"n": len(labels), "necessary": sum(labels.values())}
        elif name == "breakdown":
            out[name] = json.loads((job.out / "breakdown" / "summary.json").read_text()) if job.breakdown() else None
        elif name in ("probes", "pcall"):
            found = job.internals()
            out[name] = None if found is None else found[name]
        elif name == "plan":
            out[name] = job.plan()
        elif name == "gate":
            if supports(job.model, "prefill") or c["name"] == "gate":
                out[name] = job.gate()
            else:
                print(f"kate diagnose: the gate needs a client that takes prefill= (llm=llamacpp or llm=hf); skipped")
                out[name] = None
        else:  # the Diagnostics II rungs
            out[name] = getattr(job, name)()
    if c["name"] == "all":
        out["report"] = str(write_report(job.out))
        print(f"kate diagnose: {out['report']}")
    return out
