"""Which model a benchmark runs, and where another model's runs and results go: the default model's
stay where they always were, another model's under a ``models/<name>/`` folder of the same place, so that
two models' records never share a run folder (bench/bfcl.py, bench/failure_table.py, bench/own_tools.py,
bench/faults.py, bench/vote_choices.py)."""

from __future__ import annotations

from pathlib import Path

DEFAULT_MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"  # conf/llm/llamacpp.yaml's


def is_default(model: str | None) -> bool:
    return model in (None, DEFAULT_MODEL)


def model_folder(base: Path, model: str | None) -> Path:
    """``base`` for the default model, ``base/models/<model>`` for another."""
    return base if is_default(model) else base / "models" / model


def model_overrides(model: str | None) -> list[str]:
    """The Hydra override that makes ``kate eval`` run ``model`` (none for the default)."""
    return [] if is_default(model) else [f"llm.model={model}"]
