"""The Python tool prompt (``tool_prompt=python``): BFCL's prompt-mode system prompt word for word, the
conversation in that form, replies read as a Python list of calls, and the one-call rule on them."""

from __future__ import annotations

import json

import pytest

from kate.llm.base import Completion
from kate.llm.chat_template import render_chat
from kate.llm.fake import FakeChatModel
from kate.llm.tool_prompt import PYTHON_TOOL_PROMPT, default_formats, python_prompt_messages
from kate.sampling.policy import GreedySampler, first_call_only
from kate.toolcall import ToolCall, parse_model_output, to_openai_tool_calls

from .conftest import CALCULATOR

QWEN_LIKE = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% if m.tool_calls %}TOOLCALLS{% endif %}\n"
             "{% endfor %}{% if tools %}TOOLS{% endif %}{% if add_generation_prompt %}<|assistant|>{% endif %}")


def test_the_system_prompt_is_bfcls_prompt_mode_default():
    formulate = pytest.importorskip("bfcl_eval.model_handler.utils").formulate_system_prompt
    fmt = pytest.importorskip("bfcl_eval.constants.default_prompts").DEFAULT_SYSTEM_PROMPT_FORMAT
    function = {"name": "add", "description": "Add two numbers, é.", "parameters": {"type": "dict", "properties": {}}}
    ours = python_prompt_messages([{"role": "user", "content": "hi"}], [{"type": "function", "function": function}])
    assert ours[0] == {"role": "system", "content": formulate(fmt, [function])}
    assert ours[1] == {"role": "user", "content": "hi"}


def test_a_conversations_own_system_message_follows_the_tools_and_calls_are_written_as_a_list():
    calls = to_openai_tool_calls([ToolCall("add", {"a": 1, "b": 2})])
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1+2?"},
                {"role": "assistant", "content": None, "tool_calls": calls},
                {"role": "tool", "tool_call_id": calls[0]["id"], "content": "3"}]  # fmt: skip
    out = python_prompt_messages(messages, [CALCULATOR])
    assert out[0]["content"].startswith(PYTHON_TOOL_PROMPT[:40]) and out[0]["content"].endswith("\n\nBe brief.")
    assert json.dumps([CALCULATOR["function"]], indent=4) in out[0]["content"]
    assert out[2] == {"role": "assistant", "content": "[add(a=1, b=2)]"}
    assert out[3] == messages[3]  # tool results stay tool messages


def test_render_shows_no_native_tool_block_in_the_python_form():
    messages = [{"role": "user", "content": "1+2?"}]
    native = render_chat(QWEN_LIKE, messages, [CALCULATOR])
    python = render_chat(QWEN_LIKE, messages, [CALCULATOR], tool_prompt="python")
    assert "TOOLS" in native and "You are an expert in composing functions" not in native
    assert "TOOLS" not in python and "You are an expert in composing functions" in python
    with pytest.raises(ValueError, match="tool_prompt"):
        render_chat(QWEN_LIKE, messages, [CALCULATOR], tool_prompt="xml")


@pytest.mark.parametrize("text, calls", [
    ("[add(a=1, b=2), add(a=3, b=4)]", [ToolCall("add", {"a": 1, "b": 2}), ToolCall("add", {"a": 3, "b": 4})]),
    ("add(a=1, b=2)", [ToolCall("add", {"a": 1, "b": 2})]),
    ("```python\n[m.add(a=1)]\n```", [ToolCall("m.add", {"a": 1})]),
    ("None of the functions can do this.", []),
])  # fmt: skip
def test_python_list_replies_parse_as_bfcl_reads_them(text, calls):
    parsed = parse_model_output(text, formats=default_formats("python"))
    assert parsed.ok and list(parsed.calls) == calls


@pytest.mark.parametrize("text", ["[add(a=1", "[add(a=true)]", "add(1, 2)"])
def test_a_call_attempt_that_does_not_parse_is_a_recorded_failure(text):
    parsed = parse_model_output(text, formats=("python_list",))
    assert not parsed.ok and not parsed.calls and parsed.error


def test_one_call_mode_keeps_the_first_call_of_a_python_list():
    model = FakeChatModel(["[add(a=1, b=2), add(a={'x': 1}, b=4)]"], formats=("python_list",))
    step = GreedySampler().act(model, [{"role": "user", "content": "1+2?"}], [CALCULATOR], one_call=True)
    assert list(step.calls) == [ToolCall("add", {"a": 1, "b": 2})] and step.parse_error is None
    native = Completion(text="[add(a=1)]")  # the JSON forms do not read Python: no call, as before
    assert first_call_only(native).tool_calls == ()


