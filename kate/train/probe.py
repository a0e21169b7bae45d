"""The checkpoint probe: at every save, what the model being trained still does at a decision point.

Three measures, from Diagnostics II (one implementation each, ``kate.diagnose``):
- the first-token probe on held-out decision points (the RL part's first step of each turn, and its
  no-call steps): P(call opening), where a call is due and where none is;
- verbatim replay of training rows with greedy decoding (``ReplayTask``): a valid call emitted, strictly;
- near-miss negatives (``NearMissTask``): prompts naming the rows' tools that must not call;
and the task probe (``kate.train.task_probe``): held-out training-half items solved with the default
loop and scored by their tasks' checkers, whose best mean picks the run's checkpoint (``best/``).
One JSONL row per probe (``probe.jsonl``, with the step) and a PNG curve (``probe.png``), so an ability
erased by training shows when it happens. ``CheckpointProbe`` is the ``TrainerCallback`` (``on_save``,
and once at the start as step 0); ``probe_client`` runs the same on any ``hf`` client.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from kate.agent.policy import Policy
from kate.agent.settings import LoopSettings
from kate.diagnose.first_token import ProbePrompt, first_token_probe, probe_summary
from kate.diagnose.near_miss import NearMissTask, near_miss_items, no_call_summary
from kate.diagnose.replay import ReplayRow, ReplayTask, replay_summary
from kate.sampling.policy import GreedySampler
from kate.io import atomic_folder, atomic_open, atomic_write_text, read_jsonl
from kate.toolcall import ToolCall
from kate.train.task_probe import TaskProbeSet, best_step, engine_client, task_probe

PROBE_FILE = "probe.jsonl"
PLOT_FILE = "probe.png"
BEST_DIR = "best"  # the checkpoint the task probe chose: its adapter, and best.json
BEST_FILE = "best.json"
OPENINGS = ("<tool_call>", "```", '{"')


@dataclass
class ProbeSets:
    first_token: list[ProbePrompt]
    replay: list[ReplayRow]
    near_miss: NearMissTask
    tasks: TaskProbeSet | None = None
    task_max_steps: int = 4
    task_max_tokens: int = 256
    task_engine: str = "llamacpp"  # llamacpp: the saved adapter on llama.cpp (engine_client) | hf: the live model
    task_workers: int = 4
    items_from: str = "rl"  # the dataset part the task items were drawn from (recorded in each row)


def probe_sets(held_out: Sequence[Mapping[str, Any]], trained: Sequence[Mapping[str, Any]], *, first_token: int,
               replay: int, near_miss: int, seed: int = 0) -> ProbeSets:  # fmt: skip
    """Probe prompts from dataset rows: decision points of ``held_out`` rows, replay of ``trained`` rows."""
    rng = random.Random(seed)
    decision = [r for r in held_out if (r["kind"] == "call" and r["index"] == 0) or r["kind"] == "no_call"]
    picked = rng.sample(decision, min(first_token, len(decision)))
    prompts = [ProbePrompt(r["id"], r["category"], tuple(json.loads(r["prompt"])), tuple(json.loads(r["tools"])),
                           r["kind"] == "call") for r in picked]  # fmt: skip
    rows = rng.sample(list(trained), min(replay, len(trained)))
    replays = [ReplayRow(r["id"], r["category"], tuple(json.loads(r["prompt"])), tuple(json.loads(r["tools"])),
                         tuple(ToolCall.from_dict(c) for c in json.loads(r["target_calls"])),
                         r["target_answer"] or None) for r in rows]  # fmt: skip
    with_tools = [r for r in trained if json.loads(r["tools"])]
    sets = rng.sample(with_tools, min(near_miss, len(with_tools)))
    items = near_miss_items([(f"{k}", json.loads(r["tools"])) for k, r in enumerate(sets)], seed=seed)
    return ProbeSets(prompts, replays, NearMissTask(items, origin={"source": "training rows", "seed": seed}))


def probe_client(client: Any, sets: ProbeSets, *, max_tokens: int = 96, task_client: Any = None) -> dict[str, Any]:
    """The measures on an ``hf`` client (its ``model`` and ``tokenizer``), greedy; the task probe on
    ``task_client`` when given (the saved adapter on llama.cpp), else on ``client``."""
    policy = Policy(client, GreedySampler(max_tokens=max_tokens), settings=LoopSettings())  # what the probes measured
    out: dict[str, Any] = {}
    if sets.first_token:
        out["first_token"] = probe_summary(first_token_probe(client, sets.first_token, OPENINGS, batch_size=1))
    task = ReplayTask(sets.replay)
    records = [{"category": r.category, **task.score(r, task.solve(r, policy, 0))} for r in sets.replay]
    out["replay"] = replay_summary(records)["all"] if records else None
    near = sets.near_miss
    records = [{"category": i.category, **near.score(i, near.solve(i, policy, 0))} for i in near.items()]
    out["near_miss"] = no_call_summary(records)["all"] if records else None
    if sets.tasks is not None and sets.tasks.n:
        engine = task_client is not None
        out["tasks"] = task_probe(task_client or client, sets.tasks, max_tokens=sets.task_max_tokens,
                                  max_steps=sets.task_max_steps, workers=sets.task_workers if engine else 1)
        out["task_engine"] = "llamacpp" if engine else "hf"
    return out


def plot_probe(rows: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in rows]
    with_tasks = any(r.get("tasks") for r in rows)
    fig, axes = plt.subplots(1, 3 if with_tasks else 2, figsize=(15 if with_tasks else 10, 3.8))
    left, right = axes[0], axes[1]
    for block, label, style in (("call_due", "call due", "-o"), ("no_call_due", "no call due", "--s")):
        points = [(s, r["first_token"][block]["geomean"]) for s, r in zip(steps, rows)
                  if (r.get("first_token") or {}).get(block)]  # fmt: skip
        if points:
            left.plot([p[0] for p in points], [max(p[1], 1e-300) for p in points], style, label=label)
    left.set_yscale("log")
    left.set(xlabel="training step", ylabel="P(call opening), geometric mean", title="first-token probe (held out)")
    if left.get_legend_handles_labels()[0]:
        left.legend(fontsize=8)
    for key, field_, label in (("replay", "valid", "replay: right step (greedy)"),
                               ("replay", "format_valid", "replay: right form"),
                               ("near_miss", "no_call", "near-miss: no call (correct)")):  # fmt: skip
        points = [(s, r[key][field_]) for s, r in zip(steps, rows) if r.get(key)]
        if points:
            right.plot([p[0] for p in points], [p[1] for p in points], "-o", label=label)
    n = rows[-1]
    right.set(xlabel="training step", ylabel="share", ylim=(-0.02, 1.02),
              title=f"replay n={(n.get('replay') or {}).get('n')}, near-miss n={(n.get('near_miss') or {}).get('n')}")
    if right.get_legend_handles_labels()[0]:
        right.legend(fontsize=8)
    if with_tasks:
        plot_task_probe(axes[2], rows)
    fig.tight_layout()
    path = Path(path)
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=110)
    plt.close(fig)
    return path


def plot_task_probe(ax: Any, rows: Sequence[Mapping[str, Any]]) -> None:
    """The task probe's share solved per category and their mean, the chosen step marked."""
    scored = [r for r in rows if r.get("tasks")]
    categories = [c for c, v in scored[-1]["tasks"].items() if isinstance(v, Mapping)]
    for category in categories:
        points = [(r["step"], r["tasks"][category]["valid"]) for r in scored if category in r["tasks"]]
        n = scored[-1]["tasks"][category]["n"]
        ax.plot([p[0] for p in points], [p[1] for p in points], "-o", ms=3, lw=1, label=f"{category} (n={n})")
    means = [r["tasks"]["mean"] for r in scored]
    ax.plot([r["step"] for r in scored], means, "-D", color="black", lw=2.5, ms=5, label="mean")
    chosen = best_step(rows)
    if chosen is not None:
        ax.axvline(chosen, color="grey", ls=":", label=f"chosen: step {chosen}")
    ax.set(xlabel="training step", ylabel="share solved (greedy)", ylim=(-0.02, 1.02),
           title="task probe (held-out training-half items)")
    ax.legend(fontsize=7)


