"""What ``kate kb action=build`` builds, as plain dataclasses (``conf/kb/*.yaml``): ``BuildSpec`` for
ST / ES / SIC / TIC bases (kate.knowledge.build), ``DistilledSpec`` for distilled lessons
(kate.knowledge.distilled). Light on purpose: the config schemas read them at every ``kate`` start,
so what checks a spec needs (the index kinds, the run folders) loads only when one is made."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kate.bfcl.data import CATEGORIES
from kate.knowledge.entries import check_types

SOURCES = ("bfcl", "jsonl")
COPIED = ("strip", "reject")  # what a distilled entry that copies the cases' argument values gets


@dataclass
class BuildSpec:
    """What to build (Hydra: ``conf/kb/*.yaml``). ``categories`` select BFCL categories (source
    bfcl) or trajectory ``source`` names (source jsonl; empty = all)."""

    name: str = "bfcl_train"
    root: str = "knowledge_bases"
    source: str = "bfcl"
    categories: Sequence[str] = CATEGORIES
    split: str = "train"
    jsonl: str | None = None
    types: Sequence[str] = ("ST", "ES", "SIC", "TIC")
    llm_categories: Sequence[str] = ("multi_turn_base",)  # where ES/SIC/TIC are written; empty = all
    embedding_model: str = "all-minilm-l6-v2"
    index: Mapping[str, Any] = field(default_factory=lambda: {"kind": "flat"})
    result_chars: int = 300
    es: Mapping[str, Any] = field(default_factory=dict)
    # a run folder of the policy model on these same (training) dialogues: the ES of the turns it got
    # wrong are written from its attempt (kate/knowledge/attempts.py); null: from the ground truth alone
    es_attempts: str | None = None
    intents: Mapping[str, Any] = field(default_factory=dict)
    cache_dir: str = "knowledge_bases/llm_cache"
    limit: int | None = None  # per category (tests, smoke runs)

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, got {self.source!r}")
        if self.source == "jsonl" and not self.jsonl:
            raise ValueError("source=jsonl needs jsonl=<path to a trajectory JSONL file>")
        self.types = list(check_types(self.types))
        if "distilled" in self.types:
            raise ValueError("types: distilled lessons are built by DistilledSpec (conf/kb/bfcl_distilled.yaml), "
                             "not by this builder")
        self.categories, self.llm_categories = list(self.categories), list(self.llm_categories)
        self.index, self.es, self.intents = dict(self.index), dict(self.es), dict(self.intents)
        from kate.knowledge.attempts import read_attempts
        from kate.knowledge.index import IndexSpec

        IndexSpec(**self.index)  # fail at start on a typo, not after the LLM ran
        if self.es_attempts is not None:
            read_attempts(self.es_attempts)  # a missing or unreadable records file fails here, named

    @property
    def path(self) -> Path:
        return Path(self.root) / self.name

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class DistilledSpec:
    """What ``kate kb action=build kb=bfcl_distilled`` builds (``conf/kb/bfcl_distilled.yaml``)."""

    name: str = "bfcl_distilled"
    root: str = "knowledge_bases"
    runs: Sequence[str] = ()  # run folders (records.jsonl) of the policy model on training items
    categories: Sequence[str] = CATEGORIES  # BFCL categories whose training items are read
    split: str = "train"
    cases_per_entry: int = 4  # cases one request to the writer shows
    max_entries: int | None = None  # cap on requests (chunks, round-robin over groups); null: all
    copied: str = "strip"  # strip | reject: an entry carrying the cases' literal argument values
    max_stripped: int | None = 3  # strip: an entry that copied more values than this is refused (null: never)
    embed_examples: int = 2  # case requests embedded after the title and when-line
    temperature: float = 0.0
    max_tokens: int = 160
    seed: int = 0
    max_words: int = 50  # each field is cut to this many words (the title to 12)
    embedding_model: str = "all-minilm-l6-v2"
    index: Mapping[str, Any] = field(default_factory=lambda: {"kind": "flat"})
    cache_dir: str = "knowledge_bases/llm_cache"
    limit: int | None = None  # training items per category (tests, smoke runs)
    workers: int = 1  # requests to the writer in flight together (a local engine batches them)

    def __post_init__(self) -> None:
        self.runs, self.categories, self.index = list(self.runs), list(self.categories), dict(self.index)
        if not self.runs:
            raise ValueError("runs: name at least one run folder of the policy model on training items")
        from kate.knowledge.distilled_cases import read_records
        from kate.knowledge.index import IndexSpec

        if self.copied not in COPIED:
            raise ValueError(f"copied must be one of {COPIED}, got {self.copied!r}")
        if self.cases_per_entry < 1:
            raise ValueError(f"cases_per_entry must be >= 1, got {self.cases_per_entry}")
        IndexSpec(**self.index)
        for run in self.runs:
            read_records(run)  # a missing or unreadable run fails here, named, before any model loads

    @property
    def path(self) -> Path:
        return Path(self.root) / self.name

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
