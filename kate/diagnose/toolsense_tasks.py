"""ToolSense's probes as tasks of kate's runner (resumable ``records.jsonl``), one greedy step each:

* ``SelectionTask``: free generation of tool names for a query; the answer's catalogue names, in
  order of first mention, are its ranking (scored by recall@k and NDCG@k);
* ``MCQTask``: which of four statements says what a tool does (a letter; baseline 25%);
* ``QATask``: a yes/no question about a tool (baseline 50%).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kate.agent.policy import Policy
from kate.diagnose.toolsense import Tool
from kate.diagnose.toolsense_gen import MCQProbe, QAProbe, QueryProbe, to_row
from kate.diagnose.toolsense_score import KS, parse_tool_names, ranking_scores, selection_messages
from kate.llm.base import Message
from kate.tasks.step import MODEL_ERROR, step_trace

LETTERS = "ABCD"


def _sha(items: Sequence[Any]) -> str:
    text = json.dumps([to_row(i) for i in items], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _text(trace: Mapping[str, Any]) -> str:
    return (trace.get("outputs") or [""])[0]


@dataclass
class _ProbeTask:
    probes: Sequence[Any]
    name: str = "toolsense"
    origin: Mapping[str, Any] = field(default_factory=dict)

    def items(self) -> Sequence[Any]:
        return self.probes

    def describe(self) -> dict[str, Any]:
        return {"diagnostic": self.name, "items_sha256": _sha(self.probes), **dict(self.origin)}

    def messages(self, probe: Any) -> list[Message]:
        raise NotImplementedError

    def solve(self, probe: Any, policy: Policy, seed: int) -> dict[str, Any]:
        return step_trace(policy, self.messages(probe), None, seed=seed)


@dataclass
class SelectionTask(_ProbeTask):
    """Free generation of tool names; ``catalogue`` gives the pool's tools (``show_pool``) and the
    names an answer is parsed against."""

    catalogue: Sequence[Tool] = ()
    show_pool: bool = True
    ks: Sequence[int] = KS
    name: str = "toolsense_free"

    def __post_init__(self) -> None:
        self.names = sorted({t.name for t in self.catalogue})

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "show_pool": self.show_pool}

    def messages(self, probe: QueryProbe) -> list[Message]:
        pool = [self.catalogue[r] for r in probe.pool_rows] if self.show_pool else None
        return selection_messages(probe.query, pool)

    def score(self, probe: QueryProbe, trace: Mapping[str, Any]) -> dict[str, Any]:
        if trace.get("error_type") == MODEL_ERROR:
            return {"valid": False, "tier": probe.tier, "error_type": MODEL_ERROR, "error": trace.get("error"),
                    **ranking_scores([], probe.relevant, self.ks)}  # fmt: skip
        ranked = parse_tool_names(_text(trace), self.names)
        scores = ranking_scores(ranked, probe.relevant, self.ks)
        valid = set(ranked[: len(probe.relevant)]) == set(probe.relevant)
        return {"valid": valid, "tier": probe.tier, "ranked": ranked, "outside_pool": [n for n in ranked if n not in
                probe.pool], "error_type": None if valid else "toolsense:wrong_tools", **scores}  # fmt: skip


def parse_letter(text: str, options: Sequence[str]) -> int | None:
    """The option an MCQ answer chose: a leading letter, ``answer: X``, ``X)``, or an option's text."""
    text = text or ""
    for pattern in (r"^\W*([ABCD])\b", r"\b(?:answer|option)\s*(?:is)?\s*:?\s*\(?([ABCD])\b", r"\b([ABCD])[).:]"):
        found = re.search(pattern, text, re.IGNORECASE if "answer" in pattern else 0)
        if found:
            return LETTERS.index(found.group(1).upper())
    hits = [i for i, option in enumerate(options) if option.lower() in text.lower()]
    return hits[0] if len(hits) == 1 else None


def parse_yes_no(text: str) -> str | None:
    found = re.search(r"\b(yes|no)\b", text or "", re.IGNORECASE)
    return found.group(1).capitalize() if found else None


@dataclass
class MCQTask(_ProbeTask):
    name: str = "toolsense_mcq"

    def messages(self, probe: MCQProbe) -> list[Message]:
        options = "\n".join(f"{LETTERS[i]}) {o}" for i, o in enumerate(probe.options))
        return [{"role": "user", "content": f"{probe.question}\n{options}\nAnswer with the letter only."}]

    def score(self, probe: MCQProbe, trace: Mapping[str, Any]) -> dict[str, Any]:
        chosen = parse_letter(_text(trace), probe.options)
        valid = chosen == probe.answer
        return {"valid": valid, "chosen": chosen, "answer": probe.answer,
                "error_type": None if valid else ("toolsense:unparsed" if chosen is None else "toolsense:wrong")}  # fmt: skip


@dataclass
class QATask(_ProbeTask):
    name: str = "toolsense_qa"

    def messages(self, probe: QAProbe) -> list[Message]:
        return [{"role": "user", "content": f"{probe.question}\nAnswer Yes or No."}]

    def score(self, probe: QAProbe, trace: Mapping[str, Any]) -> dict[str, Any]:
        chosen = parse_yes_no(_text(trace))
        valid = chosen == probe.answer
        return {"valid": valid, "chosen": chosen, "answer": probe.answer,
                "error_type": None if valid else ("toolsense:unparsed" if chosen is None else "toolsense:wrong")}  # fmt: skip
