"""Adapters kate ships (kate/llm/adapters.py): a name resolves to the verified file; a file that does not
match its pinned hash, a missing one, or a base it was not trained on is refused, the file named; the
llama.cpp client takes the name and records the adapter's hash; the default model is that adapter
gated by its base."""

from __future__ import annotations

import json
import shutil

import pytest

from kate.llm import adapters
from kate.llm.adapters import ADAPTERS, shipped_adapter
from kate.llm.lora import llama_adapter
from kate.llm.registry import MODELS, ModelFileError, sha256_of

NAME = "qwen2.5-coder-0.5b-grpo-answers"


def test_a_shipped_adapter_resolves_by_name_and_matches_its_pin():
    spec = ADAPTERS[NAME]
    path = llama_adapter(NAME, base=spec.base)
    assert path == adapters.ADAPTER_DIR / spec.filename and sha256_of(path) == spec.sha256
    assert spec.base in MODELS
    assert llama_adapter(NAME, base=f"/somewhere/{MODELS[spec.base].filename}") == path  # its GGUF path


def test_a_changed_or_missing_file_and_a_wrong_base_are_refused(tmp_path, monkeypatch):
    spec = ADAPTERS[NAME]
    copy = tmp_path / spec.filename
    shutil.copy(adapters.ADAPTER_DIR / spec.filename, copy)
    with open(copy, "r+b") as fh:
        fh.seek(1000)
        fh.write(b"\x00\x01\x02\x03")
    monkeypatch.setattr(adapters, "ADAPTER_DIR", tmp_path)
    with pytest.raises(ModelFileError, match=str(copy)):
        shipped_adapter(NAME)
    copy.unlink()
    with pytest.raises(ModelFileError, match="missing"):
        shipped_adapter(NAME)
    with pytest.raises(ValueError, match="trained on"):
        shipped_adapter(NAME, base="smollm2-135m-instruct-q4_1")
    with pytest.raises(FileNotFoundError, match=NAME):  # an unknown name lists what ships
        llama_adapter("no-such-adapter")


@pytest.mark.model
def test_the_llama_cpp_client_takes_the_name(tmp_path):
    from kate.llm.identity import model_identity
    from kate.llm.llamacpp import LlamaCppChatModel

    model = LlamaCppChatModel(ADAPTERS[NAME].base, lora=NAME, n_ctx=1024, max_parallel=1)
    try:
        assert model_identity(model)["lora_sha256"] == ADAPTERS[NAME].sha256
        assert model.name.endswith(f"+lora-{ADAPTERS[NAME].sha256[:12]}")
    finally:
        model.close()


def weather_tool() -> dict:
    return {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@pytest.mark.model
def test_the_default_model_is_the_shipped_adapter_gated_by_its_base():
    from kate.llm.base_gated import BaseGated
    from kate.default import DEFAULT_ADAPTER, RELEVANCE_TAU, SEVERAL_CALLS_KB, default_model
    from kate.llm.identity import model_identity
    from kate.llm.registry import DEFAULT_AGENT_MODEL

    model = default_model(n_ctx=2048, max_parallel=2)
    try:
        assert isinstance(model, BaseGated) and DEFAULT_ADAPTER == NAME
        assert model_identity(model)["lora_sha256"] == ADAPTERS[NAME].sha256
        assert model.base.name == DEFAULT_AGENT_MODEL and "prefill" in model.options  # the answering loop settings
        assert model.base.tool_prompt == "both" and model.base_several and model.model.tool_prompt == "native"
        assert model.base.several_calls.kb == str(SEVERAL_CALLS_KB)  # the committed training halves' base
        assert model.tools_fit.tau == RELEVANCE_TAU
        chat = [{"role": "user", "content": "Who wrote the Iliad?"}]
        [answer] = model.chat(chat, [weather_tool()])  # no tool reads like the request: none is offered
        assert not answer.tool_calls and answer.text.strip()
        ask = [{"role": "user", "content": "Get the current weather for Tokyo, Berlin and Lima respectively."}]
        [reply] = model.chat(ask, [weather_tool()])
        assert model.base.several_calls(ask)  # the predictor expects several: the base's Python form is asked too
        assert [(c.name, c.arguments["city"]) for c in reply.tool_calls] == [
            ("get_weather", "Tokyo"), ("get_weather", "Berlin"), ("get_weather", "Lima")]
    finally:
        model.close()


def test_the_default_model_is_the_one_kate_serve_and_kate_main_load():
    from hydra import compose, initialize_config_dir

    from kate.cli import CONF_DIR
    from kate.default import BASE_TOOL_PROMPT, DEFAULT_ADAPTER, RELEVANCE_TAU, SEVERAL_CALLS_KB

    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        served, main = compose("serve").llm, compose("main").arms.adapter.llm
    for llm in (served, main):
        assert llm.lora == DEFAULT_ADAPTER and DEFAULT_ADAPTER in ADAPTERS
        assert llm.base_tool_prompt == BASE_TOOL_PROMPT and llm.base_malformed == "keep"
        assert CONF_DIR.parent / llm.base_several_calls.kb == SEVERAL_CALLS_KB and llm.base_several_calls.p == 0.5
        assert llm.tools_fit.tau == RELEVANCE_TAU
    chosen = json.loads((CONF_DIR.parent / "bench" / "results" / "tool_relevance.json").read_text())
    assert chosen["gate"]["tau"] == RELEVANCE_TAU  # the value bench/tool_relevance.py chose on the training halves
