"""Shared fixtures. Real-model tests use the models `scripts/setup.sh` installed; a missing model
is an error that says what to run, never a silent skip."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import kate.configs  # noqa: E402,F401  (the typed job schemas, for tests that compose configs directly)
from kate.demo import DEMO_TOOLS  # noqa: E402
from kate.llm.registry import DEFAULT_AGENT_MODEL, SMALL_TEST_MODEL  # noqa: E402


@pytest.fixture(scope="session")
def small_llamacpp():
    from kate.llm.llamacpp import LlamaCppChatModel

    model = LlamaCppChatModel(SMALL_TEST_MODEL, n_ctx=2048, max_parallel=4)
    yield model
    model.close()


@pytest.fixture(scope="session")
def default_llamacpp():
    from kate.llm.llamacpp import LlamaCppChatModel

    model = LlamaCppChatModel(DEFAULT_AGENT_MODEL, n_ctx=4096, max_parallel=4)
    yield model
    model.close()


@pytest.fixture(scope="session")
def small_hf():
    from kate.llm.hf import HFChatModel

    return HFChatModel(SMALL_TEST_MODEL, device="cpu")


CALCULATOR = DEMO_TOOLS[0]  # calculator(expression)
