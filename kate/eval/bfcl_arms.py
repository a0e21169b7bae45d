"""The arms of the BFCL benchmark (bench/bfcl.py) on KATE's test halves: each a named arm config
(``conf/arm/<arm>.yaml``), composed exactly as ``kate eval arm=<arm> llm.max_parallel=8`` composes it
(``llm.model=<name>`` for another model), and which arms run only multi-turn dialogues or take their
single-turn records from another arm's samples, voted again."""

from __future__ import annotations

from pathlib import Path

from kate.eval.arms import compose_arm as kate_compose_arm
from kate.eval.bfcl_report import ARMS
from kate.eval.model_folders import model_overrides

LLM_OVERRIDES = ["llm.max_parallel=8"]  # what every committed arm ran with (width 8 in one round)
MULTI_ONLY = {"es", "sic", "tic"}  # ES / SIC / TIC were written for the multi-turn training halves only
# Single-turn records of these arms are the source arm's stored samples voted again with the arm's
# rule (kate.eval.revote: exactly what a live run would choose from the same request); their
# multi-turn dialogues run live, since another choice changes every later step.
REVOTED_FROM = {"st_w8v": "st_w8", "st_calls_w8f": "st_calls_w8v"}


def compose_arm(arm: str, model: str | None = None, *, conf_dir: str | Path) -> dict:
    """The arm's resolved config, as `kate eval arm=<arm>` composes it (``llm.model=<model>`` when given);
    an arm outside ARMS is refused."""
    if arm not in ARMS:
        raise SystemExit(f"unknown arm {arm!r}; arms: {', '.join(ARMS)}")
    return kate_compose_arm(arm, [*LLM_OVERRIDES, *model_overrides(model)], conf_dir=conf_dir)
