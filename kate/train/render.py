"""Training text in the model's own chat format, rendered by the renderer inference uses
(``kate.llm.chat_template.render_chat`` over the model's template), and tokenized so that the loss
covers exactly the assistant step.

A step's ``prompt`` is the history as sent (knowledge included) rendered with the generation prompt;
its ``completion`` is what the template writes for the assistant message after it, up to and
including the end-of-turn token (Qwen2.5: ``<tool_call>...</tool_call><|im_end|>``, or the answer
text and ``<|im_end|>``). Prompt and completion are tokenized apart, the way inference sees them
(the prompt alone, then generated tokens), and ``completion_mask`` marks the completion's tokens.
TRL's own chat-template path is not used, so its swap of a training template with generation
markers (done only for templates byte-identical to its own) is never needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kate.io import atomic_folder
from kate.llm.base import Message, ToolSchema
from kate.llm.chat_template import render_chat
from kate.toolcall import ToolCall, to_openai_tool_calls


class RenderError(ValueError):
    """The template renders a prompt that is not a prefix of the prompt plus its completion."""


def assistant_message(calls: Sequence[ToolCall], answer: str | None) -> Message:
    """The target step as the loop writes it into a history (``kate.envs.actions.ToolCallActions``)."""
    if calls:
        return {"role": "assistant", "content": "", "tool_calls": to_openai_tool_calls(tuple(calls))}
    return {"role": "assistant", "content": answer or ""}


@dataclass
class StepRenderer:
    """Renders and tokenizes steps for one tokenizer (its chat template, end-of-turn token)."""

    tokenizer: Any
    template: str | None = None

    def __post_init__(self) -> None:
        self.template = self.template or self.tokenizer.chat_template
        if not self.template:
            raise ValueError("the tokenizer has no chat template; pass template=")
        self.eos = self.tokenizer.eos_token or ""
        self.bos = self.tokenizer.bos_token or ""

    def prompt_text(self, prompt: list[Message], tools: list[ToolSchema] | None) -> str:
        return render_chat(self.template, prompt, tools, bos_token=self.bos, eos_token=self.eos)

    def completion_text(self, prompt: list[Message], tools: list[ToolSchema] | None, target: Message) -> str:
        head = self.prompt_text(prompt, tools)
        full = render_chat(self.template, [*prompt, target], tools, bos_token=self.bos, eos_token=self.eos,
                           add_generation_prompt=False)
        if not full.startswith(head):
            raise RenderError("the rendered prompt is not a prefix of prompt + completion under this template")
        tail = full[len(head):]
        if self.eos and self.eos in tail:
            tail = tail[: tail.index(self.eos) + len(self.eos)]
        return tail

    def encode(self, prompt_text: str, completion_text: str) -> tuple[list[int], list[int]]:
        """``(input_ids, completion_mask)``: the prompt's tokens then the completion's, mask 1 on the latter."""
        prompt_ids = self.tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
        completion_ids = self.tokenizer(completion_text, add_special_tokens=False)["input_ids"]
        return prompt_ids + completion_ids, [0] * len(prompt_ids) + [1] * len(completion_ids)


def _cached_folder(model: str) -> Path | None:
    """Where a kate GGUF model's tokenizer is kept once converted (reading it from the GGUF takes ~30 s)."""
    from kate.llm.registry import MODELS, cache_dir

    spec = MODELS.get(model)
    if spec is None or spec.kind != "gguf":
        return None
    return cache_dir() / f"{model}-tokenizer-{spec.sha256[:12]}"


def load_tokenizer(model: str) -> Any:
    """The HF tokenizer of a kate model name, a .gguf path or an HF folder (local files only)."""
    from transformers import AutoTokenizer

    from kate.llm.hf import _resolve

    cached = _cached_folder(model)
    if cached is not None and (cached / "tokenizer_config.json").exists():
        tokenizer = AutoTokenizer.from_pretrained(str(cached), local_files_only=True)
    else:
        source, extra = _resolve(model)
        if not Path(source).exists():
            raise FileNotFoundError(f"{model!r}: neither a kate model, a .gguf file nor a local folder")
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True, **extra)
        if cached is not None:
            with atomic_folder(cached) as tmp:
                tokenizer.save_pretrained(str(tmp))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer
