"""SIC / TIC, intent-level knowledge: per API class, questions are clustered (KMeans, k by
silhouette); an LLM labels each cluster's intent (<= 20 words) and writes, from the members'
questions, their correct call paths and the docs of the functions they use, a JSON object
``{"summary": ..., "step": [...]}`` with entities as placeholders. SIC (script-style) = the steps,
TIC (text-style) = the summary; both are embedded by the intent label.

Small models often write broken JSON or call functions that do not exist. Steps calling an
unknown function are dropped; when no valid step remains, the steps are *derived* from the
cluster's most common call path with ``<argument>`` placeholders (``payload.steps_source``
says which); when no summary can be read, the entry gets none and TIC is skipped.
"""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kate.knowledge.clustering import ClusterConfig, choose_k
from kate.knowledge.entries import KnowledgeEntry, turn_id
from kate.knowledge.llm_cache import LLMCache
from kate.knowledge.trajectory import Trajectory
from kate.llm.base import ChatModel, Message
from kate.toolcall import ToolCall, from_python_call, to_python_call

LABEL_PROMPT = """Task: describe in one short sentence (at most 20 words) the common intent of the user requests \
below. Do not copy a request: generalize, without specific names, numbers or file names.

Requests:
{questions}

Common intent, in one sentence:"""
SCRIPT_PROMPT = """User requests with the intent "{intent}", each with the correct function calls:
{examples}

Functions used:
{docs}

Write a reusable plan for requests with this intent as JSON:
{{"summary": "<a short text guide: the steps in words, and the pitfalls to avoid>",
  "step": [{{"call": "<function name>", "args": {{"<argument>": "<placeholder or value>"}}, "save_as": "<name>"}}]}}
A step may also have "condition", "then" and "else". Replace specific entities (names, ids, numbers, \
file names) with placeholders such as <file_name>. Use only the functions listed. Reply with the JSON only."""


@dataclass(frozen=True)
class IntentConfig:
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    label_questions: int = 50  # KATE: up to 50 questions per label
    script_examples: int = 12
    temperature: float = 0.0
    label_max_tokens: int = 48
    script_max_tokens: int = 400
    seed: int = 0
    label_prompt: str = LABEL_PROMPT
    script_prompt: str = SCRIPT_PROMPT


@dataclass
class Member:
    question: str
    calls: tuple[ToolCall, ...]
    source_ids: list[str]


def class_members(trajectories: Iterable[Trajectory]) -> dict[str, list[Member]]:
    """API class -> the distinct (question, calls) turns whose calls use that class."""
    grouped: dict[str, dict[str, Member]] = collections.defaultdict(dict)
    for trajectory in trajectories:
        for number, turn in enumerate(trajectory.turns):
            if not turn.user.strip() or not turn.calls:
                continue
            key = turn.user.strip() + "|" + "|".join(c.canonical for c in turn.calls)
            for cls in trajectory.classes_of(turn.calls):
                member = grouped[cls].setdefault(key, Member(turn.user.strip(), turn.calls, []))
                member.source_ids += [trajectory.id, turn_id(trajectory.id, number)]
    return {cls: list(members.values()) for cls, members in sorted(grouped.items())}


def _tool_docs(trajectories: Iterable[Trajectory]) -> dict[str, Mapping[str, Any]]:
    docs: dict[str, Mapping[str, Any]] = {}
    for trajectory in trajectories:
        for tool in list(trajectory.tools) + [t for turn in trajectory.turns for t in turn.tools_added]:
            function = tool.get("function", tool)
            docs.setdefault(function["name"], function)
    return docs


