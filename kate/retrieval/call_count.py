"""Does a request need one call or several? A small predictor learned from the knowledge base itself.

Why: shown an example answered with several calls in the model's own reply form (a ```json fence
holding a list), the 0.5B model writes several calls, and it copies the example's number of calls
whatever the request asks (BFCL's training halves, ``bench/failure_table.py``: a multi-call
example fixes some ``parallel`` answers and breaks one-call ``multiple`` answers). The nearest
question by embedding is a poor guide to the number of calls (it finds the topic, not the count;
``bench/call_count_cv.py`` measures it); what the number of calls follows is the request's form: how many values it
lists, joined by "and", commas, "respectively", "each".

``CallCountModel`` is a logistic regression (class-balanced, scikit-learn) on five such surface
features of the question (``request_features``), fitted on the base's single-turn entries with at
least one call (ST entries without API classes), labelled by whether their correct reply made
several calls. Deterministic: the same base gives the same model. Its cross-validated accuracy per
category on the shipped base's single-turn entries (BFCL's training halves, where the features
were chosen) comes from ``bench/call_count_cv.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kate.io import read_jsonl
from kate.knowledge.entries import KnowledgeEntry
from kate.llm.registry import sha256_of

NUMBER = re.compile(r"\d+(?:\.\d+)?")
AND = re.compile(r"\band\b", re.IGNORECASE)
EACH = re.compile(r"respectively|each|both|also|as well as|additionally", re.IGNORECASE)
FEATURES = ("numbers", "ands", "commas", "each_words", "words_per_20")
MIN_EXAMPLES = 20  # per class, to fit at all


def request_features(question: str) -> list[float]:
    """The five surface features of a request (``FEATURES``)."""
    return [float(len(NUMBER.findall(question))), float(len(AND.findall(question))), float(question.count(",")),
            float(bool(EACH.search(question))), len(question.split()) / 20.0]  # fmt: skip


def counted_entries(entries: Iterable[KnowledgeEntry]) -> list[KnowledgeEntry]:
    """The single-turn ST entries that made at least one call (the rows the predictor learns from)."""
    return [e for e in entries if e.type == "ST" and not e.api_classes and e.payload.get("calls")]


def call_counts(entries: Iterable[KnowledgeEntry]) -> tuple[list[str], list[int]]:
    """(questions, number of calls) of ``counted_entries``."""
    counted = counted_entries(entries)
    return [str(e.payload.get("question", e.text)) for e in counted], [len(e.payload["calls"]) for e in counted]


def training_rows(entries: Iterable[KnowledgeEntry]) -> tuple[list[str], list[bool]]:
    """(questions, several calls?) of the single-turn ST entries that made at least one call."""
    questions, counts = call_counts(entries)
    return questions, [n > 1 for n in counts]


@dataclass(frozen=True)
class CallCountModel:
    coef: np.ndarray
    intercept: float

    @classmethod
    def fit(cls, questions: Sequence[str], several: Sequence[bool]) -> "CallCountModel":
        from sklearn.linear_model import LogisticRegression  # noqa: PLC0415  (fitted only where asked for)

        y = np.asarray(several, dtype=bool)
        if min(int(y.sum()), int((~y).sum())) < MIN_EXAMPLES:
            raise ValueError(f"the call-count predictor needs {MIN_EXAMPLES} single-turn examples of each kind "
                             f"(one call, several calls), the base has {int((~y).sum())} and {int(y.sum())}")
        x = np.array([request_features(q) for q in questions])
        model = LogisticRegression(C=1.0, class_weight="balanced", max_iter=2000).fit(x, y)
        return cls(model.coef_[0].copy(), float(model.intercept_[0]))

    @classmethod
    def from_entries(cls, entries: Iterable[KnowledgeEntry]) -> "CallCountModel":
        return cls.fit(*training_rows(entries))

    def p_several(self, question: str) -> float:
        z = float(np.asarray(request_features(question)) @ self.coef + self.intercept)
        return float(1.0 / (1.0 + np.exp(-z)))

    def several(self, question: str, p: float = 0.5) -> bool:
        return self.p_several(question) >= p


def request_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The request a gate reads: the last user message's text up to its first blank line (knowledge that
    kate injects follows a blank line, kate.agent.knowledge.inject); "" when there is no user message."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return str(message.get("content") or "").split("\n\n", 1)[0]
    return ""


def base_entries(kb: str | Path) -> list[KnowledgeEntry]:
    """The entries of the knowledge base folder ``kb`` (its ``entries.jsonl``), read without its index."""
    path = Path(kb) / "entries.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the knowledge base has no entries file")
    return [KnowledgeEntry.from_dict(row) for row in read_jsonl(path)]


@dataclass(frozen=True)
class SeveralCallsGate:
    """A gate on a request for ``tool_prompt=both`` (the llama.cpp client's ``several_calls``): whether the
    call-count predictor, fitted on the single-turn ST entries of the knowledge base ``kb``, gives the
    request's text (``request_text``) a chance of at least ``p`` of needing several calls. The Python
    reply is kept only where the gate says so: where the Python form writes a second call that one
    request does not need (BFCL's ``multiple``), the native reply stands. Chosen on training halves
    (bench/tool_prompt.py, docs/evaluation.md, "Tool prompts")."""

    kb: str
    p: float = 0.5
    model: CallCountModel = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.p <= 1.0:
            raise ValueError(f"the several-calls gate's p must be in [0, 1], got {self.p!r}")
        object.__setattr__(self, "model", CallCountModel.from_entries(base_entries(self.kb)))

    def __call__(self, messages: Sequence[Mapping[str, Any]]) -> bool:
        return self.model.several(request_text(messages), self.p)

    def describe(self) -> dict[str, Any]:
        """What the gate is, for a run's fingerprint: its base (and the entries' sha256) and threshold."""
        return {"kb": self.kb, "entries_sha256": sha256_of(Path(self.kb) / "entries.jsonl"), "p": self.p}
