"""The llama.cpp backend on real models: batched n-sampling over one shared prefill."""

from __future__ import annotations

import pytest

from kate.llm.base import ChatModel
from kate.toolcall import ToolCall

from .conftest import CALCULATOR, SMALL_TEST_MODEL

HELLO = [{"role": "user", "content": "Say hello to Ada in one short sentence."}]


def test_small_model_chats(small_llamacpp):
    assert isinstance(small_llamacpp, ChatModel)
    [c] = small_llamacpp.chat(HELLO, max_tokens=24)
    assert c.text.strip()
    assert c.usage.prompt_tokens > 0 and 0 < c.usage.completion_tokens <= 24
    assert c.finish_reason in {"stop", "length"}


def test_greedy_samples_agree_with_single_greedy(small_llamacpp):
    # On a fresh cache. The session's model has served other prompts, and where a prompt's cells sit in
    # the unified cache changes llama.cpp's summation order (kate.llm.llamacpp_batch, Numerics), so on
    # a used cache a greedy near-tie can flip between one sample and n.
    from kate.llm.llamacpp import LlamaCppChatModel

    fresh = LlamaCppChatModel(SMALL_TEST_MODEL, n_ctx=2048, max_parallel=4)
    try:
        [single] = fresh.chat(HELLO, max_tokens=16)
        many = fresh.chat(HELLO, n=3, max_tokens=16)
    finally:
        fresh.close()
    assert [c.text for c in many] == [single.text] * 3


def test_sampling_is_seeded_and_varied(small_llamacpp):
    a = small_llamacpp.chat(HELLO, n=4, temperature=1.2, max_tokens=12, seed=7, logprobs=True)
    b = small_llamacpp.chat(HELLO, n=4, temperature=1.2, max_tokens=12, seed=7, logprobs=True)
    assert [c.text for c in a] == [c.text for c in b]
    assert len({c.text for c in a}) > 1
    for c in a:
        assert c.logprobs is not None and len(c.logprobs) == c.usage.completion_tokens
        assert all(t.logprob <= 0 for t in c.logprobs)


def test_more_samples_than_parallel_slots_run_in_rounds(small_llamacpp):
    out = small_llamacpp.chat(HELLO, n=6, temperature=1.0, max_tokens=6, seed=1)
    assert len(out) == 6  # max_parallel is 4 in the fixture


def test_prefix_cache_gives_the_same_answer_as_a_cold_prompt(small_llamacpp):
    history = HELLO + [{"role": "assistant", "content": "Hello, Ada!"}, {"role": "user", "content": "Now say bye."}]
    small_llamacpp.chat(HELLO, max_tokens=8)  # leaves HELLO's prefix in the cache
    warm = small_llamacpp.chat(history, max_tokens=12)[0].text
    small_llamacpp.chat([{"role": "user", "content": "unrelated"}], max_tokens=2)  # evicts it
    cold = small_llamacpp.chat(history, max_tokens=12)[0].text
    assert warm == cold


def test_stop_strings_cut_the_text(small_llamacpp):
    [c] = small_llamacpp.chat(HELLO, max_tokens=24, stop=[" "])
    assert " " not in c.text and c.finish_reason == "stop"


def test_prompt_too_long_is_a_clear_error(small_llamacpp):
    with pytest.raises(ValueError, match="exceeds n_ctx"):
        small_llamacpp.chat([{"role": "user", "content": "word " * 3000}], max_tokens=8)


def test_usage_counts_the_prompt_tokens_the_prefix_cache_held(small_llamacpp):
    history = [{"role": "user", "content": "Name three colours."}]
    [first] = small_llamacpp.chat(history, max_tokens=8)
    history += [{"role": "assistant", "content": first.text}, {"role": "user", "content": "And three more?"}]
    [second] = small_llamacpp.chat(history, max_tokens=8)
    # the first call's prompt is the second's prefix (its cells were kept), the rest is new
    assert 0 < second.usage.cached_tokens < second.usage.prompt_tokens
    assert first.usage.cached_tokens <= first.usage.prompt_tokens


@pytest.mark.model
def test_kv_cells_below_the_window_is_a_clear_error():
    from kate.llm.llamacpp import LlamaCppChatModel

    with pytest.raises(ValueError, match="kv_cells"):
        LlamaCppChatModel(SMALL_TEST_MODEL, n_ctx=2048, kv_cells=1024)


def test_tools_without_template_support_are_prompted(small_llamacpp):
    prompt = small_llamacpp.render([{"role": "user", "content": "2+2?"}], [CALCULATOR])
    assert "calculator" in prompt and "<tool_call>" in prompt


