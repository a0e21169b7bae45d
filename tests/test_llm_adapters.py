"""Adapters kate ships (kate/llm/adapters.py): a name resolves to the verified file; a file that does not
match its pinned hash, a missing one, or a base it was not trained on is refused, the file named; the
llama.cpp client takes the name and records the adapter's hash; the default model is that adapter
gated by its base."""

from __future__ import annotations

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


@pytest.mark.model
def test_the_default_model_is_the_shipped_adapter_gated_by_its_base():
    from kate.llm.base_gated import BaseGated
    from kate.llm.default import DEFAULT_ADAPTER, default_model
    from kate.llm.identity import model_identity
    from kate.llm.registry import DEFAULT_AGENT_MODEL

    model = default_model(n_ctx=1024, max_parallel=1)
    try:
        assert isinstance(model, BaseGated) and DEFAULT_ADAPTER == NAME
        assert model_identity(model)["lora_sha256"] == ADAPTERS[NAME].sha256
        assert model.base.name == DEFAULT_AGENT_MODEL and "prefill" in model.options  # the answering loop settings
    finally:
        model.close()


def test_the_default_models_adapter_is_the_one_kate_serve_loads():
    import yaml

    from kate.llm.default import DEFAULT_ADAPTER

    conf = yaml.safe_load((adapters.ADAPTER_DIR.parents[1] / "conf" / "llm" / "base_gated.yaml").read_text())
    assert conf["lora"] == DEFAULT_ADAPTER and DEFAULT_ADAPTER in ADAPTERS
