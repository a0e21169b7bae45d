"""Near-miss negatives (VectraYX's last rung): prompts that mention tool words, commands or
identifiers but need no call; the correct no-call rate (VectraYX measured 9-17% for its models).

Generated prompts come from a task's tools and a template set of several kinds (``TEMPLATES``):
questions *about* a tool or a parameter (what it means, how it is spelled, what one thinks of its
name, a word of it in French), none asking for anything a tool would do; every one is answerable
from the tool schemas offered or from general knowledge. BFCL's irrelevance entries (none of the
offered functions fits) join them (``irrelevance_entries``).

``NearMissTask`` offers each prompt's tools and takes one policy step. Correct means no call and
no call attempt (a malformed call is an attempt; BFCL's official rule, which counts only parsed
calls, is kept beside it for BFCL entries as ``official_valid``). The lenient keyword harness's
verdict on the same output (``keyword``: credited when no offered tool is named) rides along.
"""

from __future__ import annotations

import hashlib
import json
import random
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kate.agent.knowledge import KnowledgeContext
from kate.agent.policy import Policy
from kate.bfcl.checkers import score_single_turn
from kate.bfcl.data import BFCL_VERSION, BFCLEntry, data_sha256, load_entries
from kate.diagnose.keyword import keyword_verdict, tool_names
from kate.llm.base import Message, ToolSchema
from kate.tasks.bfcl import knowledge_context
from kate.tasks.step import MODEL_ERROR, step_trace
from kate.toolcall import ToolCall


@dataclass(frozen=True)
class Template:
    """One near-miss prompt shape: ``text`` with ``{tool}``, ``{param}`` or ``{misspelled}``."""

    id: str
    kind: str  # explain | spelling | past | opinion | writing | language | quote
    text: str

    @property
    def needs_param(self) -> bool:
        return "{param}" in self.text

    @property
    def needs_word(self) -> bool:
        """The parameter is read as an English word (translations, parts of speech)."""
        return self.kind == "language"


TEMPLATES: tuple[Template, ...] = (
    Template("explain_param", "explain", "What does the `{param}` parameter of the `{tool}` function mean?"),
    Template("explain_purpose", "explain", "In one sentence, what is `{tool}` meant for?"),
    Template("explain_required", "explain", "Is the `{param}` argument of `{tool}` required or optional?"),
    Template("explain_count", "explain", "How many parameters does `{tool}` take? Just the number, please."),
    Template("spell_notes", "spelling", "I typed `{tool}` in my notes yesterday; remind me how to spell it."),
    Template("spell_which", "spelling", "Is it spelled `{tool}` or `{misspelled}`? I always mix them up."),
    Template("spell_length", "spelling", "How many characters long is the identifier `{tool}`?"),
    Template("past_thanks", "past", "Yesterday I ran `{tool}` myself and it worked fine. Just wanted to say thanks!"),
    Template("past_heard", "past", "A colleague mentioned `{tool}` today. Have you heard that name before?"),
    Template("opinion_name", "opinion", "Is `{tool}` a clear name for a function? Just your opinion, briefly."),
    Template("opinion_param", "opinion", "Is `{param}` a good name for a parameter of `{tool}`? Just your opinion."),
    Template("writing_docstring", "writing", "Write a one-line docstring for a function named `{tool}`."),
    Template("writing_rename", "writing", "Suggest a more descriptive name for the `{param}` parameter of `{tool}`."),
    Template("language_french", "language", "How would you say the word `{param}` in French?"),
    Template("language_pos", "language", "Is `{param}` a noun, a verb or an adjective in English?"),
    Template("quote_back", "quote", "Repeat this identifier back to me exactly, nothing else: `{tool}`."),
)  # fmt: skip
KINDS = tuple(dict.fromkeys(t.kind for t in TEMPLATES))
NO_CALL_CATEGORIES = ("irrelevance", "live_irrelevance")


