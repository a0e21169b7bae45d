"""The benchmark scripts stand on the installed package: benchmarks import kate, tests import kate, neither
imports the other. No bench/ script edits ``sys.path`` or imports from tests/, no test imports bench/ as a
package or loads a script by its path (what a test checks of a script lives in kate; a script's command
line may run as a child process), and the library imports neither."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _scripts(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*.py") if "runs" not in p.relative_to(ROOT).parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.append((node.lineno, node.module))
    return found


def _top(module: str) -> str:
    return module.split(".")[0]


def test_no_bench_script_edits_the_path():
    found = [f"{p.relative_to(ROOT)}:{i}" for p in _scripts("bench")
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if "sys.path.insert" in line or "sys.path.append" in line]  # fmt: skip
    assert not found, found


def test_bench_tests_and_the_library_import_one_way():
    wrong = {"bench": {"tests"}, "tests": {"bench"}, "kate": {"tests", "bench"}}
    found = [f"{p.relative_to(ROOT)}:{line} imports {module}" for folder, banned in wrong.items()
             for p in _scripts(folder) for line, module in _imports(p) if _top(module) in banned]  # fmt: skip
    assert not found, found


def test_no_test_loads_a_bench_script_by_its_path():
    found = [f"{p.relative_to(ROOT)}:{i}" for p in _scripts("tests") if p.name != Path(__file__).name
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if "bench" in line.lower() and any(w in line for w in ("spec_from_file_location", "run_path",
                                                                    "SourceFileLoader"))]  # fmt: skip
    assert not found, found


def test_the_analyses_command_names_scripts_that_exist():
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, str(root / "bench" / "analyses.py"), "--list"], capture_output=True,
                         text=True, check=True).stdout.splitlines()  # fmt: skip
    assert out and all((root / line.split()[1]).is_file() for line in out)
