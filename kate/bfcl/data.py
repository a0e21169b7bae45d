"""BFCL-V3 data from the pinned ``bfcl-eval`` package: entries, tools, ground truth, KATE's split.

KATE splits each category by index: even -> training, odd -> testing. ``load_entries(category,
split="test")`` gives the odd half; ``split="all"`` the whole category. The data's sha256 is
recorded in every result (``data_sha256``), so a score always names the exact data it came from.
"""

from __future__ import annotations

import copy
import hashlib
import os
import re
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kate.toolcall import ToolCall

BFCL_VERSION = "2026.3.23"

SINGLE_TURN = (
    "simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
    "irrelevance", "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple",
    "live_irrelevance", "live_relevance",
)  # fmt: skip
MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
CATEGORIES = SINGLE_TURN + MULTI_TURN
SPLITS = ("train", "test", "all")


def prepare_environment() -> None:
    """bfcl-eval wants a project root for its result folders; give it a private temporary one."""
    if "BFCL_PROJECT_ROOT" not in os.environ:
        root = Path(tempfile.gettempdir()) / "kate-bfcl-root"
        root.mkdir(parents=True, exist_ok=True)
        os.environ["BFCL_PROJECT_ROOT"] = str(root)


def installed_version() -> str:
    version = metadata.version("bfcl-eval")
    if version != BFCL_VERSION:
        raise RuntimeError(f"kate is pinned to bfcl-eval=={BFCL_VERSION}, found {version}; run scripts/setup.sh")
    return version


@dataclass(frozen=True)
class BFCLEntry:
    """One BFCL test entry. ``turns`` is BFCL's ``question``: a list of turns, each a list of messages."""

    id: str
    category: str
    index: int
    turns: list[list[dict[str, Any]]]
    functions: list[dict[str, Any]]  # BFCL function docs as the model sees them (language hints added)
    ground_truth: Any  # single-turn: possible answers; multi-turn: per turn, call strings
    involved_classes: tuple[str, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    checker_functions: list[dict[str, Any]] = field(default_factory=list, repr=False)  # as the checker wants them

    @property
    def is_multi_turn(self) -> bool:
        return self.category in MULTI_TURN

    @property
    def tools(self) -> list[dict[str, Any]]:
        """OpenAI tool schemas of this entry's functions (original names, dots kept)."""
        return functions_to_tools(self.functions)

    @property
    def variant_ids(self) -> tuple[str, ...]:
        """This entry's id and, for multi-turn, its variants': BFCL derives miss_func / miss_param /
        long_context N from base N (same index, mostly the same turns), so an entry's own answer is also
        stored under its siblings' ids; leaving out only the entry's own id leaks it (training halves)."""
        if not self.is_multi_turn:
            return (self.id,)
        return tuple(f"{category}_{self.index}" for category in MULTI_TURN)

    @property
    def missed_functions(self) -> dict[int, list[dict[str, Any]]]:
        """miss_func: turn index -> function docs that only arrive at that turn."""
        return {int(k): v for k, v in (self.raw.get("missed_function") or {}).items()}


def _entry_index(entry_id: str) -> int:
    match = re.search(r"_(\d+)(?:-[\d-]+)?$", entry_id)
    if match is None:
        raise ValueError(f"cannot read an index from BFCL id {entry_id!r}")
    return int(match.group(1))


def in_split(index: int, split: str) -> bool:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return split == "all" or (index % 2 == 0) == (split == "train")


@lru_cache(maxsize=None)
def _load_category(category: str) -> tuple[BFCLEntry, ...]:
    if category not in CATEGORIES:
        raise ValueError(f"unknown or non-offline BFCL category {category!r}; offline V3 categories: {CATEGORIES}")
    prepare_environment()
    installed_version()
    from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

    entries = load_dataset_entry(category)
    plain = {e["id"]: e.get("function", []) for e in load_dataset_entry(category, include_language_specific_hint=False)}
    has_answers = category not in {"irrelevance", "live_irrelevance", "live_relevance"}
    answers = {a["id"]: a["ground_truth"] for a in load_ground_truth_entry(category)} if has_answers else {}
    return tuple(
        BFCLEntry(
            id=e["id"],
            category=category,
            index=_entry_index(e["id"]),
            turns=e["question"],
            functions=e.get("function", []),
            ground_truth=answers.get(e["id"]),
            involved_classes=tuple(e.get("involved_classes", ())),
            raw=e,
            checker_functions=plain[e["id"]],
        )
        for e in entries
    )


def load_entries(category: str, split: str = "test", limit: int | None = None) -> list[BFCLEntry]:
    """Entries of one category in KATE's ``split`` (train: even index, test: odd), in index order."""
    chosen = [e for e in _load_category(category) if in_split(e.index, split)]
    chosen.sort(key=lambda e: e.index)
    return chosen[:limit] if limit is not None else chosen


def data_files(category: str) -> list[Path]:
    prepare_environment()
    from bfcl_eval.constants.eval_config import POSSIBLE_ANSWER_PATH, PROMPT_PATH

    name = f"BFCL_v4_{category}.json"
    return [p for p in (Path(PROMPT_PATH) / name, Path(POSSIBLE_ANSWER_PATH) / name) if p.exists()]


@lru_cache(maxsize=None)
def data_sha256(categories: tuple[str, ...]) -> str:
    """One hash over the prompt and answer files of ``categories`` (sorted), for result files."""
    digest = hashlib.sha256()
    for category in sorted(categories):
        for path in data_files(category):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def functions_to_tools(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """BFCL function docs -> OpenAI tool schemas with BFCL's own type mapping; names unchanged."""
    prepare_environment()
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
    from bfcl_eval.model_handler.utils import _cast_to_openai_type

    tools = []
    for function in copy.deepcopy(functions):
        parameters = function.get("parameters") or {"type": "dict", "properties": {}}
        parameters["type"] = "object"
        parameters["properties"] = _cast_to_openai_type(parameters.get("properties", {}), GORILLA_TO_OPENAPI)
        tools.append(
            {
                "type": "function",
                "function": {"name": function["name"], "description": function.get("description", ""), "parameters": parameters},
            }
        )
    return tools


def parameter_order(functions: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Function name -> its parameters in declared order (to read positional ground-truth calls)."""
    return {f["name"]: list((f.get("parameters") or {}).get("properties", {})) for f in functions}


def ground_truth_calls(entry: BFCLEntry) -> list[list["ToolCall"]]:
    """Multi-turn ground truth as ToolCalls per turn, positional arguments named by the docs."""
    from kate.toolcall import from_bfcl_strings

    if not entry.is_multi_turn:
        raise ValueError(f"{entry.id}: ground_truth_calls is for multi-turn entries")
    docs = list(entry.functions) + [f for fs in entry.missed_functions.values() for f in fs]
    order = parameter_order(docs)
    turns = []
    for number, strings in enumerate(entry.ground_truth):
        parsed = from_bfcl_strings(strings, order)
        if not parsed.ok:
            raise ValueError(f"{entry.id} turn {number}: ground truth unreadable: {parsed.error}")
        turns.append(list(parsed.calls))
    return turns