@pytest.mark.model
def test_the_default_model_writes_a_python_list_of_calls():
    from kate.llm.llamacpp import LlamaCppChatModel

    from .conftest import DEFAULT_AGENT_MODEL

    model = LlamaCppChatModel(DEFAULT_AGENT_MODEL, n_ctx=4096, max_parallel=2, tool_prompt="python")
    try:
        assert model.formats == ("python_list",)
        question = [{"role": "user", "content": "Compute 12 * 7 and also 3 + 4."}]
        reply = model.chat(question, [CALCULATOR], max_tokens=64)[0]
    finally:
        model.close()
    assert reply.parse_error is None, reply.text
    assert reply.tool_calls and {c.name for c in reply.tool_calls} == {"calculator"}, reply.text


def test_positional_arguments_bind_in_the_offered_schemas_order():
    from kate.llm.base import completion_from_text

    done = completion_from_text("[calculator('12 * 7')]", formats=("python_list",), tools=[CALCULATOR])
    assert list(done.tool_calls) == [ToolCall("calculator", {"expression": "12 * 7"})] and done.parse_error is None
    unknown = completion_from_text("[other(1)]", formats=("python_list",), tools=[CALCULATOR])
    assert not unknown.tool_calls and "positional" in unknown.parse_error
    native = completion_from_text("[calculator('12 * 7')]", tools=[CALCULATOR])  # the JSON forms: no call
    assert not native.tool_calls and native.parse_error is None


def _reply(text: str, formats: tuple[str, ...], prompt_tokens: int) -> Completion:
    from kate.llm.base import Usage, completion_from_text

    return completion_from_text(text, formats=formats, usage=Usage(prompt_tokens, 5), tools=[CALCULATOR])


def test_both_forms_keep_the_python_reply_only_where_it_makes_several_calls():
    from kate.llm.tool_prompt import choose_forms

    native = [_reply('{"name": "calculator", "arguments": {"expression": "1+1"}}', ("hermes", "json"), 100)] * 3
    python = [_reply(t, ("python_list",), 120) for t in ("[calculator('1+1'), calculator('2+2')]",
                                                         "[calculator('1+1')]", "No function fits.")]
    chosen = choose_forms(native, python)
    assert [len(c.tool_calls) for c in chosen] == [2, 1, 1]
    assert chosen[0].text == python[0].text and chosen[1].text == chosen[2].text == native[0].text
    assert all(c.usage.prompt_tokens == 220 and c.usage.completion_tokens == 10 for c in chosen)  # both were paid


def test_a_closed_gate_keeps_every_native_reply():
    from kate.llm.tool_prompt import ask_both

    native = _reply('{"name": "calculator", "arguments": {"expression": "1+1"}}', ("hermes", "json"), 100)
    replies = {"native": [native], "python": [_reply("[calculator('1+1'), calculator('2+2')]", ("python_list",), 120)]}
    assert len(ask_both(replies.get, several=True)[0].tool_calls) == 2
    asked = []
    closed = ask_both(lambda form: asked.append(form) or replies[form], several=False)[0]
    assert closed.text == replies["native"][0].text and asked == ["native"]  # the Python form is not asked
    assert closed.usage.prompt_tokens == 100


def test_the_several_calls_gate_reads_the_request_and_not_the_knowledge_after_it():
    from kate.retrieval.call_count import SeveralCallsGate, request_text

    gate = SeveralCallsGate("knowledge_bases/bfcl_train")  # the committed base of the training halves
    several = ("Play songs from the artists Taylor Swift and Maroon 5, with a play time of 20 minutes and "
               "15 minutes respectively, on Spotify.")
    assert gate([{"role": "user", "content": several}])
    one = "What is the capital of Brazil?"
    with_knowledge = f"{one}\n\n[Reference only: ...]\n{several}"
    assert request_text([{"role": "user", "content": with_knowledge}, {"role": "tool", "content": "x"}]) == one
    assert not gate([{"role": "system", "content": several}, {"role": "user", "content": with_knowledge}])
    assert request_text([{"role": "system", "content": "hi"}]) == ""