@dataclass(frozen=True)
class NearMissItem:
    """A generated near-miss prompt, the tools offered with it, and what it mentions."""

    id: str
    category: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSchema, ...]
    kind: str
    template: str
    mentions: tuple[str, ...]  # the tool name and/or parameter name the prompt contains
    source: str = ""  # the tool set it was made from (e.g. a BFCL entry id)

    @property
    def question(self) -> str:
        return str(self.messages[-1]["content"])

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "category": self.category, "messages": list(self.messages), "tools": list(self.tools),
                "kind": self.kind, "template": self.template, "mentions": list(self.mentions),
                "source": self.source}  # fmt: skip


def parameters_of(tool: Mapping[str, Any]) -> list[str]:
    """The parameter names of one OpenAI tool schema (or bare function doc), in declared order."""
    function = tool.get("function", tool)
    return list(((function.get("parameters") or {}).get("properties") or {}))


def misspelled(name: str, rng: random.Random) -> str:
    """``name`` with two adjacent, different letters swapped (its last character doubled if none)."""
    spots = [
        i
        for i in range(len(name) - 1)
        if name[i] != name[i + 1] and name[i] in string.ascii_letters and name[i + 1] in string.ascii_letters
    ]
    if not spots:
        return name + name[-1:]
    i = rng.choice(spots)
    return name[:i] + name[i + 1] + name[i] + name[i + 2 :]


def _fits(template: Template, params: Sequence[str]) -> list[str]:
    """The parameters the template may use for this tool (``[""]``: it needs none)."""
    if not template.needs_param:
        return [""]
    if template.needs_word:
        return [p for p in params if p.isalpha() and len(p) >= 3]
    return list(params)


def near_miss_items(tool_sets: Sequence[tuple[str, Sequence[ToolSchema]]], *, seed: int = 0, per_set: int = 1,
                    templates: Sequence[Template] = TEMPLATES) -> list[NearMissItem]:  # fmt: skip
    """``per_set`` near-miss prompts for each ``(set id, tools)``, seeded: the templates are used in a
    seeded cycle (so every kind appears), each with a seeded tool of the set and parameter of it."""
    if not templates:
        raise ValueError("at least one near-miss template is needed")
    rng = random.Random(seed)
    order = list(templates)
    rng.shuffle(order)
    cursor, items = 0, []
    for set_id, tools in tool_sets:
        tools = [dict(t) for t in tools]
        if not tools:
            raise ValueError(f"tool set {set_id!r} offers no tools")
        for k in range(per_set):
            for _ in range(len(order)):  # the next template in the cycle that fits a tool of this set
                template = order[cursor % len(order)]
                cursor += 1
                choices = [(t, p) for t in tools for p in _fits(template, parameters_of(t))]
                if choices:
                    break
            else:
                raise ValueError(f"tool set {set_id!r}: no template fits its tools")
            tool, param = rng.choice(choices)
            name = tool_names([tool])[0]
            text = template.text.format(tool=name, param=param, misspelled=misspelled(name, rng))
            mentions = tuple(m for m in (name if "{tool}" in template.text else "", param) if m)
            items.append(NearMissItem(f"near_miss_{set_id}_{k}", "near_miss", ({"role": "user", "content": text},),
                                      tuple(tools), template.kind, template.id, mentions, set_id))  # fmt: skip
    return items


def bfcl_tool_sets(categories: Sequence[str] = ("simple_python", "multiple"), split: str = "test",
                   limit: int | None = None) -> list[tuple[str, list[ToolSchema]]]:  # fmt: skip
    """The tools of BFCL single-turn entries, as ``(entry id, tools)`` for ``near_miss_items``."""
    return [(e.id, e.tools) for c in categories for e in load_entries(c, split, limit)]


def irrelevance_entries(categories: Sequence[str] = NO_CALL_CATEGORIES, split: str = "test",
                        limit: int | None = None) -> list[BFCLEntry]:  # fmt: skip
    """BFCL's irrelevance entries (no offered function fits): near-misses BFCL itself ships."""
    for category in categories:
        if category not in NO_CALL_CATEGORIES:
            raise ValueError(f"{category!r} is not a no-call category; choose from {NO_CALL_CATEGORIES}")
    return [e for c in categories for e in load_entries(c, split, limit)]