def _doc_line(function: Mapping[str, Any]) -> str:
    props = (function.get("parameters") or {}).get("properties", {})
    args = ", ".join(f"{k}: {v.get('type', 'any')}" for k, v in props.items())
    description = str(function.get("description", "")).split("\n")[0].split(". ")[0][:160]
    return f"- {function['name']}({args}): {description}"


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (fences allowed), or None."""
    text = re.sub(r"```(?:json)?", "", text)
    start = text.find("{")
    while start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(text[start:])
            if isinstance(value, dict):
                return value
        except ValueError:
            pass
        start = text.find("{", start + 1)
    return None


def derived_steps(members: list[Member]) -> list[dict[str, Any]]:
    """The most common call path of a cluster, arguments as ``<name>`` placeholders."""
    paths = collections.Counter(tuple(c.name for c in m.calls) for m in members)
    path = paths.most_common(1)[0][0]
    example = next(m for m in members if tuple(c.name for c in m.calls) == path)
    return [{"call": c.name, "args": {k: f"<{k}>" for k in c.arguments}} for c in example.calls]


def _call_of(text: str, known: set[str]) -> tuple[str, dict[str, Any]] | None:
    """``"f"`` or ``"f(a=1)"`` (small models write the whole call) -> (name, args) if ``f`` is known."""
    name = text.split("(", 1)[0].strip()
    if name not in known:
        return None
    if "(" not in text:
        return name, {}
    parsed = from_python_call(text.strip())
    if parsed.ok and len(parsed.calls) == 1:
        return name, dict(parsed.calls[0].arguments)
    return name, {"text": text.strip()}  # placeholders python cannot read: kept as written


def valid_steps(raw: Any, known: set[str]) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        return []
    steps = []
    for step in raw:
        found = _call_of(step["call"], known) if isinstance(step, Mapping) and isinstance(step.get("call"), str) else None
        if found is not None:
            args = step.get("args") if isinstance(step.get("args"), Mapping) else found[1]
            clean = {"call": found[0], "args": {str(k): v for k, v in args.items()}}
            for key in ("save_as", "condition", "then", "else"):
                if key in step:
                    clean[key] = step[key]
            steps.append(clean)
    return steps


def _ask(cache: LLMCache, model: ChatModel, prompt: str, purpose: str, max_tokens: int, config: IntentConfig) -> str:
    messages: list[Message] = [{"role": "user", "content": prompt}]
    return cache.chat(model, messages, purpose=purpose, temperature=config.temperature, max_tokens=max_tokens,
                      seed=config.seed)


def intent_entries(trajectories: list[Trajectory], embed: Callable[[list[str]], np.ndarray], model: ChatModel,
                   cache: LLMCache, config: IntentConfig = IntentConfig(), *, types: Iterable[str] = ("SIC", "TIC"),
                   progress=None) -> tuple[list[KnowledgeEntry], dict[str, Any]]:
    """SIC/TIC entries, and a report (k and silhouettes per class, cluster sizes)."""
    types = set(types)
    docs = _tool_docs(trajectories)
    owner = {name: c for t in trajectories for name, c in t.tool_classes.items()}  # function -> API class
    members_by_class = class_members(trajectories)
    clustered = []
    report: dict[str, Any] = {}
    for cls, members in members_by_class.items():
        vectors = embed([m.question for m in members])
        k, labels, scores = choose_k(vectors, config.cluster)
        report[cls] = {"questions": len(members), "k": k, "silhouette": {str(a): round(b, 4) for a, b in scores.items()},
                       "sizes": [int((labels == c).sum()) for c in range(k)]}
        clustered += [(cls, c, [m for m, label in zip(members, labels) if label == c]) for c in range(k)]
    out = []
    for done, (cls, number, cluster) in enumerate(clustered, start=1):
        if not cluster:
            continue
        questions = "\n".join(f"- {m.question}" for m in cluster[: config.label_questions])
        label = _ask(cache, model, config.label_prompt.format(questions=questions), "intent-label/1",
                     config.label_max_tokens, config)
        label = " ".join(label.strip().splitlines()[0].strip().strip('"').split()[:30]) if label.strip() else ""
        label = label or cluster[0].question
        used = sorted({c.name for m in cluster for c in m.calls if owner.get(c.name, cls) == cls})
        examples = "\n".join(f"- Request: {m.question}\n  Calls: {'; '.join(to_python_call(c) for c in m.calls)}"
                             for m in cluster[: config.script_examples])
        doc_text = "\n".join(_doc_line(docs[name]) for name in used if name in docs)
        raw = _ask(cache, model, config.script_prompt.format(intent=label, examples=examples, docs=doc_text),
                   "intent-script/1", config.script_max_tokens, config)
        parsed = parse_json_object(raw) or {}
        steps = valid_steps(parsed.get("step", parsed.get("steps")), set(docs) | set(used))
        source = "llm" if steps else "derived"
        steps = steps or derived_steps(cluster)
        summary = parsed.get("summary") if isinstance(parsed.get("summary"), str) else ""
        common = {"intent": label, "examples": [m.question for m in cluster[:3]], "size": len(cluster),
                  "cluster": f"{cls}/{number}"}
        base = dict(api_classes=(cls,), tool_names=tuple(used), source_ids=tuple(s for m in cluster for s in m.source_ids),
                    source=",".join(sorted({t.source for t in trajectories if t.source})), written_by=model.name)
        if "SIC" in types:
            out.append(KnowledgeEntry(id=f"SIC:{cls}/{number}", type="SIC", text=label,
                                      payload={**common, "steps": steps, "steps_source": source}, **base))
        if "TIC" in types and summary.strip():
            out.append(KnowledgeEntry(id=f"TIC:{cls}/{number}", type="TIC", text=label,
                                      payload={**common, "summary": " ".join(summary.split())}, **base))
        if progress is not None:
            progress(done, len(clustered))
    return out, report
