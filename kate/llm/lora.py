"""LoRA checkpoints for kate's engines: a PEFT LoRA adapter (trained, e.g. with TRL, on a kate model
that ``transformers`` loaded from its GGUF) made runnable by both local clients.

- ``HFChatModel(<adapter folder>)`` loads the base and applies the adapter (``kate.llm.hf``);
- ``merge_adapter`` writes a merged HF folder (safetensors + tokenizer) that loads like any other;
- ``adapter_to_gguf`` converts the adapter to a llama.cpp LoRA adapter GGUF, the format llama.cpp's
  ``convert_lora_to_gguf.py`` writes, which ``LlamaCppChatModel(lora=...)`` applies at run time over
  the quantized base.

An adapter folder holds ``adapter_config.json`` (whose ``base_model_name_or_path`` is a kate model
name, a .gguf path or an HF folder) and ``adapter_model.safetensors``. Only plain LoRA on linear
layers is supported: DoRA, rsLoRA, per-module alphas, biases and fully trained modules are refused.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kate.io import atomic_folder, atomic_write_json
from kate.llm.adapters import ADAPTERS, shipped_adapter
from kate.llm.registry import MODELS, model_path, sha256_of

CONFIG = "adapter_config.json"
WEIGHTS = "adapter_model.safetensors"
MERGE_MARKER = "kate-lora-merge.json"
GGUF_NAME = "adapter.gguf"  # where a folder's converted adapter is cached
GGUF_MARKER = "adapter.gguf.json"  # the hashes it was converted from
_ARCHS = ("llama", "qwen2")  # whose HF -> GGUF tensor layout is mapped here
_PREFIX = "base_model.model."


def is_adapter(path: str | os.PathLike) -> bool:
    """True when ``path`` is a folder holding a PEFT adapter (``adapter_config.json``)."""
    return (Path(path).expanduser() / CONFIG).is_file()


def adapter_config(adapter_dir: str | os.PathLike) -> dict[str, Any]:
    """The adapter's ``adapter_config.json``, refused (ValueError naming the file) unless it is a
    plain LoRA whose scaling llama.cpp can reproduce (``lora_alpha / r`` for every module)."""
    path = Path(adapter_dir).expanduser() / CONFIG
    config = json.loads(path.read_text())
    problems = []
    if config.get("peft_type", "LORA") != "LORA":
        problems.append(f"peft_type {config.get('peft_type')!r} is not LORA")
    if config.get("use_dora"):
        problems.append("use_dora (DoRA) is not supported")
    if config.get("use_rslora"):
        problems.append("use_rslora (rsLoRA scales by alpha/sqrt(r); llama.cpp applies alpha/r) is not supported")
    if config.get("alpha_pattern"):
        problems.append("alpha_pattern (per-module alphas; llama.cpp has one alpha) is not supported")
    if config.get("fan_in_fan_out"):
        problems.append("fan_in_fan_out (Conv1D layers) is not supported")
    if config.get("bias", "none") != "none":
        problems.append(f"bias={config.get('bias')!r} is not supported (only 'none')")
    if config.get("modules_to_save"):
        problems.append(f"modules_to_save {config['modules_to_save']} is not supported")
    if not config.get("base_model_name_or_path"):
        problems.append("base_model_name_or_path is missing")
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    return config


def adapter_sha256(adapter_dir: str | os.PathLike) -> str:
    """One hash of what decides the adapter's effect: its config and its weights."""
    folder = Path(adapter_dir).expanduser()
    digest = hashlib.sha256()
    for name in (CONFIG, WEIGHTS):
        digest.update(name.encode() + b"\0" + sha256_of(folder / name).encode() + b"\n")
    return digest.hexdigest()