def _sha256_of(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _prompt(item: NearMissItem | BFCLEntry) -> tuple[list[Message], list[ToolSchema], KnowledgeContext]:
    if isinstance(item, BFCLEntry):
        return [dict(m) for m in item.turns[0]], item.tools, knowledge_context(item)
    context = KnowledgeContext("single_turn", api_classes=(), tools=item.tools, exclude_ids=(item.id,))
    return [dict(m) for m in item.messages], [dict(t) for t in item.tools], context


@dataclass
class NearMissTask:
    """Near-miss prompts (generated and BFCL's irrelevance entries): correct iff no call is made."""

    item_list: Sequence[NearMissItem | BFCLEntry]
    name: str = "near_miss"
    origin: Mapping[str, Any] = field(default_factory=dict)  # e.g. {"seed": 0, "tool_sets": "bfcl:test"}

    def __post_init__(self) -> None:
        ids = [i.id for i in self.item_list]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{self.name}: item ids must be unique")

    def items(self) -> Sequence[NearMissItem | BFCLEntry]:
        return self.item_list

    def describe(self) -> dict[str, Any]:
        generated = [i.to_dict() for i in self.item_list if isinstance(i, NearMissItem)]
        bfcl = [i.id for i in self.item_list if isinstance(i, BFCLEntry)]
        return {"diagnostic": "near_miss", "bfcl_eval": BFCL_VERSION, "templates": [t.id for t in TEMPLATES],
                "items_sha256": _sha256_of({"generated": generated, "bfcl": bfcl}), **dict(self.origin)}  # fmt: skip

    def data(self) -> dict[str, Any]:
        categories = {i.category for i in self.item_list if isinstance(i, BFCLEntry)}
        return {c: data_sha256((c,)) for c in sorted(categories)}

    def prompt(self, item: NearMissItem | BFCLEntry) -> tuple[list[Message], list[ToolSchema]]:
        """The messages and tools at the decision point (for the first-token probe)."""
        messages, tools, _ = _prompt(item)
        return messages, tools

    def solve(self, item: NearMissItem | BFCLEntry, policy: Policy, seed: int) -> dict[str, Any]:
        messages, tools, context = _prompt(item)
        trace = step_trace(policy, messages, tools or None, seed=seed, context=context)
        return {**trace, "called": bool(trace["calls"]), "attempted": bool(trace["calls"]) or trace["parse_error"] is not None}

    def score(self, item: NearMissItem | BFCLEntry, trace: Mapping[str, Any]) -> dict[str, Any]:
        kind = item.kind if isinstance(item, NearMissItem) else "bfcl_irrelevance"
        if trace.get("error_type") == MODEL_ERROR:
            return {"valid": False, "kind": kind, "called": False, "attempted": False, "keyword": False,
                    "error_type": MODEL_ERROR, "error": trace.get("error")}  # fmt: skip
        calls = [ToolCall.from_dict(c) for c in trace.get("calls") or []]
        attempted = bool(calls) or trace.get("parse_error") is not None
        text = (trace.get("outputs") or [""])[0]
        _, tools, _ = _prompt(item)
        score: dict[str, Any] = {
            "valid": not attempted, "kind": kind, "called": bool(calls), "attempted": attempted,
            "keyword": keyword_verdict(text, tool_names(tools), expects_call=False).credited,
            "error_type": None if not attempted else ("near_miss:call_made" if calls else "near_miss:malformed_call"),
            "error": trace.get("parse_error"),
        }  # fmt: skip
        if isinstance(item, BFCLEntry):
            score["official_valid"] = score_single_turn(item, calls, trace.get("parse_error"))["valid"]
        return score


def no_call_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The correct no-call rate (and calls, attempts, keyword credit) in all, per category, per kind."""

    def block(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        n = len(rows)
        rate = lambda key: sum(bool(r.get(key)) for r in rows) / n if n else None  # noqa: E731
        return {"n": n, "no_call": rate("valid"), "called": rate("called"), "attempted": rate("attempted"),
                "keyword": rate("keyword")}  # fmt: skip

    group = (lambda key: {v: block([r for r in records if r.get(key) == v])  # noqa: E731
                          for v in sorted({str(r.get(key)) for r in records})})  # fmt: skip
    return {"all": block(records), "per_category": group("category"), "per_kind": group("kind")}
