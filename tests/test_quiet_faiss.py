"""faiss's loader lines (``Loading faiss with AVX512 support``, ``ModuleNotFoundError(...)``) never
reach a ``kate`` command's output: kate keeps the ``faiss.loader`` logger at WARNING."""

from __future__ import annotations

import subprocess
import sys

FAISS_LINES = ("faiss.loader", "swigfaiss", "Loading faiss")


def _quiet(text: str) -> bool:
    return not any(line in text for line in FAISS_LINES)


def test_importing_kate_knowledge_under_info_logging_prints_no_faiss_loader_line():
    code = "import logging; logging.basicConfig(level=logging.INFO); import kate.knowledge.index"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert _quiet(out.stdout + out.stderr), out.stderr


def test_a_kate_command_that_searches_an_index_prints_no_faiss_loader_line():
    # a query loads faiss and the shipped index (inspect reads only the manifest, so it could not fail here)
    command = [sys.executable, "-m", "kate.cli", "kb", "action=query", 'query="What is the capital of Brazil?"',
               "retrieval=single_turn"]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "country_info.capital" in out.stdout  # the index answered
    assert _quiet(out.stdout + out.stderr), out.stdout + out.stderr
