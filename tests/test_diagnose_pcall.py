"""P(call) on known logits, the call opening detected from a model's own greedy calls, and the
agreement of P(call) > 0.5 with greedy calling."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from kate.diagnose.pcall import agreement, detect_opening, opening_ids, opening_probability, p_call_from_logits


class TinyTokenizer:
    """Words of a fixed vocabulary; "```" and "<tool_call>" are single tokens."""

    vocab = ["```", "<tool_call>", "json", "{", "The", "answer", "is", "\\boxed{4}", "\n", "I"]

    def __call__(self, text, add_special_tokens=False):
        ids, rest = [], text
        while rest:
            rest = rest.lstrip(" ")
            token = max((t for t in self.vocab if rest.startswith(t)), key=len, default=None)
            if token is None:
                rest = rest[1:]
                continue
            ids.append(self.vocab.index(token))
            rest = rest[len(token):]
        return SimpleNamespace(input_ids=ids)

    def decode(self, ids):
        return "".join(self.vocab[i] for i in ids)


def logits_of(probs):
    return torch.log(torch.tensor(probs, dtype=torch.float32))


def test_p_call_on_known_logits():
    # p(opening)=0.3, best other=0.5: 0.3 / 0.8
    assert p_call_from_logits(logits_of([0.3, 0.5, 0.2]), 0) == pytest.approx(0.375)
    assert p_call_from_logits(logits_of([0.6, 0.3, 0.1]), [0]) == pytest.approx(2 / 3)
    # two openings add: (0.3 + 0.25) / (0.55 + 0.45)
    assert p_call_from_logits(logits_of([0.3, 0.45, 0.25]), [0, 2]) == pytest.approx(0.55)
    assert opening_probability(logits_of([0.3, 0.45, 0.25]), [0, 2]) == pytest.approx(0.55)
    # extreme logits stay finite (computed in log space)
    assert p_call_from_logits(torch.tensor([0.0, 200.0, -50.0]), 0) == pytest.approx(math.exp(-200), abs=1e-30)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        p_call_from_logits(torch.zeros(3), 5)
    with pytest.raises(ValueError, match="at least one"):
        p_call_from_logits(torch.zeros(3), [])


def test_p_call_above_half_iff_the_opening_is_the_argmax():
    generator = torch.Generator().manual_seed(0)
    for _ in range(200):
        logits = torch.randn(50, generator=generator) * 3
        assert (p_call_from_logits(logits, 7) > 0.5) == (int(logits.argmax()) == 7)


def test_the_opening_is_detected_from_the_models_own_calls():
    tok = TinyTokenizer()
    outputs = ['```json\n{"name": "calculator"}', "```json {}", "<tool_call>{}", "The answer is \\boxed{4}", "```"]
    called = [True, True, True, False, False]
    found = detect_opening(tok, outputs, called)
    assert found.token == "```" and found.token_id == 0
    assert (found.calls, found.calls_starting, found.others, found.others_starting) == (3, 2, 2, 1)
    assert found.call_firsts == ((0, "```", 2), (1, "<tool_call>", 1))
    assert found.ids() == [0, 1] and found.ids(min_calls=2) == [0]
    assert opening_ids(tok, ["<tool_call>", "```json"]) == [0, 1]
    with pytest.raises(ValueError, match="set it explicitly"):
        detect_opening(tok, ["I answer"], [False])


def test_agreement_with_greedy_calls():
    result = agreement([0.9, 0.2, 0.7, 0.4], [True, False, False, True])
    assert result["agree"] == 0.5 and result["p_high_not_called"] == 1 and result["p_low_called"] == 1
    with pytest.raises(ValueError):
        agreement([0.1], [])
