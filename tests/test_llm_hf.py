"""The transformers backend on the real 135M model (GGUF dequantized): chat, batched n, and the
internals the diagnostics read (next-token logits, per-layer hidden states)."""

from __future__ import annotations

import pytest

from kate.llm.base import ChatModel

HELLO = [{"role": "user", "content": "Say hello to Ada in one short sentence."}]


def test_chat_and_batched_samples(small_hf):
    assert isinstance(small_hf, ChatModel)
    [greedy] = small_hf.chat(HELLO, max_tokens=12)
    assert greedy.text.strip() and greedy.usage.completion_tokens <= 12
    sampled = small_hf.chat(HELLO, n=3, temperature=1.0, max_tokens=8, seed=3, logprobs=True)
    assert len(sampled) == 3
    for c in sampled:
        assert c.logprobs is not None and len(c.logprobs) == c.usage.completion_tokens
    again = small_hf.chat(HELLO, n=3, temperature=1.0, max_tokens=8, seed=3)
    assert [c.text for c in again] == [c.text for c in sampled]


def test_greedy_is_the_argmax_of_next_token_logits(small_hf):
    logits = small_hf.next_token_logits(HELLO)
    first = small_hf.tokenizer.decode([int(logits.argmax())])
    [c] = small_hf.chat(HELLO, max_tokens=1, logprobs=True)
    assert c.logprobs[0].token == first


def test_hidden_states_cover_every_layer(small_hf):
    out = small_hf.forward(HELLO)
    config = small_hf.model.config
    assert len(out.hidden_states) == config.num_hidden_layers + 1
    assert out.hidden_states[-1].shape == (len(out.input_ids), config.hidden_size)
    assert out.next_token_logits.shape[-1] == config.vocab_size


@pytest.mark.model  # makes the transformers client (it fails before loading)
def test_unknown_model_without_hub_is_a_clear_error():
    from kate.llm.hf import HFChatModel

    with pytest.raises(FileNotFoundError, match="allow_hub"):
        HFChatModel("some-org/some-model")
