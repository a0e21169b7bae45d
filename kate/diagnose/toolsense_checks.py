"""The programmatic checks of ToolSense's generated probes (``kate.diagnose.toolsense_gen``): the
writer's answer is read only as JSON (never evaluated) and rejected, with a reason, when it breaks
a rule of its kind (a query must not name a tool of its pool, as its prompt says; a QA question must
be a yes/no question). ``TIERS`` are the query ambiguity tiers the checks enforce.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Tier:
    """An ambiguity tier: how many tools the query needs, and its word limit (None: none)."""

    level: int
    min_tools: int
    max_tools: int | None
    max_words: int | None  # the query has fewer words than this
    ask: str


TIERS = {
    1: Tier(1, 1, 1, 20, "exactly 1 of these tools; under 20 words"),
    2: Tier(2, 2, 3, 25, "2 or 3 of these tools together; under 25 words"),
    3: Tier(3, 4, None, None, "4 or more of these tools: a broad goal that takes several steps"),
}


YES_NO_OPENERS = frozenset("does do did is are was were can could will would should shall may might must has have had"
                           .split())  # the first word of a question answered Yes or No  # fmt: skip


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The first ``{...}`` of ``text`` (a code fence around it is fine) as a JSON object, else None."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(text[start : end + 1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def words(text: str) -> int:
    return len(text.split())


def names_tool(text: str, name: str) -> bool:
    """Whether ``text`` names the tool ``name``: the whole name, or its last dotted part when that is an
    identifier no one writes as a plain word (snake_case or CamelCase), as a whole word, any case."""
    last = name.rsplit(".", 1)[-1]
    forms = {name} | ({last} if "_" in last or re.search(r"[a-z][A-Z]", last) else set())
    return any(re.search(rf"(?<!\w){re.escape(f)}(?!\w)", text, re.IGNORECASE) for f in forms)


def check_query(text: str, pool: Sequence[str], tier: Tier) -> tuple[dict[str, Any] | None, str]:
    """``(answer, "ok")`` when the writer's answer passes every programmatic check, else ``(None, why)``."""
    answer = parse_json_object(text)
    if answer is None:
        return None, "not JSON"
    query, tools = answer.get("query"), answer.get("relevant_tools")
    if not isinstance(query, str) or not query.strip():
        return None, "no query"
    if any(names_tool(query, name) for name in pool):  # the request is asked not to: selection would be a lookup
        return None, "the query names a tool"
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        return None, "relevant_tools is not a list of names"
    if len(set(tools)) != len(tools):
        return None, "a tool named twice"
    if any(t not in pool for t in tools):
        return None, "a tool outside the pool"
    if len(tools) < tier.min_tools or (tier.max_tools is not None and len(tools) > tier.max_tools):
        return None, "wrong tool count for the tier"
    if tier.max_words is not None and words(query) >= tier.max_words:
        return None, "too many words"
    return {"query": query.strip(), "relevant_tools": tools}, "ok"


def check_mcq(text: str) -> tuple[dict[str, Any] | None, str]:
    answer = parse_json_object(text)
    if answer is None:
        return None, "not JSON"
    correct, wrong = answer.get("correct"), answer.get("wrong")
    if not isinstance(correct, str) or not correct.strip():
        return None, "no correct option"
    if not isinstance(wrong, list) or len(wrong) != 3 or not all(isinstance(w, str) and w.strip() for w in wrong):
        return None, "not three wrong options"
    options = [correct.strip(), *(w.strip() for w in wrong)]
    if len({o.lower() for o in options}) != 4:
        return None, "options repeat"
    return {"correct": options[0], "wrong": options[1:]}, "ok"


def check_qa(text: str, tool: str, wanted: str) -> tuple[dict[str, Any] | None, str]:
    answer = parse_json_object(text)
    if answer is None:
        return None, "not JSON"
    question, said = answer.get("question"), answer.get("answer")
    if not isinstance(question, str) or not question.strip().endswith("?"):
        return None, "no question"
    if tool not in question:
        return None, "the question does not name the tool"
    if question.strip().strip("\"'`").split(" ", 1)[0].lower() not in YES_NO_OPENERS:
        return None, "not a yes/no question"
    if not isinstance(said, str) or said.strip().lower() != wanted.lower():
        return None, "wrong answer"
    return {"question": question.strip(), "answer": wanted}, "ok"


def is_yes(text: str) -> bool:
    found = re.search(r"\b(yes|no)\b", text or "", re.IGNORECASE)
    return bool(found) and found.group(1).lower() == "yes"