# ----------------------------------------------------------------------------- merged HF folder
def merge_adapter(adapter_dir: str | os.PathLike, out_dir: str | os.PathLike, *, dtype: str = "bfloat16") -> Path:
    """Merge the adapter into its base and write an HF folder (safetensors, tokenizer with its chat
    template in tokenizer_config.json, and a marker naming adapter and base), atomically."""
    import torch

    from kate.llm.hf import HFChatModel
    from kate.llm.hf_export import _ensure_template_in_config

    adapter = Path(adapter_dir).expanduser().resolve()
    config = adapter_config(adapter)
    target = Path(out_dir).expanduser().resolve()
    started = time.monotonic()
    loaded = HFChatModel(str(adapter), device="cpu", dtype=dtype, merge=True)
    model, tokenizer = loaded.model, loaded.tokenizer
    # After a GGUF load the model is marked quantized; the merged weights are plain tensors, and a
    # quantization_config in config.json would make loaders expect GGUF tensors (see hf_export).
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.torch_dtype = getattr(torch, dtype)

    with atomic_folder(target) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp, save_jinja_files=False)
        _ensure_template_in_config(tmp, tokenizer.chat_template)
        if "quantization_config" in json.loads((tmp / "config.json").read_text()):
            raise ValueError(f"{adapter}: the merged config.json still has a quantization_config")
        marker = {"adapter": str(adapter), "adapter_sha256": adapter_sha256(adapter),
                  "base": config["base_model_name_or_path"], "dtype": dtype,
                  "seconds": round(time.monotonic() - started, 1)}  # fmt: skip
        atomic_write_json(tmp / MERGE_MARKER, marker)
    return target


# ----------------------------------------------------------------------------- llama.cpp adapter
@dataclass(frozen=True)
class _Base:
    """What the conversion needs of the base: architecture, head counts, layers, tensor shapes."""

    arch: str
    n_head: int
    n_head_kv: int
    n_layer: int
    shapes: dict[str, tuple[int, ...]] | None  # GGUF name -> ne (in, out); None for an HF folder base


def _base_gguf(base: str) -> Path | None:
    if base in MODELS and MODELS[base].kind == "gguf":
        return model_path(base)
    path = Path(base).expanduser()
    return path if path.is_file() and path.suffix == ".gguf" else None


def _field(reader: Any, key: str) -> Any:
    field = reader.fields.get(key)
    if field is None:
        return None
    value = field.parts[field.data[0]]
    return bytes(value).decode("utf-8") if field.types[0].name == "STRING" else value.tolist()[0]


@functools.lru_cache(maxsize=8)
def _gguf_info(path: str, mtime_ns: int, size: int) -> _Base:
    """A GGUF's architecture, head counts and tensor shapes (cached per file version: reading its
    metadata, the tokenizer arrays included, takes seconds)."""
    import gguf

    reader = gguf.GGUFReader(path)
    arch = _field(reader, "general.architecture")
    n_head = int(_field(reader, f"{arch}.attention.head_count"))
    return _Base(arch, n_head, int(_field(reader, f"{arch}.attention.head_count_kv") or n_head),
                 int(_field(reader, f"{arch}.block_count")),
                 {t.name: tuple(int(d) for d in t.shape) for t in reader.tensors})  # fmt: skip


def _base_info(base: str) -> _Base:
    """Read the base's architecture from its GGUF (or an HF folder's config.json)."""
    gguf_path = _base_gguf(base)
    if gguf_path is not None:
        stat = gguf_path.stat()
        return _gguf_info(str(gguf_path.resolve()), stat.st_mtime_ns, stat.st_size)
    config_path = Path(base).expanduser() / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"base {base!r} is neither a kate GGUF model, a .gguf file nor an HF folder")
    config = json.loads(config_path.read_text())
    n_head = int(config["num_attention_heads"])
    return _Base(config["model_type"], n_head, int(config.get("num_key_value_heads") or n_head),
                 int(config["num_hidden_layers"]), None)  # fmt: skip


