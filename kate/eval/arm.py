"""An arm: a policy built from config nodes (sampler, knowledge) and the job's loop settings, run
over a task for one or more seeds, one result folder per seed. ``kate eval``, ``kate main`` and
``bench/bfcl.py`` build and run arms only through here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from hydra.errors import InstantiationException

from kate.agent.policy import Policy
from kate.agent.settings import LoopSettings
from kate.eval.config import check_target, instantiate
from kate.eval.runner import open_run, run_task
from kate.llm.base import ChatModel
from kate.retrieval.knowledge import make_knowledge
from kate.tasks.base import Task

LOOP_KEYS = tuple(f.name for f in fields(LoopSettings))


def loop_settings(cfg: Mapping[str, Any]) -> LoopSettings:
    """The job's loop settings (``LOOP_KEYS``; what a config leaves out keeps LoopSettings' default)."""
    return LoopSettings(**{k: cfg[k] for k in LOOP_KEYS if k in cfg})


def check_arm(sampling: Mapping[str, Any], knowledge: Mapping[str, Any] | None, path: str) -> None:
    """Fail before any model loads: unknown keys in the sampler or retrieval nodes, bad values."""
    check_target(sampling, f"{path}.sampling")
    try:
        instantiate(sampling)  # samplers validate their values (aggregate, n) when made
    except InstantiationException as error:
        raise ValueError(f"{path}.sampling: {error.__cause__ or error}") from None
    for kind, node in (knowledge or {}).items():
        if node:
            check_target(node, f"{path}.knowledge.{kind}")


def build_policy(model: ChatModel, sampling: Mapping[str, Any], knowledge: Mapping[str, Any] | None,
                 settings: LoopSettings) -> Policy:  # fmt: skip
    return Policy(model, instantiate(sampling), make_knowledge(knowledge, intent_model=model), settings)


RUNTIME_ONLY = ("kv_cells",)  # llm settings that are not fingerprinted (kate.llm.llamacpp's cache size)


def fingerprinted_llm(llm: Mapping[str, Any]) -> dict[str, Any]:
    """The llm settings a run's fingerprint holds: all but ``RUNTIME_ONLY`` (every job's runs use this)."""
    return {k: v for k, v in llm.items() if k not in RUNTIME_ONLY}


def arm_config(llm: Mapping[str, Any], sampling: Mapping[str, Any], knowledge: Mapping[str, Any] | None,
               settings: LoopSettings) -> dict[str, Any]:  # fmt: skip
    """What determines an arm's records, as configured (fingerprinted with the policy and the task).
    The engine's cache size (``RUNTIME_ONLY``) is left out, by the convention ``workers`` follows: it
    changes how fast, and where cells sit (greedy near-ties can flip, as running beside other entries
    can: kate.llm.llamacpp_batch), not what is asked; the first invocation's runtime records it."""
    return {"llm": fingerprinted_llm(llm), "sampling": dict(sampling), "knowledge": knowledge,
            "loop": settings.to_dict()}  # fmt: skip


def run_arm(name: str, task: Task, policy: Policy, out_dir: str | Path, *, seeds: Sequence[int],
            config: Mapping[str, Any], workers: int = 1) -> dict[int, list[dict[str, Any]]]:  # fmt: skip
    """Run (or resume) the arm for each seed; returns seed -> records."""
    results = {}
    for seed in seeds:
        store = open_run(Path(out_dir) / f"seed_{seed}", arm=name, task=task, policy=policy, seed=seed,
                         config=config, workers=workers)  # fmt: skip
        results[seed] = run_task(task, policy, store, seed=seed, workers=workers, desc=f"{name} seed {seed}")
    return results
