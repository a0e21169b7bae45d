"""Hidden states at the decision point: every layer's state at the last K prompt tokens (default
20), from the ``hf`` client, for batches of prompts.

Padding is handled explicitly, either side: each prompt's last real token is located from where
its own tokens were placed (the authors' ``attention_mask.sum() - 1`` is that index only under
right padding), and position ids are counted from each prompt's first real token (the model's
default ``arange`` shifts a left-padded prompt; rotary models do not mind, absolute-position ones
would). Left and right padding give the same states, and the same as one unpadded forward pass
(``HFChatModel.forward``), up to float rounding. Position ``-1`` is the last prompt token (the
end of the generation prompt), where the model's answer would begin.

``next_token``, when given, is applied to each prompt's next-token logits in the same pass (e.g.
``kate.diagnose.pcall.p_call_from_logits``), so P(call) costs no second forward pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from kate.llm.base import Message, ToolSchema

PADDING_SIDES = ("left", "right")
Prompt = tuple[Sequence[Message], Sequence[ToolSchema] | None]


@dataclass(frozen=True)
class DecisionStates:
    """``states[i, l, j]``: prompt i, hidden-state index ``layers[l]`` (0 = embeddings), position
    ``positions[j]`` (negative: counted from the prompt's end)."""

    states: np.ndarray  # [n, layers, K, d]
    layers: tuple[int, ...]
    positions: tuple[int, ...]
    prompt_tokens: tuple[int, ...]
    next_token: tuple[Any, ...] | None = None


def encode_prompt(model: Any, messages: Sequence[Message], tools: Sequence[ToolSchema] | None = None,
                  prefill: str = "") -> list[int]:  # fmt: skip
    """The token ids the client would send for this prompt (its chat template, no added specials)."""
    text = model.render([dict(m) for m in messages], list(tools) if tools else None) + prefill
    return list(model.tokenizer(text, add_special_tokens=False).input_ids)


def pad_batch(sequences: Sequence[Sequence[int]], pad_id: int, side: str) -> dict[str, torch.Tensor]:
    """``input_ids``, ``attention_mask``, ``position_ids`` (counted per prompt from its first real
    token; 0 on padding) and ``last`` (each prompt's last real index), padded on ``side``."""
    if side not in PADDING_SIDES:
        raise ValueError(f"padding side must be one of {PADDING_SIDES}, got {side!r}")
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    positions = torch.zeros((len(sequences), width), dtype=torch.long)
    last = torch.zeros(len(sequences), dtype=torch.long)
    for row, sequence in enumerate(sequences):
        start = width - len(sequence) if side == "left" else 0
        ids[row, start : start + len(sequence)] = torch.tensor(list(sequence), dtype=torch.long)
        mask[row, start : start + len(sequence)] = 1
        positions[row, start : start + len(sequence)] = torch.arange(len(sequence))
        last[row] = start + len(sequence) - 1
    return {"input_ids": ids, "attention_mask": mask, "position_ids": positions, "last": last}


def last_k_index(last: torch.Tensor, k: int) -> torch.Tensor:
    """``[batch, k]`` indices of each prompt's last k real tokens, in order (the last one last)."""
    return last.unsqueeze(1) - torch.arange(k - 1, -1, -1).unsqueeze(0)


def _forward_batch(model: Any, sequences: Sequence[Sequence[int]], k: int, layers: Sequence[int] | None,
                   side: str, want_logits: bool) -> tuple[np.ndarray, torch.Tensor | None]:  # fmt: skip
    batch = pad_batch(sequences, model.tokenizer.pad_token_id, side)
    last = batch.pop("last")
    device = model.device
    with torch.no_grad():
        out = model.model(**{name: t.to(device) for name, t in batch.items()}, output_hidden_states=True,
                          logits_to_keep=last.unsqueeze(1).to(device) if want_logits else 1)  # fmt: skip
    chosen = range(len(out.hidden_states)) if layers is None else layers
    index = last_k_index(last, k).to(device)  # [b, k]
    rows = torch.arange(len(sequences), device=device).unsqueeze(1)
    states = torch.stack([out.hidden_states[layer][rows, index] for layer in chosen], dim=1)  # [b, L, k, d]
    logits = out.logits[:, -1].float().cpu() if want_logits else None
    return states.float().cpu().numpy(), logits


def decision_states(model: Any, prompts: Sequence[Prompt], *, k: int = 20, layers: Sequence[int] | None = None,
                    batch_size: int = 8, padding_side: str = "left", prefill: str = "",
                    dtype: np.dtype | str = np.float32, next_token: Callable[[torch.Tensor], Any] | None = None,
                    progress: bool = True, desc: str = "hidden states") -> DecisionStates:  # fmt: skip
    """States at the last ``k`` prompt tokens of each ``(messages, tools)`` prompt, every layer (or
    the given hidden-state indices). Prompts are batched by length; the result keeps their order."""
    if k < 1 or batch_size < 1:
        raise ValueError(f"k and batch_size must be >= 1, got k={k}, batch_size={batch_size}")
    if padding_side not in PADDING_SIDES:
        raise ValueError(f"padding_side must be one of {PADDING_SIDES}, got {padding_side!r}")
    encoded = [encode_prompt(model, messages, tools, prefill) for messages, tools in prompts]
    short = [i for i, ids in enumerate(encoded) if len(ids) < k]
    if short:
        raise ValueError(f"prompt {short[0]} has {len(encoded[short[0]])} tokens, fewer than k={k}")
    count = model.model.config.num_hidden_layers + 1
    chosen = tuple(range(count)) if layers is None else tuple(l if l >= 0 else count + l for l in layers)
    if any(not 0 <= l < count for l in chosen):
        raise ValueError(f"layers must be hidden-state indices in 0..{count - 1} (0 = embeddings), got {layers}")
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    out: np.ndarray | None = None
    kept: list[Any] = [None] * len(encoded)
    for start in tqdm(range(0, len(order), batch_size), desc=desc, unit="batch", disable=not progress):
        members = order[start : start + batch_size]
        states, logits = _forward_batch(model, [encoded[i] for i in members], k, chosen, padding_side,
                                        next_token is not None)  # fmt: skip
        if out is None:
            out = np.zeros((len(encoded), *states.shape[1:]), dtype=dtype)
        out[members] = states
        if next_token is not None and logits is not None:
            for row, i in enumerate(members):
                kept[i] = next_token(logits[row])
    if out is None:
        raise ValueError("no prompts given")
    return DecisionStates(out, chosen, tuple(range(-k, 0)), tuple(len(e) for e in encoded),
                          tuple(kept) if next_token is not None else None)  # fmt: skip
