"""transformers backend: local, CPU or GPU. Loads a HF folder, a GGUF file, a known kate model, a
PEFT LoRA adapter folder (over the base its config names, see kate.llm.lora), or a hub id (only when
the user configures one and allows the hub; kate's defaults never do).

Besides chat, it exposes what the diagnostics need: next-token logits and per-layer hidden states.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kate.llm.base import (
    Completion,
    Message,
    TokenLogprob,
    ToolSchema,
    Usage,
    check_sampling_args,
    completion_from_text,
)
from kate.llm.chat_template import render_chat
from kate.llm.lora import adapter_config, adapter_sha256, is_adapter
from kate.llm.registry import MODELS, model_path
from kate.llm.tool_prompt import check_tool_prompt, default_formats


@dataclass(frozen=True)
class ForwardPass:
    """One forward pass over a prompt: logits of the next token and every layer's hidden states."""

    input_ids: torch.Tensor  # [seq]
    next_token_logits: torch.Tensor  # [vocab]
    hidden_states: tuple[torch.Tensor, ...]  # (layers + 1) x [seq, dim]; [0] is the embeddings


def _resolve(model: str) -> tuple[str, dict[str, Any]]:
    """(path or id for from_pretrained, extra kwargs) for a kate name, a GGUF file or a folder."""
    if model in MODELS and MODELS[model].kind == "gguf":
        path = model_path(model)
        return str(path.parent), {"gguf_file": path.name}
    path = Path(model).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return str(path.parent), {"gguf_file": path.name}
    return model, {}


