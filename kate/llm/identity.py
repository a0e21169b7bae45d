"""Who a model client is, for a run's meta: name, backend and weights hash (``model_identity``),
and what decides its numerics on this machine (``model_runtime``: engine version and build, CPU
kernel features, thread counts), so a greedy run can be compared with one made elsewhere."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

from kate.llm.registry import MODELS, cache_dir, sha256_of


def model_identity(model: Any) -> dict[str, Any]:
    """Name, backend and weights hash (pinned for kate's models, computed for other files). Where
    the file lies is not part of it (``model_runtime`` has it): the same weights are the same model."""
    identity: dict[str, Any] = {"name": model.name, "backend": type(model).__name__}
    path = getattr(model, "path", None)
    if path is not None:
        in_cache = Path(path).parent == cache_dir()  # kate's verified copy of a pinned model
        spec = next((s for s in MODELS.values() if in_cache and s.kind == "gguf" and Path(path).name == s.filename), None)
        spec = MODELS.get(model.name) or spec
        identity["sha256"] = spec.sha256 if spec is not None else sha256_of(Path(path))
    lora = getattr(model, "lora_sha256", None)
    if lora is None and isinstance(getattr(model, "lora", None), dict):  # the hf client's adapter record
        lora = model.lora.get("lora_sha256")
    if lora:  # a LoRA adapter on the base: another model, whatever the client is named
        identity["lora_sha256"] = lora
        identity["lora_scale"] = getattr(model, "lora_scale", 1.0)
    for key in ("several_calls", "tools_fit"):  # gates that decide what is kept or asked: what they were fitted
        gate = getattr(model, key, None)  # on counts (tool_prompt=both's; the base gate's tool relevance)
        if gate is not None:
            describe = getattr(gate, "describe", None)
            identity[key] = describe() if callable(describe) else repr(gate)
    return identity


def model_runtime(model: Any) -> dict[str, Any]:
    """The client's own ``runtime()`` (when it has one) plus the machine and thread settings."""
    own = getattr(model, "runtime", None)
    info: dict[str, Any] = dict(own()) if callable(own) else {}
    if getattr(model, "path", None) is not None:
        info.setdefault("path", str(model.path))
    info.setdefault("python", platform.python_version())
    info.setdefault("machine", platform.machine())
    info.setdefault("cpu_count", os.cpu_count())
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        if var in os.environ:
            info[var] = os.environ[var]
    return info
