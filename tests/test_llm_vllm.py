"""vLLM's CPU server (optional engine, its own environment) through the ``openai`` backend: tool
calls parsed from what Qwen2.5-Coder-0.5B writes, and ``n`` samples from one request.

Slow (~100 s to start, ~9 GB resident): run with ``-m slow`` after ``scripts/setup_vllm.sh``."""

from __future__ import annotations

import pytest

from kate.llm.openai import OpenAIChatModel
from kate.llm.vllm_server import DEFAULT_VLLM_MODEL, start_vllm_server, vllm_python

from .conftest import CALCULATOR

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        vllm_python() is None,
        reason="vLLM's CPU build is not installed (.venv-vllm): run scripts/setup_vllm.sh, or set KATE_VLLM_PYTHON",
    ),
]


@pytest.fixture(scope="module")
def vllm_server():
    with start_vllm_server(DEFAULT_VLLM_MODEL, max_model_len=4096, kv_cache_gib=2) as server:
        yield server


@pytest.fixture
def counted_model(vllm_server):
    """An OpenAIChatModel on the server, with a count of the HTTP requests it makes."""
    model = OpenAIChatModel(vllm_server.model, base_url=vllm_server.base_url, timeout=300)
    calls = []
    create = model.client.chat.completions.create

    def counting_create(**payload):
        calls.append(payload)
        return create(**payload)

    model.client.chat.completions.create = counting_create
    return model, calls


def test_tool_call_is_parsed_from_what_the_model_writes(counted_model):
    model, calls = counted_model
    question = [{"role": "user", "content": "What is 1234 * 5678?"}]
    [c] = model.chat(question, [CALCULATOR], temperature=0.0, max_tokens=64)
    assert c.parse_error is None, c.text
    assert [call.name for call in c.tool_calls] == ["calculator"], c.text
    assert len(calls) == 1


def test_n_samples_come_from_one_request(counted_model):
    model, calls = counted_model
    out = model.chat([{"role": "user", "content": "Name a prime number."}], n=4, temperature=1.0, max_tokens=16, seed=7)
    assert len(out) == 4 and all(c.text for c in out)
    assert len(calls) == 1 and calls[0]["n"] == 4  # vLLM honours n: no top-up requests
