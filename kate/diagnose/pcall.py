"""P(call) at the decision point, from next-token logits (arXiv 2605.14038):

    P(call) = p(opening) / (p(opening) + p(best other token))

where "opening" is the first token of *this model's own* call format. Qwen2.5-Coder-0.5B never
writes ``<tool_call>``: it opens a call with a bare ``{"`` or with a ```json fence, varying between
prompts, so the openings are detected from the model's greedy
calls (``detect_opening``; ``.ids()`` is every first token its calls used) or given
(``opening_ids`` of strings such as ``"<tool_call>"``). Several opening tokens may be given; their
probabilities add (with only the most common opening, P(call) misses the calls that open with
another). P(call) > 0.5 exactly when an
opening token outranks every other token, i.e. when greedy decoding starts a call
(``agreement`` measures how often that matches the greedy run's parsed calls).

The same function serves VectraYX's first-token probe (P(<|tool_call|>) at the decision point, and
across checkpoints): ``opening_probability`` is the raw softmax mass of the opening.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kate.llm.base import Message, ToolSchema


def _ids(opening_ids: Sequence[int] | int) -> list[int]:
    ids = [int(opening_ids)] if isinstance(opening_ids, int) else sorted({int(i) for i in opening_ids})
    if not ids:
        raise ValueError("at least one opening token id is needed")
    return ids


def opening_probability(logits: torch.Tensor, opening_ids: Sequence[int] | int) -> float:
    """The softmax probability mass of the opening token(s) among all next tokens."""
    probs = torch.softmax(logits.float().reshape(-1), dim=-1)
    return float(probs[_ids(opening_ids)].sum())


def p_call_from_logits(logits: torch.Tensor, opening_ids: Sequence[int] | int) -> float:
    """P(call) = p(opening) / (p(opening) + p(best other token)) from one next-token logit vector."""
    logits = logits.float().reshape(-1)
    ids = _ids(opening_ids)
    if max(ids) >= logits.numel() or min(ids) < 0:
        raise ValueError(f"opening ids {ids} outside the vocabulary of {logits.numel()} tokens")
    log_probs = torch.log_softmax(logits, dim=-1)
    opening = torch.logsumexp(log_probs[ids], dim=0)
    others = log_probs.clone()
    others[ids] = float("-inf")
    best_other = others.max()
    return float(torch.sigmoid(opening - best_other))  # p_o / (p_o + p_b), computed in log space


def opening_ids(tokenizer: Any, openings: Sequence[str]) -> list[int]:
    """The first token id of each opening string (e.g. ``"```"``, ``"<tool_call>"``)."""
    ids = []
    for text in openings:
        encoded = tokenizer(text, add_special_tokens=False).input_ids
        if not encoded:
            raise ValueError(f"opening {text!r} encodes to no tokens")
        ids.append(int(encoded[0]))
    return sorted(set(ids))


@dataclass(frozen=True)
class OpeningDetection:
    """The detected call opening and how well it separates calls from non-calls in the greedy run.

    ``token_id`` is the most common first token of the calls; ``call_firsts`` counts every first
    token the calls began with (a model may open with a fence one time and a bare ``{`` the next:
    ``ids(min_calls)`` gives the openings seen at least that often, for ``p_call_from_logits``)."""

    token_id: int
    token: str
    calls: int  # outputs that parsed as calls
    calls_starting: int  # of those, how many start with the token
    others: int  # outputs that did not
    others_starting: int
    call_firsts: tuple[tuple[int, str, int], ...] = ()  # (token id, token, calls starting with it), most first

    def ids(self, min_calls: int = 1) -> list[int]:
        return sorted(t for t, _, count in self.call_firsts if count >= min_calls) or [self.token_id]

    def to_dict(self) -> dict[str, Any]:
        return {"token_id": self.token_id, "token": self.token, "calls": self.calls,
                "calls_starting": self.calls_starting, "others": self.others, "others_starting": self.others_starting,
                "call_firsts": [list(x) for x in self.call_firsts]}  # fmt: skip


def detect_opening(tokenizer: Any, outputs: Sequence[str], called: Sequence[bool]) -> OpeningDetection:
    """The most common first token of the greedy outputs that parsed as calls (ties: lowest id)."""
    if len(outputs) != len(called):
        raise ValueError(f"{len(outputs)} outputs but {len(called)} called flags")
    firsts = [_first_token(tokenizer, text) for text in outputs]
    of_calls = Counter(f for f, c in zip(firsts, called) if c and f is not None)
    if not of_calls:
        raise ValueError("no greedy output parsed as a call: the call opening cannot be detected; set it explicitly")
    ranked = sorted(of_calls, key=lambda t: (-of_calls[t], t))
    token_id = ranked[0]
    others = [f for f, c in zip(firsts, called) if not c]
    return OpeningDetection(token_id, tokenizer.decode([token_id]), sum(map(bool, called)), of_calls[token_id],
                            len(others), sum(f == token_id for f in others),
                            tuple((t, tokenizer.decode([t]), of_calls[t]) for t in ranked))  # fmt: skip


def _first_token(tokenizer: Any, text: str) -> int | None:
    ids = tokenizer(text, add_special_tokens=False).input_ids if text else []
    return int(ids[0]) if ids else None


def p_call(model: Any, messages: Sequence[Message], tools: Sequence[ToolSchema] | None,
           opening_ids: Sequence[int] | int, prefill: str = "") -> float:  # fmt: skip
    """P(call) of an ``hf`` client at the point it would answer this prompt (one forward pass)."""
    logits = model.next_token_logits([dict(m) for m in messages], list(tools) if tools else None, prefill=prefill)
    return p_call_from_logits(logits, opening_ids)


def agreement(p_calls: Sequence[float], called: Sequence[bool], threshold: float = 0.5) -> dict[str, Any]:
    """How often ``P(call) > threshold`` agrees with the greedy run's parsed calls."""
    if len(p_calls) != len(called):
        raise ValueError(f"{len(p_calls)} P(call) values but {len(called)} called flags")
    predicted = [p > threshold for p in p_calls]
    both = Counter(zip(predicted, (bool(c) for c in called)))
    n = len(called)
    return {"n": n, "agree": (both[(True, True)] + both[(False, False)]) / n if n else None,
            "p_high_called": both[(True, True)], "p_high_not_called": both[(True, False)],
            "p_low_called": both[(False, True)], "p_low_not_called": both[(False, False)]}  # fmt: skip