def keep_best(output_dir: str | Path, rows: Sequence[Mapping[str, Any]]) -> Path | None:
    """Make ``output_dir/best`` the task probe's best step of ``rows``: its checkpoint's adapter (no
    optimizer state) and ``best.json``, copied when best/ holds another step (or none), so checkpoint
    rotation never loses the chosen one. None when there is no best step yet, or its checkpoint is gone
    (best/ then keeps what it had)."""
    output_dir = Path(output_dir)
    step = best_step(rows)
    if step is None:
        return None
    target = output_dir / BEST_DIR
    try:
        held = json.loads((target / BEST_FILE).read_text())["step"]
    except (OSError, ValueError, KeyError):
        held = None
    if held == step:
        return target
    source = output_dir / f"checkpoint-{step}"
    if not source.is_dir():
        return None
    row = next(r for r in rows if r["step"] == step)
    skip = {"optimizer.pt", "scheduler.pt", "trainer_state.json", "training_args.bin"}
    with atomic_folder(target) as tmp:
        for path in source.iterdir():
            if path.is_file() and path.name not in skip and not path.name.startswith("rng_state"):
                shutil.copy2(path, tmp / path.name)
        rule = ("highest task-probe mean over its categories among the rows probed alike, the earlier step on ties; "
                "the start (step 0) excluded")
        atomic_write_text(tmp / BEST_FILE, json.dumps({"step": step, "rule": rule, "tasks": row["tasks"]}, indent=1))
    return target


