"""An arm composed and run the way the benchmark scripts do it: ``kate eval``'s config composed with
overrides (``arm=<name>``, a sampler, loop settings, ``llm.model=...``), then policy, result folder
and the resumable runner (``kate.eval.arm``'s pieces, in the order ``kate eval`` uses them) over a
task the caller chose.

    c = compose_arm("st_w8v", ["llm.max_parallel=8"], conf_dir=CONF_DIR)
    records = run_composed(c, instantiate(c["llm"]), BFCLTask(entries, "test"), runs / "st_w8v" / "seed_0", arm="st_w8v")

``conf_dir`` is ``kate.cli.CONF_DIR``; importing ``kate.cli`` (or ``kate.configs``) registers the job
schemas that composing needs. Both live above this package, so the caller brings them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig

from kate.agent.policy import Policy
from kate.eval.arm import arm_config, build_policy, loop_settings
from kate.eval.config import plain
from kate.eval.run_store import RunStore
from kate.eval.runner import open_run, run_task
from kate.llm.base import ChatModel
from kate.tasks.base import Task


def compose_eval(overrides: Sequence[str], *, conf_dir: str | Path) -> DictConfig:
    """``kate eval``'s config from ``conf_dir`` with ``overrides`` (Hydra's syntax), unresolved."""
    if "eval_schema.yaml" not in ConfigStore.instance().list(""):
        raise RuntimeError("the job schemas are not registered: import kate.configs before composing")
    with initialize_config_dir(str(conf_dir), version_base="1.3"):
        return compose("eval", overrides=list(overrides))


def compose_arm(arm: str | None, overrides: Sequence[str] = (), *, conf_dir: str | Path) -> dict[str, Any]:
    """The resolved config of ``arm=<arm>`` (None: conf/eval.yaml's default arm) with ``overrides`` after it,
    as plain containers."""
    return plain(compose_eval([*([f"arm={arm}"] if arm is not None else []), *overrides], conf_dir=conf_dir))


def open_arm(c: Mapping[str, Any], model: ChatModel, task: Task, folder: str | Path, *, arm: str, seed: int = 0,
             workers: int = 1) -> tuple[Policy, RunStore]:  # fmt: skip
    """(policy, result folder) of a composed arm on ``task``; a folder holding another configuration is
    refused, one holding this one resumes."""
    settings = loop_settings(c)
    knowledge = c.get("knowledge")
    policy = build_policy(model, c["sampling"], knowledge, settings)
    config = arm_config(c["llm"], c["sampling"], knowledge, settings)
    return policy, open_run(folder, arm=arm, task=task, policy=policy, seed=seed, config=config, workers=workers)


def run_composed(c: Mapping[str, Any], model: ChatModel, task: Task, folder: str | Path, *, arm: str,
                 seed: int = 0, workers: int = 1, desc: str | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Run (or resume) a composed arm on ``task`` into ``folder``; returns its records."""
    policy, store = open_arm(c, model, task, folder, arm=arm, seed=seed, workers=workers)
    return run_task(task, policy, store, seed=seed, workers=workers, desc=desc)
