"""The training benchmark's eval arms (bench/train_cpu.py's eval stage, bench/bench_train_eval.py): which
arm config each arm composes, which parts (tasks) exist, and which adapter a trained arm runs on, read
from the training runs' folders (``<runs>/<stage>/final/``): the pipeline's (GRPO's when it finished,
else SFT's), or a named stage's, whose records then go to ``<arm>_<stage>`` (``adopt``: the adapter
``<runs>/adopt.json`` chose)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

ARM_CONFIG = {"untrained_direct": "direct", "trained_direct": "direct", "untrained_kate": "st_w8v",
              "trained_kate": "st_w8v"}  # fmt: skip
PARTS = ("own_tools", "bfcl")
OWN_TOOLS_ARMS = ("untrained_direct", "trained_direct")
ADOPTED = "adopt"  # --adapter adopt: the adapter <runs>/adopt.json chose


def check_arms(arms: Sequence[str], parts: Sequence[str]) -> None:
    """Refuse an unknown arm or part before any model loads."""
    unknown = [a for a in arms if a not in ARM_CONFIG]
    if unknown:
        raise SystemExit(f"unknown arm {unknown[0]!r}; arms: {', '.join(ARM_CONFIG)}")
    unknown_parts = [p for p in parts if p not in PARTS]
    if unknown_parts:
        raise SystemExit(f"unknown part {unknown_parts[0]!r}; parts: {', '.join(PARTS)}")


def finished(folder: Path) -> bool:
    """A training run that wrote its final adapter and its summary."""
    return (folder / "final" / "adapter_config.json").exists() and (folder / "summary.json").exists()


def adopted_adapter(runs: Path) -> Path:
    """The adapter ``<runs>/adopt.json`` chose (kate.train.adopt; its path relative to the repository,
    three folders above ``runs``)."""
    path = runs / f"{ADOPTED}.json"
    adapter = json.loads(path.read_text()).get("adapter") if path.exists() else None
    if not adapter:
        raise SystemExit(f"{path}: no adapter chosen (bench/train_cpu.py --stages adopt_choose)")
    return runs.parents[2] / adapter


def adapter_of(runs: Path, stage: str) -> Path:
    return runs / stage / "final" / "adapter.gguf"


def trained_adapter(runs: Path) -> Path:
    """The adapter the trained arms use: GRPO's when it finished, else SFT's."""
    for stage in ("grpo", "sft"):
        if finished(runs / stage):
            return adapter_of(runs, stage)
    raise SystemExit("no trained adapter yet: run the sft stage first")


def eval_plan(arms: Sequence[str], adapter_stage: str | None, runs: Path) -> tuple[list[str], Path, str]:
    """(arms, adapter, folder suffix) of the eval stage: every arm on the pipeline's adapter, or only the
    trained arms on ``adapter_stage``'s, their folders suffixed ``_<stage>``."""
    if adapter_stage is None:
        return list(arms), trained_adapter(runs), ""
    if adapter_stage == ADOPTED:
        return [a for a in arms if a.startswith("trained")], adopted_adapter(runs), f"_{ADOPTED}"
    if not finished(runs / adapter_stage):
        raise SystemExit(f"{runs / adapter_stage}: no finished training run there")
    return [a for a in arms if a.startswith("trained")], adapter_of(runs, adapter_stage), f"_{adapter_stage}"
