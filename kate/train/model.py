"""The model a training job starts from, and what it leaves behind.

``load_for_training`` loads the base (a kate model name, a .gguf file, or an HF folder) through
transformers, dequantized from the verified GGUF the engines run, and wraps it in a LoRA adapter
(peft), a given adapter to continue (GRPO after SFT), or nothing (full fine-tuning). ``finish``
writes the final model where kate's clients load it: the adapter folder (``hf`` client directly),
optionally merged into a full HF folder, and the llama.cpp LoRA adapter ``adapter.gguf`` so the
``llamacpp`` client runs the trained model at the untrained model's cost. Adapter folders name the
kate model as their base (``base_model_name_or_path``), so any of them loads on another machine.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from kate.io import atomic_write_json


def load_for_training(model: str, *, dtype: str = "float32", lora: Any = None,
                      init_adapter: str | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` ready for a TRL trainer."""
    # every file is local: without this, peft's save asks the Hub for the base's config.json (by the kate
    # model name) at every checkpoint, and warns when the lookup fails offline
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForCausalLM

    from kate.llm.hf import _resolve
    from kate.train.render import load_tokenizer

    source, extra = _resolve(model)
    if not Path(source).exists():
        raise FileNotFoundError(f"{model!r}: neither a kate model, a .gguf file nor a local folder")
    tokenizer = load_tokenizer(model)
    network = AutoModelForCausalLM.from_pretrained(source, dtype=getattr(torch, dtype), local_files_only=True, **extra)
    network.hf_quantizer = None  # dequantized from GGUF: plain weights, trainable and saveable
    network.is_quantized = False
    if getattr(network.config, "quantization_config", None) is not None:
        del network.config.quantization_config
    network.config.use_cache = False
    if init_adapter:
        from peft import PeftModel

        return PeftModel.from_pretrained(network, init_adapter, is_trainable=True), tokenizer
    if lora is not None and lora.enabled:
        from peft import LoraConfig, get_peft_model

        config = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                            target_modules=list(lora.target_modules), task_type="CAUSAL_LM")
        return get_peft_model(network, config), tokenizer
    return network, tokenizer


def name_base(folder: str | Path, model: str) -> None:
    """Make an adapter folder name the kate model (or path) it was trained on as its base."""
    path = Path(folder) / "adapter_config.json"
    if path.exists():
        config = json.loads(path.read_text())
        if config.get("base_model_name_or_path") != model:
            config["base_model_name_or_path"] = model
            atomic_write_json(path, config)


def finish(trainer: Any, output_dir: str | Path, model: str, *, merge: bool, gguf_adapter: bool) -> dict[str, str]:
    """Save the final model under ``output_dir/final`` (+ ``final-merged``, ``final/adapter.gguf``)."""
    final = Path(output_dir) / "final"
    trainer.save_model(str(final))
    trainer.processing_class.save_pretrained(str(final))
    out = {"final": str(final)}
    if (final / "adapter_config.json").exists():
        name_base(final, model)
        from kate.llm.lora import adapter_to_gguf, merge_adapter

        if gguf_adapter:
            out["gguf_adapter"] = str(adapter_to_gguf(final, final / "adapter.gguf"))
            best = Path(output_dir) / "best"  # the task probe's choice (kate.train.probe.keep_best)
            if (best / "adapter_config.json").exists():
                out["best_gguf_adapter"] = str(adapter_to_gguf(best, best / "adapter.gguf"))
        if merge:
            out["merged"] = str(merge_adapter(final, Path(output_dir) / "final-merged"))
    return out