def _permute(weight: np.ndarray, n_head: int) -> np.ndarray:
    """HF -> GGUF row order of llama's q/k projections (convert_hf_to_gguf's ``permute``)."""
    split = weight.reshape(n_head, 2, weight.shape[0] // n_head // 2, *weight.shape[1:])
    return split.swapaxes(1, 2).reshape(weight.shape)


def _gguf_pairs(adapter: Path, base: _Base) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(GGUF base tensor name, lora_a [r, in], lora_b [out, r]) for every adapted module."""
    import gguf
    from safetensors.numpy import load_file

    weights_path = adapter / WEIGHTS
    if base.arch not in _ARCHS:
        raise ValueError(f"{weights_path}: base architecture {base.arch!r} is not mapped (only {', '.join(_ARCHS)})")
    arch = next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == base.arch)
    names = gguf.get_tensor_name_map(arch, base.n_layer)
    tensors = {k: v.astype(np.float32) for k, v in load_file(weights_path).items()}
    pairs: dict[str, dict[str, np.ndarray]] = {}
    for key in tensors:
        part = "A" if key.endswith(".lora_A.weight") else "B" if key.endswith(".lora_B.weight") else None
        module = key.removeprefix(_PREFIX).rsplit(".lora_", 1)[0] if part else None
        target = names.get_name(f"{module}.weight", try_suffixes=(".weight",)) if module else None
        if target is None or (base.shapes is not None and target not in base.shapes):
            why = "not a lora_A/lora_B weight" if part is None else "no base GGUF tensor for it"
            raise ValueError(f"{weights_path}: cannot map {key!r} to llama.cpp ({why}; lm_head of a model with "
                             "tied embeddings and embed_tokens are not supported)")  # fmt: skip
        pairs.setdefault(target, {})[part] = tensors[key]
    out = []
    for target, ab in sorted(pairs.items()):
        if set(ab) != {"A", "B"}:
            raise ValueError(f"{weights_path}: {target} has lora_{''.join(ab)} without its pair")
        a, b = ab["A"], ab["B"]
        shape = base.shapes.get(target) if base.shapes is not None else None
        if a.shape[0] != b.shape[1] or (shape is not None and (a.shape[1], b.shape[0]) != shape[:2]):
            raise ValueError(f"{weights_path}: {target}: lora_A {a.shape} / lora_B {b.shape} do not fit {shape}")
        if base.arch == "llama" and target.endswith(("attn_q.weight", "attn_k.weight")):
            b = _permute(b, base.n_head if "attn_q" in target else base.n_head_kv)
        out.append((target, a, b))
    return out


def adapter_to_gguf(adapter_dir: str | os.PathLike, out_path: str | os.PathLike | None = None, *,
                    base: str | os.PathLike | None = None, dtype: str = "f32") -> Path:  # fmt: skip
    """Convert a PEFT LoRA adapter to a llama.cpp LoRA adapter GGUF (default: ``<adapter>/adapter.gguf``),
    written atomically. ``base`` overrides the adapter's ``base_model_name_or_path`` (the GGUF the
    adapter will run on, read for its architecture and tensor shapes); ``dtype``: f32 or f16."""
    import gguf

    adapter = Path(adapter_dir).expanduser()
    config = adapter_config(adapter)
    info = _base_info(str(base or config["base_model_name_or_path"]))
    pairs = _gguf_pairs(adapter, info)
    if dtype not in ("f32", "f16"):
        raise ValueError(f"dtype must be f32 or f16, got {dtype!r}")
    np_dtype = np.float32 if dtype == "f32" else np.float16
    target = Path(out_path).expanduser() if out_path is not None else adapter / GGUF_NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        writer = gguf.GGUFWriter(tmp, info.arch)
        writer.add_type(gguf.GGUFType.ADAPTER)
        writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
        # llama.cpp scales each product by alpha / rank (rank read from each lora_b), PEFT by lora_alpha / r
        writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(config["lora_alpha"]))
        for name, a, b in pairs:
            writer.add_tensor(f"{name}.lora_a", np.ascontiguousarray(a, dtype=np_dtype))
            writer.add_tensor(f"{name}.lora_b", np.ascontiguousarray(b, dtype=np_dtype))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return target


def llama_adapter(lora: str | os.PathLike, *, base: str | os.PathLike | None = None) -> Path:
    """The llama.cpp adapter file for ``lora``: an adapter kate ships, by name (kate.llm.adapters, verified),
    a .gguf as is, or a PEFT folder's cached ``adapter.gguf``, converted again when the adapter's hash
    differs from the one in its marker."""
    if str(lora) in ADAPTERS:
        return shipped_adapter(str(lora), base)
    path = Path(lora).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return path
    if not is_adapter(path):
        raise FileNotFoundError(f"lora {str(lora)!r} is neither a .gguf adapter nor a PEFT adapter folder, nor an "
                                f"adapter kate ships ({', '.join(sorted(ADAPTERS))})")
    digest = adapter_sha256(path)
    marker_path, target = path / GGUF_MARKER, path / GGUF_NAME
    expected = {"adapter_sha256": digest, "base": str(base) if base is not None else None}
    try:
        marker = json.loads(marker_path.read_text())
    except (OSError, ValueError):
        marker = {}
    if target.is_file() and all(marker.get(k) == v for k, v in expected.items()) \
            and marker.get("gguf_sha256") == sha256_of(target):  # fmt: skip
        return target
    adapter_to_gguf(path, target, base=base)
    atomic_write_json(marker_path, {**expected, "gguf_sha256": sha256_of(target)})
    return target
