"""Hidden states at the last K prompt tokens: padding on either side gives the same states as one
unpadded forward pass (the authors' index arithmetic is right for right padding only); P(call)
from the same pass agrees with greedy decoding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kate.diagnose.hidden import decision_states, encode_prompt, last_k_index, pad_batch
from kate.diagnose.pcall import p_call, p_call_from_logits

PROMPTS = [
    ([{"role": "user", "content": "What is 2 + 2?"}], None),
    ([{"role": "user", "content": "Tell me a long story about a dragon and a knight at the edge of a forest."}], None),
    ([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}], None),
]


def test_padding_either_side_locates_the_same_tokens():
    sequences = [[5, 6, 7], [1, 2, 3, 4, 5]]
    left, right = pad_batch(sequences, 0, "left"), pad_batch(sequences, 0, "right")
    assert left["input_ids"].tolist() == [[0, 0, 5, 6, 7], [1, 2, 3, 4, 5]]
    assert right["input_ids"].tolist() == [[5, 6, 7, 0, 0], [1, 2, 3, 4, 5]]
    assert left["position_ids"].tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]]
    assert right["position_ids"].tolist() == [[0, 1, 2, 0, 0], [0, 1, 2, 3, 4]]
    for batch in (left, right):
        index = last_k_index(batch["last"], 2)
        rows = torch.arange(2).unsqueeze(1)
        assert batch["input_ids"][rows, index].tolist() == [[6, 7], [4, 5]]
    # the authors' arithmetic (index = attention_mask.sum() - 1) is right only for right padding
    authors = lambda batch: batch["attention_mask"].sum(1) - 1  # noqa: E731
    assert authors(right).tolist() == right["last"].tolist() == [2, 4]
    assert authors(left).tolist() == [2, 4] != left["last"].tolist() == [4, 4]
    with pytest.raises(ValueError, match="padding side"):
        pad_batch(sequences, 0, "middle")


@pytest.mark.model
def test_left_and_right_padding_give_the_unpadded_states(small_hf):
    kwargs = dict(k=6, batch_size=3, progress=False, next_token=lambda logits: logits.clone())
    left = decision_states(small_hf, PROMPTS, padding_side="left", **kwargs)
    right = decision_states(small_hf, PROMPTS, padding_side="right", **kwargs)
    layers = small_hf.model.config.num_hidden_layers + 1
    assert left.states.shape == (3, layers, 6, small_hf.model.config.hidden_size) and left.positions[-1] == -1
    scale = float(np.abs(left.states).max())
    assert np.allclose(left.states, right.states, rtol=1e-4, atol=1e-5 * scale)
    for i, (messages, tools) in enumerate(PROMPTS):
        one = small_hf.forward(messages)  # one prompt, no padding at all
        expected = np.stack([h[-6:].numpy() for h in one.hidden_states])
        assert left.prompt_tokens[i] == len(one.input_ids) == len(encode_prompt(small_hf, messages))
        assert np.allclose(left.states[i], expected, rtol=1e-4, atol=1e-5 * scale)
        assert torch.allclose(left.next_token[i], one.next_token_logits, atol=1e-3)
    chosen = decision_states(small_hf, PROMPTS[:1], k=2, layers=[0, -1], progress=False)
    assert chosen.layers == (0, layers - 1) and np.allclose(chosen.states[0, 1], left.states[0, -1, -2:], rtol=1e-4,
                                                            atol=1e-5 * scale)  # fmt: skip


@pytest.mark.model
def test_p_call_above_half_iff_greedy_starts_with_the_opening(small_hf):
    [first] = small_hf.chat(PROMPTS[0][0], max_tokens=1, logprobs=True)
    opening = first.logprobs[0].token_id  # treat prompt 0's greedy first token as the "call opening"
    states = decision_states(small_hf, PROMPTS, k=1, layers=[0], progress=False,
                             next_token=lambda logits: p_call_from_logits(logits, opening))  # fmt: skip
    for (messages, tools), value in zip(PROMPTS, states.next_token):
        [greedy] = small_hf.chat(messages, max_tokens=1, logprobs=True)
        assert (value > 0.5) == (greedy.logprobs[0].token_id == opening)
    assert states.next_token[0] > 0.5
    assert states.next_token[1] == pytest.approx(p_call(small_hf, *PROMPTS[1], opening), abs=1e-4)