def live_client(model: Any, tokenizer: Any, name: str = "training") -> Any:
    """An ``hf`` client over a model being trained (no reload)."""
    from kate.llm.hf import HFChatModel

    return HFChatModel.from_loaded(model, tokenizer, name=name)


class CheckpointProbe(TrainerCallback):
    """Probes the model at the start (step 0) and after every save; rows in ``<output_dir>/probe.jsonl``."""

    def __init__(self, sets: ProbeSets, output_dir: str | Path, *, max_tokens: int = 96, model: str | None = None,
                 init_adapter: str | None = None) -> None:  # fmt: skip
        self.sets, self.output_dir, self.max_tokens = sets, Path(output_dir), max_tokens
        self.model, self.init_adapter = model, init_adapter  # for the task probe's llama.cpp client

    def _task_client(self, step: int) -> Any:
        """llama.cpp with the adapter saved at ``step`` (the start: ``init_adapter``, or the base)."""
        if self.sets.tasks is None or not self.sets.tasks.n or self.sets.task_engine != "llamacpp":
            return None
        if self.model is None:
            raise ValueError("the task probe on llama.cpp needs the kate model the run trains (model=...)")
        adapter = self.output_dir / f"checkpoint-{step}" if step > 0 else self.init_adapter
        return engine_client(self.model, adapter, workers=self.sets.task_workers)

    def _rows(self) -> list[dict[str, Any]]:
        path = self.output_dir / PROBE_FILE
        return list(read_jsonl(path)) if path.exists() else []

    def probe(self, model: Any, tokenizer: Any, step: int) -> dict[str, Any]:
        rows = [r for r in self._rows() if r["step"] != step]
        was_training = model.training
        model.eval()
        task_client = None
        try:
            task_client = self._task_client(step)
            row = {"step": step, **probe_client(live_client(model, tokenizer), self.sets, max_tokens=self.max_tokens,
                                                task_client=task_client)}  # fmt: skip
        finally:
            if task_client is not None:
                task_client.close()
            if was_training:
                model.train()
        if self.sets.tasks is not None and "tasks" in row:
            row["tasks"]["items_from"] = self.sets.items_from
        rows = sorted([*rows, row], key=lambda r: r["step"])
        keep_best(self.output_dir, rows)  # before the row is written: a kill between the two loses no best/
        atomic_write_text(self.output_dir / PROBE_FILE, "".join(json.dumps(r) + "\n" for r in rows))
        plot_probe(rows, self.output_dir / PLOT_FILE)
        return row

    def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):  # noqa: ANN001
        if state.is_world_process_zero:
            if not any(r["step"] == state.global_step for r in self._rows()):
                self.probe(model, processing_class, state.global_step)
            keep_best(self.output_dir, self._rows())  # a resumed run: best/ as its rows say

    def on_save(self, args, state, control, model=None, processing_class=None, **kwargs):  # noqa: ANN001
        if state.is_world_process_zero:
            self.probe(model, processing_class, state.global_step)
