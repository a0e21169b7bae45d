"""The eval stage of bench/train_cpu.py: the four arms on the fixed test-half slice.

Arms are conf/arm's ``direct`` and ``st_w8v`` (KATE: ST knowledge + width 8 with the schema-valid
vote), on the untrained model or on the trained one (llama.cpp with the LoRA adapter: the same engine
and cost). BFCL's slice is bench/bfcl.py's (8 entries of every single-turn category, 30
multi_turn_base dialogues, test halves); the untrained BFCL records are bench/bfcl.py's own
(bench/runs/direct, bench/runs/st_w8v), so only the trained arms run BFCL here. The own-tools test half
runs for the direct arms (OWN_TOOLS_ARMS): at width 8 a question takes ~7 minutes on 2 cores
(bench/own_tools.py's w8v), ~3.7 h an arm, and no knowledge is configured for that kind, so KATE there
would be the vote alone (bench/own_tools.py measures the knowledge and turn-end arms on that task).
"""

from __future__ import annotations

from pathlib import Path

from hydra.utils import instantiate

from kate.cli import CONF_DIR
from kate.eval.arms import compose_arm as kate_compose_arm, run_composed
from kate.tasks.bfcl import BFCLTask
from kate.tasks.own_tools import OwnToolsTask
from kate.train.eval_arms import ARM_CONFIG, OWN_TOOLS_ARMS, PARTS, check_arms

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "bench" / "runs" / "train"
UNTRAINED_BFCL = {"untrained_direct": ROOT / "bench" / "runs" / "direct", "untrained_kate": ROOT / "bench" / "runs" / "st_w8v"}
SINGLE, MULTI = 8, 30


def compose_arm(arm: str, adapter: Path | None, **over: object) -> dict:
    overrides = ["llm.max_parallel=8"]
    if adapter is not None:
        overrides.append(f"+llm.lora={adapter}")
    overrides += [f"{k}={v}" for k, v in over.items()]
    return kate_compose_arm(ARM_CONFIG[arm], overrides, conf_dir=CONF_DIR)


def bfcl_entries() -> list:
    from kate.bfcl.data import SINGLE_TURN, load_entries

    return [e for c in SINGLE_TURN for e in load_entries(c, "test", SINGLE)] + load_entries("multi_turn_base", "test", MULTI)


def run_arms(arms: list[str], adapter: Path, *, own_tools_max_steps: int, suffix: str = "",
             parts: tuple[str, ...] = PARTS) -> None:
    """The own-tools test half for the direct arms first (the short part), then BFCL for the trained arms;
    ``parts`` runs only some of the two."""
    models: dict[str, object] = {}
    check_arms(arms, parts)

    def model_for(arm: str, c: dict) -> object:
        key = "trained" if arm.startswith("trained") else "untrained"
        if key not in models:
            models[key] = instantiate(c["llm"])
        return models[key]

    for arm in (a for a in arms if a in OWN_TOOLS_ARMS and "own_tools" in parts):
        c = compose_arm(arm, adapter if arm.startswith("trained") else None, max_steps=own_tools_max_steps)
        run_composed(c, model_for(arm, c), OwnToolsTask("test"), RUNS / (arm + suffix) / "own_tools" / "seed_0",
                     arm=arm, desc=f"{arm}{suffix} own_tools")  # fmt: skip
    for arm in (a for a in arms if a.startswith("trained") and "bfcl" in parts):
        c = compose_arm(arm, adapter)
        run_composed(c, model_for(arm, c), BFCLTask(bfcl_entries(), "test"), RUNS / (arm + suffix) / "bfcl" / "seed_0",
                     arm=arm, desc=f"{arm}{suffix} bfcl")  # fmt: skip