@pytest.mark.model
def test_default_model_calls_the_calculator(default_llamacpp):
    [c] = default_llamacpp.chat([{"role": "user", "content": "What is 1234 * 5678?"}], [CALCULATOR], max_tokens=64)
    assert c.parse_error is None, c.text
    assert len(c.tool_calls) == 1
    call = c.tool_calls[0]
    assert isinstance(call, ToolCall) and call.name == "calculator"
    assert call.arguments["expression"].replace(" ", "") in {"1234*5678", "1234x5678"}


def test_the_client_lists_the_extra_options_it_takes(small_llamacpp):
    from kate.llm.base import supports

    assert all(supports(small_llamacpp, o) for o in ("top_p", "top_logprobs", "prefill"))
    assert not supports(small_llamacpp, "tool_choice")


def test_prefill_starts_the_answer_and_counts_only_generated_tokens(small_llamacpp):
    [plain] = small_llamacpp.chat(HELLO, max_tokens=8)
    [c] = small_llamacpp.chat(HELLO, max_tokens=8, prefill="Dear Ada,", logprobs=True)
    assert c.text.startswith("Dear Ada,") and len(c.text) > len("Dear Ada,")
    assert c.logprobs is not None and len(c.logprobs) == c.usage.completion_tokens <= 8
    assert c.usage.prompt_tokens > plain.usage.prompt_tokens
    assert "".join(t.token for t in c.logprobs) == c.text[len("Dear Ada,") :]


@pytest.mark.model
def test_a_prefilled_tool_call_parses_as_that_function(default_llamacpp):
    from kate.demo import DEMO_TOOLS

    prefill = '<tool_call>\n{"name": "get_weather", "arguments": '  # the 135M model cannot finish it
    ask = [{"role": "user", "content": "Is it raining in Paris?"}]
    [c] = default_llamacpp.chat(ask, DEMO_TOOLS, max_tokens=40, prefill=prefill, stop=["</tool_call>"])
    assert c.text.startswith(prefill)
    assert c.parse_error is None, c.text
    assert [call.name for call in c.tool_calls] == ["get_weather"]


@pytest.mark.model
def test_stop_after_call_ends_the_reply_at_its_first_call_and_keeps_that_call(default_llamacpp):
    from kate.demo import DEMO_TOOLS
    from kate.toolcall import parse_first_call

    ask = [{"role": "user", "content": "What is the weather in Paris, in Rome and in Oslo?"}]
    [cut] = default_llamacpp.chat(ask, DEMO_TOOLS, max_tokens=96, stop_after_call=True)
    [full] = default_llamacpp.chat(ask, DEMO_TOOLS, max_tokens=96)
    assert full.text.startswith(cut.text) and cut.usage.completion_tokens <= full.usage.completion_tokens
    assert parse_first_call(cut.text).calls == parse_first_call(full.text).calls
    assert [c.name for c in parse_first_call(cut.text).calls] == ["get_weather"]


def test_top_logprobs_are_sorted_and_led_by_the_greedy_token(small_llamacpp):
    [c] = small_llamacpp.chat(HELLO, max_tokens=10, logprobs=True, top_logprobs=5)
    assert c.logprobs is not None and c.logprobs
    for t in c.logprobs:
        assert len(t.top) == 5
        assert [lp for _, lp in t.top] == sorted((lp for _, lp in t.top), reverse=True)
        assert t.top[0] == (t.token, t.logprob)  # greedy: the chosen token is the most likely one
        assert all(lp <= 0 for _, lp in t.top)
    [plain] = small_llamacpp.chat(HELLO, max_tokens=10, logprobs=True)
    assert plain.text == c.text and all(t.top == () for t in plain.logprobs)


def test_a_sampled_token_is_among_the_alternatives_when_it_is_likely_enough(small_llamacpp):
    out = small_llamacpp.chat(HELLO, n=2, temperature=1.0, max_tokens=8, seed=3, logprobs=True, top_logprobs=3)
    for c in out:
        for t in c.logprobs:
            assert len(t.top) == 3 and t.logprob <= t.top[0][1]
            if t.logprob > t.top[-1][1]:
                assert (t.token, t.logprob) in t.top


def test_the_log_drops_the_cache_size_warning_and_keeps_the_rest(capsys):
    from llama_cpp import _logger

    from kate.llm import llamacpp_log

    llamacpp_log.quiet_cache_warning()
    [callback] = llamacpp_log._installed
    level = _logger.logger.level
    _logger.set_verbose(False)  # errors only, as kate loads models
    try:
        callback(3, b"llama_context: n_ctx_seq (65536) > n_ctx_train (32768) -- possible training context overflow\n", None)
        callback(3, b"llama_model_load: error loading model\n", None)
    finally:
        _logger.logger.setLevel(level)
    err = capsys.readouterr().err
    assert "n_ctx_train" not in err and "error loading model" in err
