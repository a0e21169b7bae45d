"""Load a benchmark script (``bench/<name>.py``) as a module, by its path: bench/ is no package, and a
script imports its siblings (``bench_model``, ``bfcl_report``, ...) as it does when run as
``python bench/<name>.py``, with bench/ on the path while it loads."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load_bench(name: str) -> ModuleType:
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))
