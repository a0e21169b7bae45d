"""The verifier's network: the kate model with a scalar head (``AutoModelForSequenceClassification``,
``num_labels=1``), and the text it reads.

transformers loads a sequence-classification model straight from the GGUF the engines run (Qwen2 and
Llama architectures both): the transformer is dequantized from the file, and the head (``score``, one
linear layer from the last token's hidden state to one number) starts random. LoRA (peft task
``SEQ_CLS``) trains adapters on the attention projections and the whole head (``modules_to_save``),
so the saved adapter folder holds both; ``load_verifier`` rebuilds the network from the base the
folder names plus the folder. The score is read at the last token that is not padding: the text is
the prompt as inference renders it (``StepRenderer.prompt_text``, tools included), then the
candidate, then the end-of-turn token. ``Verifier`` is the scorer ``kate.sampling.verifier`` takes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kate.llm.base import Message, ToolSchema

VERIFIER_FILE = "verifier.json"  # beside the adapter: what kind of folder it is, and its base


def _plain(network: Any) -> Any:
    network.hf_quantizer = None  # dequantized from GGUF: plain weights, trainable and saveable
    network.is_quantized = False
    if getattr(network.config, "quantization_config", None) is not None:
        del network.config.quantization_config
    network.config.use_cache = False
    return network


def load_reward_network(model: str, *, dtype: str = "float32") -> tuple[Any, Any]:
    """``(network, tokenizer)``: the base with a fresh scalar head, local files only."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForSequenceClassification

    from kate.llm.hf import _resolve
    from kate.train.render import load_tokenizer

    source, extra = _resolve(model)
    if not Path(source).exists():
        raise FileNotFoundError(f"{model!r}: neither a kate model, a .gguf file nor a local folder")
    tokenizer = load_tokenizer(model)
    network = AutoModelForSequenceClassification.from_pretrained(
        source, num_labels=1, dtype=getattr(torch, dtype), local_files_only=True, **extra)
    network = _plain(network)
    network.config.pad_token_id = tokenizer.pad_token_id
    return network, tokenizer


def with_lora(network: Any, lora: Any) -> Any:
    """LoRA adapters on ``lora.target_modules``; the head is trained whole (peft's SEQ_CLS default)."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                        target_modules=list(lora.target_modules), task_type="SEQ_CLS")
    return get_peft_model(network, config)


def load_verifier(folder: str | Path, *, dtype: str = "float32") -> tuple[Any, Any]:
    """``(network, tokenizer)`` of a trained verifier folder (``final/`` or a checkpoint), in eval mode."""
    folder = Path(folder)
    config_path = folder / "adapter_config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"{folder}: no adapter_config.json; not a trained verifier folder")
    try:
        base = json.loads(config_path.read_text())["base_model_name_or_path"]
    except (ValueError, KeyError) as error:
        raise ValueError(f"{config_path}: unreadable adapter config ({error})") from None
    if json.loads(config_path.read_text()).get("task_type") != "SEQ_CLS":
        raise ValueError(f"{config_path}: not a verifier adapter (task_type is not SEQ_CLS)")
    from peft import PeftModel

    network, tokenizer = load_reward_network(base, dtype=dtype)
    network = PeftModel.from_pretrained(network, str(folder))
    network.eval()
    return network, tokenizer


def verifier_text(renderer: Any, prompt: list[Message], tools: list[ToolSchema] | None, candidate: str) -> str:
    """What the verifier scores: the rendered prompt, the candidate, the end-of-turn token."""
    return renderer.prompt_text(prompt, tools) + candidate + renderer.eos


def encode(tokenizer: Any, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def score_ids(network: Any, ids: list[int]) -> float:
    """The scalar score of one tokenized text (no gradient)."""
    import torch

    device = next(network.parameters()).device
    with torch.no_grad():
        out = network(input_ids=torch.tensor([ids], device=device),
                      attention_mask=torch.ones(1, len(ids), dtype=torch.long, device=device))
    return float(out.logits.reshape(-1)[0])


def write_marker(folder: str | Path, model: str, settings: dict[str, Any]) -> None:
    from kate.io import atomic_write_json

    atomic_write_json(Path(folder) / VERIFIER_FILE, {"kind": "kate-verifier", "base": model, **settings})


class Verifier:
    """A trained verifier folder, scoring on the CPU (or ``device``), one text per forward."""

    def __init__(self, folder: str | Path, *, dtype: str = "float32", device: str = "cpu",
                 threads: int | None = None) -> None:
        from kate.train.render import StepRenderer
        from kate.train.sft import set_threads

        set_threads(threads)
        self.folder = str(folder)
        self.network, tokenizer = load_verifier(folder, dtype=dtype)
        self.network.to(device)
        self.renderer = StepRenderer(tokenizer)

    def score(self, messages: list[Message], tools: list[ToolSchema] | None, texts: Sequence[str]) -> list[float]:
        tokenizer = self.renderer.tokenizer
        return [score_ids(self.network, encode(tokenizer, verifier_text(self.renderer, messages, tools, text)))
                for text in texts]
