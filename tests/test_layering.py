"""Imports run one way: a module imports only its own package or packages of a lower rank.

Every import statement counts, wherever it is: module level, inside a function (a lazy import),
under ``if TYPE_CHECKING:``, and ``importlib.import_module("kate....")`` / ``__import__`` with a
literal name. The check reads the source (AST); it imports nothing.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

# package -> rank, lowest first. A module may import its own package or a package of lower rank;
# two packages of the same rank may not import each other except as SAME_RANK_ALLOWED says.
RANKS: dict[str, int] = {
    "kate": 0,  # the root package itself (kate/__init__.py: __version__)
    "kate.io": 0,
    "kate.lazy": 0,  # a package's names loaded on first use (PEP 562)
    "kate.toolcall": 0,
    "kate.llm": 1,
    "kate.envs": 2,
    "kate.sampling": 2,
    "kate.bfcl": 3,
    "kate.agent": 4,
    "kate.knowledge": 5,
    "kate.retrieval": 6,
    "kate.tasks": 7,
    "kate.appworld": 7,
    "kate.diagnose": 7,
    "kate.eval": 8,
    "kate.serve": 8,  # kate serve and the client wrapper: thin shells around the policy
    "kate.train": 8,  # training data from the tasks, TRL trainers, the checkpoint probe (kate.diagnose)
    "kate.cli": 9,
    "kate.demo": 9,
    "kate.default": 9,  # the default model: a llama.cpp client (llm) with a gate fitted on a knowledge base (retrieval)
    "kate.models_cmd": 9,
    "kate.kb_cmd": 9,
    "kate.diagnose_setup": 9,  # the set and config checks of `kate diagnose` (kate/diagnose_cmd.py)
    "kate.configs": 9,
    "kate.testing": 9,  # test doubles (fault proxy, stub upstream) for tests and benchmarks; the library never imports them
}
TOP_RANK = 9  # any other top-level command module kate/<name>_cmd.py
SAME_RANK_ALLOWED: set[tuple[str, str]] = {
    ("kate.toolcall", "kate.io"),
    ("kate.tasks", "kate.appworld"),
    ("kate.diagnose", "kate.tasks"),  # diagnostic sets solve items as kate's tasks do
    ("kate.cli", "kate.configs"),  # the CLI registers every job's schema before Hydra composes
    ("kate.diagnose_cmd", "kate.diagnose_setup"),  # the command and its set-up, one command split in two
}

REPO = Path(__file__).resolve().parents[1]
_CMD = re.compile(r"^kate\.[A-Za-z0-9_]+_cmd$")


def package_of(module: str, ranks: dict[str, int]) -> str | None:
    """The entry of the rank table that ``module`` belongs to (longest matching prefix; the root
    package's entry covers the root module alone)."""
    parts = module.split(".")
    for end in range(len(parts), 1, -1):
        prefix = ".".join(parts[:end])
        if prefix in ranks or (end == 2 and _CMD.match(prefix)):
            return prefix
    return module if module in ranks else None


def rank_of(package: str, ranks: dict[str, int]) -> int:
    return ranks[package] if package in ranks else TOP_RANK


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str, root: Path) -> bool:
    base = root.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imported_modules(path: Path, root: Path) -> list[tuple[int, str]]:
    """``(line, module)`` for every import in the file, resolved to absolute module names.
    ``from a import b`` names ``a.b`` when ``b`` is a module under ``root``, else ``a``."""
    this = module_name(path, root)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.append((node.lineno, sub if _is_module(sub, root) else base))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in {"import_module", "__import__"} and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
    return found


def violations(
    root: Path,
    ranks: dict[str, int] = RANKS,
    allowed: set[tuple[str, str]] = SAME_RANK_ALLOWED,
    top: str = "kate",
) -> list[str]:
    """``file:line imports X (rank a -> rank b)`` for every import of ``top``'s modules that
    goes to a package of the same (not allowed) or a higher rank, or to a package with no rank."""
    out = []
    for path in sorted((root / top).rglob("*.py")):
        where = path.relative_to(root)
        importer = package_of(module_name(path, root), ranks)
        if importer is None:
            out.append(f"{where}:1 belongs to no package of the rank table")
            continue
        a = rank_of(importer, ranks)
        for line, target in imported_modules(path, root):
            if target != top and not target.startswith(top + "."):
                continue
            imported = package_of(target, ranks)
            if imported is None:
                out.append(f"{where}:{line} imports {target} (a package with no rank)")
                continue
            b = rank_of(imported, ranks)
            if imported == importer or b < a or (importer, imported) in allowed:
                continue
            out.append(f"{where}:{line} imports {target} (rank {a} -> rank {b})")
    return out


def test_imports_run_one_way():
    found = violations(REPO)
    assert not found, f"{len(found)} upward or sideways imports:\n" + "\n".join(found)


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_checker_catches_lazy_typechecking_and_relative_imports(tmp_path):
    ranks = {"kate": 0, "kate.low": 0, "kate.mid": 1, "kate.high": 2}
    _write(tmp_path, "kate/__init__.py", "")
    _write(tmp_path, "kate/high/__init__.py", "from kate.low import thing\nfrom kate.mid import x\n")
    _write(tmp_path, "kate/high/impl.py", "from . import sibling\nfrom kate.high.other import y\n")
    _write(tmp_path, "kate/mid/__init__.py", "from kate.low import base\n")
    _write(
        tmp_path,
        "kate/low/__init__.py",
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from kate.mid import Thing\n"
        "def f():\n"
        "    import kate.high.impl\n"
        "    return importlib.import_module('kate.high')\n",
    )
    _write(tmp_path, "kate/low/base.py", "from ..high import impl\nfrom kate.nowhere import z\n")
    _write(tmp_path, "kate/tool_cmd.py", "from kate.high import impl\n")
    assert violations(tmp_path, ranks, set()) == [
        "kate/low/__init__.py:3 imports kate.mid (rank 0 -> rank 1)",
        "kate/low/__init__.py:5 imports kate.high.impl (rank 0 -> rank 2)",
        "kate/low/__init__.py:6 imports kate.high (rank 0 -> rank 2)",
        "kate/low/base.py:1 imports kate.high.impl (rank 0 -> rank 2)",
        "kate/low/base.py:2 imports kate.nowhere (a package with no rank)",
    ]


def test_same_rank_needs_an_allowance(tmp_path):
    ranks = {"kate": 0, "kate.a": 1, "kate.b": 1}
    _write(tmp_path, "kate/__init__.py", "")
    _write(tmp_path, "kate/a/__init__.py", "from kate.b import x\n")
    _write(tmp_path, "kate/b/__init__.py", "")
    assert violations(tmp_path, ranks, set()) == ["kate/a/__init__.py:1 imports kate.b (rank 1 -> rank 1)"]
    assert violations(tmp_path, ranks, {("kate.a", "kate.b")}) == []
