"""Export a kate GGUF model as a Hugging Face folder (bf16 safetensors + tokenizer), for engines
that cannot read GGUF, such as vLLM's CPU build.

The weights are dequantized by ``transformers`` from the verified GGUF (see ``registry``), so the
folder holds the same model kate runs through llama.cpp, at bf16. The folder is written beside the
GGUF in the cache as ``<name minus the quant suffix>-hf`` (e.g. ``qwen2.5-coder-0.5b-instruct-hf``),
built in a temporary folder and renamed into place, and carries a marker naming its source; a
folder with a matching marker is reused as is.

    python -m kate.llm.hf_export qwen2.5-coder-0.5b-instruct-q4_k_m
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

from kate.io import atomic_folder, atomic_write_json
from kate.llm.registry import ModelFileError, cache_dir, model_path, spec_of

MARKER = "kate-export.json"
_QUANT_SUFFIX = re.compile(r"-(q\d\w*|f16|bf16|f32)$", re.IGNORECASE)


def hf_folder_name(model_name: str) -> str:
    """``qwen2.5-coder-0.5b-instruct-q4_k_m`` -> ``qwen2.5-coder-0.5b-instruct-hf``."""
    return f"{_QUANT_SUFFIX.sub('', model_name)}-hf"


def hf_folder_path(model_name: str) -> Path:
    return cache_dir() / hf_folder_name(model_name)


def _expected_marker(model_name: str) -> dict:
    spec = spec_of(model_name)
    return {"source": spec.filename, "source_sha256": spec.sha256, "dtype": "bfloat16"}


def is_exported(model_name: str) -> bool:
    """True when the HF folder exists and its marker names this model's verified GGUF."""
    marker = hf_folder_path(model_name) / MARKER
    try:
        found = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    expected = _expected_marker(model_name)
    return all(found.get(k) == v for k, v in expected.items())


def _ensure_template_in_config(folder: Path, template: str | None) -> None:
    """vLLM (and older transformers) read the chat template from tokenizer_config.json."""
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    changed = False
    for key in ("local_files_only", "is_local"):  # how it was loaded, not what it is
        changed |= config.pop(key, None) is not None
    if template and not config.get("chat_template"):
        config["chat_template"] = template
        changed = True
    if changed:
        atomic_write_json(config_path, config)
    if not config.get("chat_template"):
        raise ModelFileError(f"{folder}: the exported tokenizer has no chat template")


def export_hf_folder(model_name: str, *, force: bool = False) -> Path:
    """The HF folder of a kate GGUF model, exporting it first when missing or stale."""
    spec = spec_of(model_name)
    if spec.kind != "gguf":
        raise ModelFileError(f"{model_name}: only GGUF models are exported (this one is a {spec.kind})")
    target = hf_folder_path(model_name)
    if not force and is_exported(model_name):
        return target

    gguf = model_path(model_name)  # verified against the pinned sha256
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.monotonic()
    source, kwargs = str(gguf.parent), {"gguf_file": gguf.name, "local_files_only": True}
    print(f"[kate] exporting {gguf.name} -> {target} (bf16)", file=sys.stderr)
    tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.bfloat16, **kwargs)
    # The GGUF loader marks the model as quantized; the dequantized weights are plain bf16, and a
    # quantization_config in config.json would make other loaders (vLLM) expect GGUF tensors.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.torch_dtype = torch.bfloat16

    with atomic_folder(target) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp, save_jinja_files=False)
        _ensure_template_in_config(tmp, tokenizer.chat_template)
        config = json.loads((tmp / "config.json").read_text())
        if "quantization_config" in config:
            raise ModelFileError(f"{model_name}: exported config.json still has a quantization_config")
        seconds = round(time.monotonic() - started, 1)
        atomic_write_json(tmp / MARKER, {**_expected_marker(model_name), "seconds": seconds})
    print(f"[kate] exported {target} in {time.monotonic() - started:.0f}s", file=sys.stderr)
    return target


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m kate.llm.hf_export", description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", help="kate GGUF model names")
    parser.add_argument("--force", action="store_true", help="export again even when the folder is current")
    args = parser.parse_args(argv)
    try:
        for name in args.models:
            print(export_hf_folder(name, force=args.force))
    except ModelFileError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