class HFChatModel:
    """Chat through ``transformers``; ``n`` samples of one prompt decode together in one batch.

    ``model`` may be a PEFT adapter folder: its base (``base_model_name_or_path``) is loaded and the
    adapter applied (``peft.PeftModel``), or merged into the weights with ``merge=True``.
    """

    options = ("prefill",)  # the extra chat() keywords it takes (kate.llm.base.supports)

    def __init__(
        self,
        model: str,
        *,
        name: str | None = None,
        device: str = "auto",
        dtype: str = "float32",
        allow_hub: bool = False,
        formats: tuple[str, ...] | None = None,
        merge: bool = False,
        tool_prompt: str = "native",
    ) -> None:
        if check_tool_prompt(tool_prompt) == "both":
            raise ValueError("tool_prompt=both needs the llama.cpp client (llm=llamacpp)")
        from transformers import AutoModelForCausalLM, AutoTokenizer

        adapter = Path(model).expanduser() if is_adapter(model) else None
        base = adapter_config(adapter)["base_model_name_or_path"] if adapter else model
        source, extra = _resolve(base)
        if not allow_hub and not Path(source).exists():
            raise FileNotFoundError(
                f"hf model {base!r} is neither a known kate model nor a local path; a hub id needs "
                "allow_hub=true (and network access)"
            )
        kwargs = {**extra, "local_files_only": not allow_hub}
        if adapter is not None and (adapter / "tokenizer_config.json").is_file():
            self.tokenizer = AutoTokenizer.from_pretrained(adapter, local_files_only=True)
        else:
            self.tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
        self.model = AutoModelForCausalLM.from_pretrained(source, dtype=getattr(torch, dtype), **kwargs)
        self.lora: dict[str, object] | None = None
        if adapter is not None:
            from peft import PeftModel

            digest = adapter_sha256(adapter)
            self.model = PeftModel.from_pretrained(self.model, adapter, is_trainable=False)
            if merge:
                self.model = self.model.merge_and_unload()
            self.lora = {"lora": str(adapter.resolve()), "lora_sha256": digest, "lora_base": base, "lora_merged": merge}
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.model.to(device).eval()
        self.device = device
        suffix = f"+lora-{str(self.lora['lora_sha256'])[:12]}" if self.lora else ""  # a retrained adapter: a new name
        self.name = name or f"{Path(model).name}{suffix}"
        self.tool_prompt = tool_prompt
        self.formats = tuple(formats) if formats is not None else default_formats(tool_prompt)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token

    @classmethod
    def from_loaded(cls, model: Any, tokenizer: Any, *, name: str = "loaded",
                    formats: tuple[str, ...] = ("hermes", "json")) -> "HFChatModel":
        """A client over a model already in memory (e.g. one being trained), without reloading it;
        the caller owns the model's train/eval mode."""
        client = cls.__new__(cls)
        client.model, client.tokenizer, client.lora = model, tokenizer, None
        client.device = str(next(model.parameters()).device)
        client.name, client.formats, client.tool_prompt = name, tuple(formats), "native"
        if client.tokenizer.pad_token_id is None:
            client.tokenizer.pad_token = client.tokenizer.eos_token
        return client

    def runtime(self) -> dict[str, object]:
        """What decides this client's numerics here: library versions, device, dtype, torch threads."""
        import transformers

        return {"engine": "transformers", "version": transformers.__version__, "torch": torch.__version__,
                "device": self.device, "dtype": str(self.model.dtype), "torch_threads": torch.get_num_threads(),
                **(self.lora or {})}  # fmt: skip

    def render(self, messages: list[Message], tools: list[ToolSchema] | None = None) -> str:
        template = self.tokenizer.chat_template
        if not template:
            raise ValueError(f"{self.name}: the tokenizer has no chat template")
        return render_chat(
            template,
            messages,
            tools,
            bos_token=self.tokenizer.bos_token or "",
            eos_token=self.tokenizer.eos_token or "",
            tool_prompt=self.tool_prompt,
        )

    def _encode(self, prompt: str) -> torch.Tensor:
        return self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids.to(self.device)

    def chat(
        self,
        messages: list[Message],
        tools: list[ToolSchema] | None = None,
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int = 256,
        seed: int | None = None,
        stop: list[str] | None = None,
        logprobs: bool = False,
        ignore_eos: bool = False,
        prefill: str | None = None,
    ) -> list[Completion]:
        """``prefill``: text the answer starts with, placed after the generation prompt; the
        returned text includes it and is parsed whole (as ``LlamaCppChatModel.chat``)."""
        check_sampling_args(n, temperature, max_tokens)
        input_ids = self._encode(self.render(messages, tools) + (prefill or ""))
        sample = temperature > 0
        if seed is not None:
            torch.manual_seed(seed)
        generate_kwargs: dict[str, Any] = dict(
            max_new_tokens=max_tokens,
            do_sample=sample,
            num_return_sequences=n,
            return_dict_in_generate=True,
            output_logits=logprobs,
            pad_token_id=self.tokenizer.pad_token_id,
        )
        if sample:
            generate_kwargs.update(temperature=temperature, top_k=0, top_p=1.0)
        else:
            generate_kwargs.update(temperature=None, top_k=None, top_p=None)
        if ignore_eos:  # fixed-length generation, for benchmarks
            generate_kwargs.update(min_new_tokens=max_tokens)
        if stop:
            generate_kwargs.update(stop_strings=list(stop), tokenizer=self.tokenizer)
        with torch.no_grad():
            out = self.model.generate(input_ids, attention_mask=torch.ones_like(input_ids), **generate_kwargs)
        prompt_len = input_ids.shape[1]
        new_tokens = out.sequences[:, prompt_len:]
        step_logprobs = None
        if logprobs:
            step_logprobs = torch.stack(out.logits, dim=1).float().log_softmax(-1)  # [n, steps, vocab]
        return [self._completion(i, new_tokens[i], step_logprobs, prompt_len, stop, prefill or "", tools)
                for i in range(n)]

    def _completion(self, i: int, tokens: torch.Tensor, step_logprobs, prompt_len: int, stop,
                    prefill: str = "", tools: list[ToolSchema] | None = None) -> Completion:
        eos_ids = self._eos_ids()
        ids = tokens.tolist()
        length = next((k for k, t in enumerate(ids) if t in eos_ids), len(ids))
        finish = "stop" if length < len(ids) else "length"
        ids = ids[:length]
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        if stop:
            cut = min((text.find(s) for s in stop if s in text), default=-1)
            if cut >= 0:
                text, finish = text[:cut], "stop"
        token_logprobs = None
        if step_logprobs is not None:
            token_logprobs = tuple(
                TokenLogprob(self.tokenizer.decode([t]), float(step_logprobs[i, k, t]), t) for k, t in enumerate(ids)
            )
        return completion_from_text(
            prefill + text,
            formats=self.formats,
            finish_reason=finish,
            logprobs=token_logprobs,
            usage=Usage(prompt_tokens=prompt_len, completion_tokens=len(ids)),
            tools=tools,
        )

    def _eos_ids(self) -> set[int]:
        ids = self.model.generation_config.eos_token_id
        ids = ids if isinstance(ids, list) else [ids]
        return {i for i in ids + [self.tokenizer.eos_token_id] if i is not None}

    def forward(self, messages: list[Message], tools: list[ToolSchema] | None = None, *, prefill: str = "") -> ForwardPass:
        """Logits of the next token and per-layer hidden states, at the point the model would answer.

        ``prefill`` is text already placed after the generation prompt (e.g. an opening tag).
        """
        input_ids = self._encode(self.render(messages, tools) + prefill)
        with torch.no_grad():
            out = self.model(input_ids, output_hidden_states=True)
        return ForwardPass(
            input_ids=input_ids[0].cpu(),
            next_token_logits=out.logits[0, -1].float().cpu(),
            hidden_states=tuple(h[0].float().cpu() for h in out.hidden_states),
        )

    def next_token_logits(self, messages: list[Message], tools: list[ToolSchema] | None = None, *, prefill: str = "") -> torch.Tensor:
        return self.forward(messages, tools, prefill=prefill).next_token_logits
