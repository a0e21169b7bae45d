"""The first-token probe (VectraYX's second and third rungs): the probability of the model's call
opening at the position where a call should start, over a probe set; and the same probe across a
folder of saved checkpoints, plotted on a log scale (an ability a training run erases shows up as a
prior falling by orders of magnitude, when it happens).

The probability is Diagnostics I's (one implementation, ``kate.diagnose.pcall``): per prompt,
``p_opening`` (``opening_probability``: the softmax mass of the opening tokens) and ``p_call``
(``p_call_from_logits``: the openings' mass against the best other token; with one opening, > 0.5
exactly when greedy decoding starts with it), from one batched forward pass
(``kate.diagnose.hidden.decision_states``) of an ``hf`` client. An opening that also starts prose
is counted as a call start: SmolLM2-135M opens Python code fences with ```` ``` ```` and never calls,
so ``probe_agreement`` against a run's parsed calls says how far to trust the openings chosen.

A probe set is a list of ``ProbePrompt`` (messages, tools, whether a call is due), made from replay
rows (``probes_from_replay``), near-miss items (``probes_from_near_miss``) or saved as JSONL
(``save_probe_set`` / ``load_probe_set``, so a training callback and a later command probe the same
prompts). The openings are strings (``DEFAULT_OPENINGS``: Hermes' ``<tool_call>``, a fence and the
bare ``{"`` that Qwen2.5-Coder-0.5B writes), turned into each checkpoint's first token ids.
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kate.diagnose.hidden import decision_states
from kate.diagnose.pcall import agreement, opening_ids, opening_probability, p_call_from_logits
from kate.io import atomic_open, atomic_write_text, read_jsonl
from kate.llm.base import Message, ToolSchema

DEFAULT_OPENINGS = ("<tool_call>", "```", '{"')
TRAJECTORY_FILE = "first_token_trajectory.jsonl"
PLOT_FILE = "first_token_trajectory.png"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


@dataclass(frozen=True)
class ProbePrompt:
    """A decision point: the messages and tools, and whether a call should start there."""

    id: str
    category: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSchema, ...] = ()
    expects_call: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "category": self.category, "messages": list(self.messages), "tools": list(self.tools),
                "expects_call": self.expects_call}  # fmt: skip


def probes_from_replay(rows: Sequence[Any]) -> list[ProbePrompt]:
    """Probe prompts from ``kate.diagnose.replay.ReplayRow``s (a call is due where the row's target is one)."""
    return [ProbePrompt(r.id, r.category, tuple(r.messages), tuple(r.tools), r.expects_call) for r in rows]


def probes_from_near_miss(task: Any) -> list[ProbePrompt]:
    """Probe prompts from a ``NearMissTask``'s items (no call is due at any of them)."""
    out = []
    for item in task.items():
        messages, tools = task.prompt(item)
        out.append(ProbePrompt(item.id, item.category, tuple(messages), tuple(tools), False))
    return out


def save_probe_set(path: str | Path, prompts: Sequence[ProbePrompt]) -> None:
    atomic_write_text(path, "".join(json.dumps(p.to_dict(), ensure_ascii=False) + "\n" for p in prompts))


def load_probe_set(path: str | Path) -> list[ProbePrompt]:
    """A probe set saved by ``save_probe_set``; a bad row raises naming the file and row."""
    prompts = []
    for number, row in enumerate(read_jsonl(path), start=1):
        try:
            prompts.append(ProbePrompt(str(row["id"]), str(row.get("category", "probe")),
                                       tuple(row["messages"]), tuple(row.get("tools") or ()),
                                       bool(row.get("expects_call", True))))  # fmt: skip
        except (KeyError, TypeError) as error:
            raise ValueError(f"{path}: row {number}: needs 'id' and 'messages' ({error})") from None
    return prompts


def probe_set_sha256(prompts: Sequence[ProbePrompt]) -> str:
    text = json.dumps([p.to_dict() for p in prompts], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def first_token_probe(model: Any, prompts: Sequence[ProbePrompt], openings: Sequence[str] = DEFAULT_OPENINGS, *,
                      batch_size: int = 4, prefill: str = "",
                      progress: bool = False) -> list[dict[str, Any]]:  # fmt: skip
    """Per prompt of an ``hf`` client: ``p_opening``, ``p_call`` and the argmax first token."""
    if not prompts:
        raise ValueError("the probe set is empty")
    ids = opening_ids(model.tokenizer, openings)

    def measure(logits: Any) -> tuple[float, float, int]:
        return opening_probability(logits, ids), p_call_from_logits(logits, ids), int(logits.argmax())

    states = decision_states(model, [(p.messages, p.tools or None) for p in prompts], k=1, layers=[-1],
                             batch_size=batch_size, prefill=prefill, next_token=measure, progress=progress,
                             desc="first-token probe")  # fmt: skip
    out = []
    for prompt, (p_opening, p_call, top) in zip(prompts, states.next_token or ()):
        out.append({"id": prompt.id, "category": prompt.category, "expects_call": prompt.expects_call,
                    "p_opening": p_opening, "p_call": p_call, "top_token": model.tokenizer.decode([top]),
                    "top_is_opening": top in ids})  # fmt: skip
    return out


def probe_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """For the prompts where a call is due and those where none is: n, mean / geometric mean /
    median / min of ``p_opening``, and the share with ``p_call > 0.5`` (greedy would start a call)."""

    def block(values: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
        if not values:
            return None
        p = [float(v["p_opening"]) for v in values]
        geomean = math.exp(sum(math.log(max(x, 1e-300)) for x in p) / len(p))
        return {"n": len(p), "mean": sum(p) / len(p), "geomean": geomean,
                "median": statistics.median(p), "min": min(p),
                "calls": sum(float(v["p_call"]) > 0.5 for v in values) / len(values)}  # fmt: skip

    return {"call_due": block([r for r in rows if r["expects_call"]]),
            "no_call_due": block([r for r in rows if not r["expects_call"]])}  # fmt: skip


def probe_agreement(rows: Sequence[Mapping[str, Any]], records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How often ``p_call > 0.5`` agrees with the greedy run's parsed calls (``pcall.agreement``), over
    the probe rows that have a record of the same id (a replay or near-miss run's records). An
    opening that also starts prose (a fence opening a code block) shows up as ``p_high_not_called``."""
    called = {r["id"]: bool(r.get("calls")) for r in records}
    matched = [r for r in rows if r["id"] in called]
    return agreement([float(r["p_call"]) for r in matched], [called[r["id"]] for r in matched])


def checkpoint_folders(folder: str | Path) -> list[tuple[int | None, Path]]:
    """``(step, path)`` of the checkpoints in ``folder``: TRL's ``checkpoint-<step>/`` folders by step;
    else any sub-folders that hold an HF model (``config.json`` or a PEFT ``adapter_config.json``),
    by name; else the folder itself when it is one."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder of checkpoints")
    is_model = lambda p: (p / "config.json").exists() or (p / "adapter_config.json").exists()  # noqa: E731
    found = [(int(m.group(1)), p) for p in folder.iterdir() if p.is_dir() and (m := _CHECKPOINT.match(p.name))]
    if found:
        missing = [p for _, p in found if not is_model(p)]
        if missing:
            raise ValueError(f"{missing[0]}: a checkpoint folder without config.json or adapter_config.json")
        return sorted(found)
    others = sorted(p for p in folder.iterdir() if p.is_dir() and is_model(p))
    if others:
        return [(_trainer_step(p), p) for p in others]
    if is_model(folder):
        return [(_trainer_step(folder), folder)]
    raise ValueError(f"{folder}: holds no checkpoint-*/ folders and no HF model folders")


def _trainer_step(path: Path) -> int | None:
    try:
        return int(json.loads((path / "trainer_state.json").read_text())["global_step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _load_hf(path: Path, device: str, dtype: str) -> Any:
    from kate.llm.hf import HFChatModel

    return HFChatModel(str(path), device=device, dtype=dtype)


def checkpoint_trajectory(folder: str | Path, probe_set: Sequence[ProbePrompt] | str | Path, *,
                          out_dir: str | Path | None = None, openings: Sequence[str] = DEFAULT_OPENINGS,
                          device: str = "auto", dtype: str = "float32", batch_size: int = 4,
                          load: Callable[[Path], Any] | None = None, base: Sequence[Mapping[str, Any]] | None = None,
                          base_name: str = "base model", progress: bool = True) -> list[dict[str, Any]]:  # fmt: skip
    """The first-token probe on every checkpoint of ``folder`` (``checkpoint_folders``), one JSONL
    row per checkpoint in ``out_dir`` (default: ``folder``) and a PNG of P(opening) on a log scale.

    Resumable: a checkpoint already in the JSONL for the same probe set and openings is not probed
    again. ``load(path)`` gives the client (default: the ``hf`` client on ``device`` / ``dtype``).
    ``base``: the untrained model's probe rows on the same prompts (``first_token_probe``), kept as
    the trajectory's step 0 (a trainer keeps only its last few checkpoints)."""
    prompts = load_probe_set(probe_set) if isinstance(probe_set, (str, Path)) else list(probe_set)
    out_dir = Path(out_dir) if out_dir is not None else Path(folder)
    jsonl = out_dir / TRAJECTORY_FILE
    key = {"probe_sha256": probe_set_sha256(prompts), "openings": list(openings)}
    kept = [r for r in (read_jsonl(jsonl) if jsonl.exists() else []) if all(r.get(k) == v for k, v in key.items())]
    if base is not None:
        if [r["id"] for r in base] != [p.id for p in prompts]:
            raise ValueError(f"the base model's probe rows are not of the probe set {key['probe_sha256'][:12]}")
        kept = [r for r in kept if r["path"] != "base"] + [{**key, "checkpoint": base_name, "path": "base", "step": 0,
                                                           "summary": probe_summary(base), "prompts": list(base)}]
    done = {r["path"] for r in kept}
    load = load or (lambda path: _load_hf(path, device, dtype))
    for step, path in checkpoint_folders(folder):
        if str(path) in done:
            continue
        model = load(path)
        rows = first_token_probe(model, prompts, openings, batch_size=batch_size, progress=progress)
        ids = opening_ids(model.tokenizer, openings)
        del model
        gc.collect()
        kept.append({**key, "checkpoint": path.name, "path": str(path), "step": step, "opening_ids": ids,
                     "summary": probe_summary(rows), "prompts": rows})  # fmt: skip
        _sort(kept)
        atomic_write_text(jsonl, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept))
    _sort(kept)
    atomic_write_text(jsonl, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept))
    plot_trajectory(kept, out_dir / PLOT_FILE)
    return kept


def _sort(rows: list[dict[str, Any]]) -> None:
    rows.sort(key=lambda r: (r["step"] is None, r["step"] or 0, r["path"] != "base", r["checkpoint"]))


def plot_trajectory(rows: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """P(opening) per checkpoint (geometric mean and min over the prompts where a call is due, and
    the geometric mean where none is), log scale; x is the training step (or the checkpoint's rank)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        raise ValueError("no checkpoints to plot")
    by_step = all(r.get("step") is not None for r in rows)
    xs = [r["step"] if by_step else i for i, r in enumerate(rows)]
    fig, ax = plt.subplots(figsize=(6, 3.8))
    lines = (("call_due", "geomean", "call due: geometric mean", "-o"), ("call_due", "min", "call due: min", ":o"),
             ("no_call_due", "geomean", "no call due: geometric mean", "--s"))  # fmt: skip
    for block, stat, label, style in lines:
        points = [(x, r["summary"][block][stat]) for x, r in zip(xs, rows) if r["summary"].get(block)]
        if points:
            ax.plot([p[0] for p in points], [max(p[1], 1e-300) for p in points], style, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("training step" if by_step else "checkpoint")
    if not by_step:
        ax.set_xticks(xs, [r["checkpoint"] for r in rows], rotation=30, ha="right")
    ax.set_ylabel("P(call opening) at the decision point")
    n = rows[-1]["summary"]
    ax.set_title(f"first-token probe (n={sum((n[b] or {}).get('n', 0) for b in ('call_due', 'no_call_due'))})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=120)
    plt.close(fig)
    return path