def test_the_several_calls_gate_refuses_a_missing_base_and_a_bad_threshold(tmp_path):
    from kate.retrieval.call_count import SeveralCallsGate

    with pytest.raises(FileNotFoundError, match="entries.jsonl"):
        SeveralCallsGate(str(tmp_path))
    with pytest.raises(ValueError, match="p must be"):
        SeveralCallsGate("knowledge_bases/bfcl_train", p=1.5)


def test_a_models_identity_names_its_gate_and_what_the_gate_was_fitted_on():
    from kate.llm.identity import model_identity
    from kate.retrieval.call_count import SeveralCallsGate

    gate = SeveralCallsGate("knowledge_bases/bfcl_train")
    model = FakeChatModel([], name="fake")
    assert "several_calls" not in model_identity(model)
    model.several_calls = gate
    described = model_identity(model)["several_calls"]
    assert described["kb"] == "knowledge_bases/bfcl_train" and len(described["entries_sha256"]) == 64


def test_the_gated_arm_composes_with_its_gate_and_refuses_a_misspelt_key():
    from hydra import compose, initialize_config_dir

    from kate.cli import CONF_DIR

    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("eval", overrides=["arm=both_gated"])
        assert cfg.llm.tool_prompt == "both" and cfg.llm.several_calls.kb == "knowledge_bases/bfcl_train"
        with pytest.raises(Exception, match="pp"):
            compose("eval", overrides=["arm=both_gated", "llm.several_calls.pp=1"])


def test_both_is_rendered_one_form_at_a_time():
    with pytest.raises(ValueError, match="one form at a time"):
        render_chat(QWEN_LIKE, [{"role": "user", "content": "hi"}], [CALCULATOR], tool_prompt="both")


@pytest.mark.model  # imports torch and transformers
def test_both_is_the_llamacpp_clients_alone():
    from kate.llm.hf import HFChatModel

    with pytest.raises(ValueError, match="llama.cpp"):
        HFChatModel("no-such-model", tool_prompt="both")


@pytest.mark.model
def test_the_default_model_in_both_forms_answers_with_one_reply_per_sample():
    from kate.llm.llamacpp import LlamaCppChatModel

    from .conftest import DEFAULT_AGENT_MODEL

    model = LlamaCppChatModel(DEFAULT_AGENT_MODEL, n_ctx=4096, max_parallel=4, tool_prompt="both")
    try:
        question = [{"role": "user", "content": "Compute 12 * 7 and also 3 + 4."}]
        replies = model.chat(question, [CALCULATOR], n=2, temperature=0.7, max_tokens=64, seed=1)
        one = model.chat(question, [CALCULATOR], max_tokens=64)[0]
    finally:
        model.close()
    assert len(replies) == 2 and one.parse_error is None and one.tool_calls, one.text
    assert one.usage.prompt_tokens > 150  # both prompts were paid for


@pytest.mark.model
def test_the_default_model_in_both_forms_keeps_the_native_reply_where_the_gate_is_closed():
    from kate.llm.llamacpp import LlamaCppChatModel

    from .conftest import DEFAULT_AGENT_MODEL

    asked = []
    model = LlamaCppChatModel(DEFAULT_AGENT_MODEL, n_ctx=4096, max_parallel=4, tool_prompt="both",
                              several_calls=lambda messages: asked.append(messages) or False)
    try:
        question = [{"role": "user", "content": "Compute 12 * 7 and also 3 + 4."}]
        reply = model.chat(question, [CALCULATOR], max_tokens=64)[0]
    finally:
        model.close()
    assert asked == [question]  # the gate read the request as the client got it
    assert not reply.text.lstrip().startswith("[") and len(reply.tool_calls) <= 1, reply.text  # the native reply
    assert reply.usage.prompt_tokens > 150  # both prompts were still paid for


def test_one_call_mode_in_both_forms_reads_each_reply_in_its_own_form():
    both = default_formats("both")
    calls = (ToolCall("add", {"a": 1}), ToolCall("add", {"a": {"x": 2}}))
    python = Completion(text="[add(a=1), add(a={'x': 2})]", tool_calls=calls)
    assert first_call_only(python, both).tool_calls == (ToolCall("add", {"a": 1}),)
    cut = '<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>\n<tool_call>\n{"name": "add", "argu'
    native = Completion(text=cut, parse_error="malformed")  # a run of calls cut by the token limit
    first = first_call_only(native, both).tool_calls
    assert first == (ToolCall("add", {"a": 1}),) == first_call_only(native).tool_calls
