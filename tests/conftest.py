"""Shared fixtures. Real-model tests use the models `scripts/setup.sh` installed; a missing model
is an error that says what to run, never a silent skip.

Tiers: a test that loads a real language model carries the ``model`` marker, so
``-m "not slow and not model"`` (the default of ``scripts/test.sh``) is the fast tier. Tests that use the
model fixtures below are marked here; any other test that makes a llama.cpp or transformers client
in-process without the marker fails, naming the marker (``_real_models_carry_the_marker``). A test
that starts a model server in a subprocess carries the marker explicitly."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import kate.configs  # noqa: E402,F401  (the typed job schemas, for tests that compose configs directly)
import kate.llm.llamacpp  # noqa: E402  (guarded below: real models need the marker)
from kate.demo import DEMO_TOOLS  # noqa: E402
from kate.llm.registry import DEFAULT_AGENT_MODEL, SMALL_TEST_MODEL  # noqa: E402

MODEL_FIXTURES = {"small_llamacpp", "default_llamacpp", "small_hf", "kate_server"}  # kate_server: tests/test_examples.py


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.model)


@pytest.fixture(autouse=True)
def _real_models_carry_the_marker(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("model") is not None:
        return
    import sys

    import functools

    def refusing(init):
        @functools.wraps(init)  # the signature stays the class's own: modules imported now read it
        def refuse(self, *args, **kwargs):
            raise RuntimeError(f"{request.node.nodeid} loads a real model: mark it @pytest.mark.model")

        return refuse

    classes = [kate.llm.llamacpp.LlamaCppChatModel]
    if "kate.llm.hf" in sys.modules:
        classes.append(sys.modules["kate.llm.hf"].HFChatModel)
    for cls in classes:
        monkeypatch.setattr(cls, "__init__", refusing(cls.__init__))


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
