"""The lenient "keyword" scorer that VectraYX (arXiv 2610.02142) criticises, beside kate's strict one.

A keyword harness credits an answer that should call a tool when the text matches a
``"name": "<tool>"`` pattern, or when any offered tool's name appears anywhere in it, whether or
not a call can be parsed, let alone checked; an answer that should call nothing is credited when
no offered tool is named. kate never scores this way: it is here to show, on the same stored
outputs, how much such a harness would have credited (``compare``), and on which outputs the two
disagree. A model that writes prose naming the right function scores 0 strictly, 1 here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NAME_PATTERN = re.compile(r'"name"\s*:\s*"([^"]+)"')
NO_CALL_CATEGORIES = ("irrelevance", "live_irrelevance")  # the correct answer calls nothing


@dataclass(frozen=True)
class KeywordVerdict:
    credited: bool
    reason: str  # "name pattern" | "tool named" | "no tool named" | "a tool named" | "nothing matched"


def tool_names(tools: Iterable[Mapping[str, Any]]) -> list[str]:
    """Names of OpenAI tool schemas (or of bare ``{"name": ...}`` docs)."""
    return [str(t.get("function", t).get("name")) for t in tools]


def keyword_verdict(text: str, names: Sequence[str], expects_call: bool = True) -> KeywordVerdict:
    """How the keyword harness scores one output against the offered tool names."""
    text = text or ""
    named = [n for n in names if n and n in text]
    if not expects_call:
        return KeywordVerdict(not named, "no tool named" if not named else "a tool named")
    if any(m in names for m in NAME_PATTERN.findall(text)):
        return KeywordVerdict(True, "name pattern")
    if named:
        return KeywordVerdict(True, "tool named")
    return KeywordVerdict(False, "nothing matched")


def compare(records: Sequence[Mapping[str, Any]], tools_of: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """Strict (the record's own ``valid``, from the official checker) against keyword credit on the
    chosen output of each single-turn record; per category and in all, with every disagreement."""
    per: dict[str, dict[str, int]] = {}
    disagreements = []
    for record in records:
        if record["id"] not in tools_of or not record.get("outputs"):
            continue
        chosen = _chosen_output(record)
        verdict = keyword_verdict(chosen, tools_of[record["id"]], record["category"] not in NO_CALL_CATEGORIES)
        row = per.setdefault(record["category"], {"n": 0, "strict": 0, "keyword": 0, "keyword_only": 0, "strict_only": 0})
        strict = bool(record["valid"])
        row["n"] += 1
        row["strict"] += strict
        row["keyword"] += verdict.credited
        row["keyword_only"] += verdict.credited and not strict
        row["strict_only"] += strict and not verdict.credited
        if verdict.credited != strict:
            disagreements.append({"id": record["id"], "category": record["category"], "strict": strict,
                                  "keyword": verdict.credited, "keyword_reason": verdict.reason,
                                  "strict_error": record.get("error_type"), "output": chosen[:300]})  # fmt: skip
    total = {k: sum(row[k] for row in per.values()) for k in ("n", "strict", "keyword", "keyword_only", "strict_only")}
    return {"per_category": dict(sorted(per.items())), "all": total, "disagreements": disagreements}


def _chosen_output(record: Mapping[str, Any]) -> str:
    """The output the record's answer came from: the voted candidate's first sample, else the first."""
    vote, outputs = record.get("vote"), record["outputs"]
    if vote and vote.get("chosen") and vote["chosen"].get("samples"):
        return outputs[vote["chosen"]["samples"][0]]
    return outputs[0]
