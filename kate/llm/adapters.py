"""LoRA adapters kate ships (``kate/adapters/``), pinned by sha256, so that ``llm.lora=<name>`` names
one the way ``llm.model=<name>`` names a model. Each says which base model it was trained on and how;
a file that does not match its hash, or a base it was not trained on, is refused with the file named."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kate.llm.registry import MODELS, ModelFileError, sha256_of

ADAPTER_DIR = Path(__file__).resolve().parents[1] / "adapters"


@dataclass(frozen=True)
class AdapterSpec:
    name: str
    description: str
    base: str  # the kate model it was trained on (registry.MODELS)
    filename: str  # the llama.cpp adapter GGUF in ADAPTER_DIR
    sha256: str


ADAPTERS: dict[str, AdapterSpec] = {
    spec.name: spec
    for spec in (
        AdapterSpec(
            name="qwen2.5-coder-0.5b-grpo-answers",
            description="LoRA r 8: SFT with answer steps x10, then 30 GRPO steps on the training halves (2 CPU "
                        "cores; bench/train_cpu.py --stages sft_answers,grpo_answers): answers after tool results",
            base="qwen2.5-coder-0.5b-instruct-q4_k_m",
            filename="qwen2.5-coder-0.5b-grpo-answers.gguf",
            sha256="96c2e8953bb373d104dd73e18180467fab12a3aac9bbf12367d38f3391ff3591",
        ),
    )
}


def shipped_adapter(name: str, base: str | os.PathLike | None = None) -> Path:
    """The verified file of the shipped adapter ``name``; ``base`` (a kate model name or its GGUF path),
    when given, must be the model it was trained on."""
    spec = ADAPTERS[name]
    if base is not None and str(base) != spec.base and Path(base).name != MODELS[spec.base].filename:
        raise ValueError(f"adapter {name!r} was trained on {spec.base!r}, not on {str(base)!r}")
    path = ADAPTER_DIR / spec.filename
    if not path.is_file():
        raise ModelFileError(f"{name}: adapter file {path} is missing (it ships in kate/adapters/)")
    actual = sha256_of(path)
    if actual != spec.sha256:
        raise ModelFileError(f"{name}: {path} has sha256 {actual}, expected {spec.sha256} (corrupt or replaced)")
    return path
