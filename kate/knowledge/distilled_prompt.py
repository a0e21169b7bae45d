"""The distilled-knowledge writer's prompt, the reading of its answer, and the copied-value check.

The writer sees a chunk of judged cases of one category and verdict (``kate.knowledge.distilled_cases``)
and answers four labelled lines: ``Title``, ``When``, ``Do``, ``Avoid`` (a JSON object with those keys
is read too: small models write either). An answer lacking a field is malformed: the caller records it
as a skip with ``reason``, it never raises.

No copied values: every literal argument value of the chunk's calls (the model's and the correct
ones; strings of three characters or more, and each comma-separated part of one, numbers other than the small
counts 0..9) is looked for
in each field, as a whole word, ignoring case. ``strip`` replaces each with ``<value>``; ``reject``
refuses the entry. Stripped, an entry is refused still when it copied more than ``max_stripped`` values
(it rewrote a case) or a field is left with fewer than two words of its own. A sentence that only
repeats the prompt's "do not copy" line is dropped; a field left empty by that is malformed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kate.knowledge.distilled_cases import Case
from kate.knowledge.intents import parse_json_object
from kate.knowledge.specs import COPIED  # noqa: F401  (strip | reject: defined beside the spec, named here too)
from kate.llm.base import Message
from kate.toolcall import ToolCall, to_python_call

FIELDS = ("title", "when", "do", "avoid")
PLACEHOLDER = "<value>"
SYSTEM = "You write short, general lessons for an assistant that answers requests by calling functions."
PROMPT = """Below are {count} requests of the kind "{category}" that an assistant answered with function calls. \
An official checker judged each answer: {verdict_text}

{cases}

Write ONE general lesson for similar requests in the future, as exactly four lines:
Title: <at most 8 words>
When: <the kind of request it applies to, one sentence>
Do: <what to do, one or two sentences>
Avoid: <the mistake to avoid, one sentence>
Do not copy names, numbers, file names or other values from the cases: say "the value the user gave" instead."""
PASSED_TEXT = "all of them were CORRECT. Say what made them right."
FAILED_TEXT = "all of them were WRONG: {hint}. Say what went wrong and what the correct answer does instead."
HINTS = {  # what a verdict kind means, in the writer's words (a small writer cannot read checker names)
    "wrong_count": "the number of calls differed from the number the request needed (one call per thing asked for)",
    "irrelevance_error:call_made": "no offered function fits the request, so the correct reply makes no call; "
                                   "the assistant called one anyway",
    "kate:no_call": "the request needed a call and the assistant made none",
    "relevance_error:no_call": "the request needed a call and the assistant made none",
    "wrong_func_name": "the assistant called the wrong function",
    "missing_required": "the assistant left out a required argument",
    "missing_optional": "the assistant left out an argument the request gave",
    "value_error:string": "an argument's text differed from what the request said",
    "value_error:others": "an argument's value differed from what the request said",
    "multi_turn:instance_state_mismatch": "after the turn the system's state was not what the request asked for",
    "multi_turn:execution_response_mismatch": "the calls' results differ from what the correct calls return",
    "multi_turn:empty_turn_model_response": "the assistant made no call in a turn that needed one",
}
NO_CALL = "(no call: no offered function fits, the correct reply answers without calling)"
LABEL = re.compile(r"^[\s\-*#>\d.]*(title|when(?: it applies)?|(?:what to )?do|(?:what to )?avoid)[\s*]*:[\s*]*(.*)$",
                   re.IGNORECASE)

ECHO = re.compile(r"\s*Do not copy names", re.IGNORECASE)  # the prompt's last line, echoed
ECHOED = re.compile(r"names, numbers, file names", re.IGNORECASE)  # a sentence repeating that line says nothing


@dataclass(frozen=True)
class Parsed:
    fields: Mapping[str, str] | None  # None: malformed
    reason: str = ""  # why it is malformed or refused
    stripped: int = 0  # copied values replaced by PLACEHOLDER


def _signature(function: Mapping[str, Any]) -> str:
    props = (function.get("parameters") or {}).get("properties", {}) or {}
    args = ", ".join(f"{k}: {v.get('type', 'any') if isinstance(v, Mapping) else 'any'}" for k, v in props.items())
    return f"{function.get('name')}({args})"


def _calls(calls: Sequence[ToolCall]) -> str:
    if not calls:
        return NO_CALL
    try:
        return "; ".join(to_python_call(c) for c in calls)
    except ValueError:  # a name python cannot write
        return "; ".join(f"{c.name}({c.arguments})" for c in calls)


def describe_case(number: int, case: Case, error_chars: int = 200) -> str:
    used = {c.name for c in case.calls + case.correct}
    shown = [f for f in case.offered if f.get("name") in used] or list(case.offered[:3])
    offered = "; ".join(_signature(f) for f in shown[:6])
    if len(case.offered) > len(shown):
        offered += f" (and {len(case.offered) - len(shown)} more functions)"
    lines = [f"Case {number}", f"Request: {case.request[:300]}", f"Functions offered: {offered or '(none)'}",
             f"Assistant's calls: {_calls(case.calls)}"]
    if case.passed:
        lines.append("Verdict: correct")
    else:
        lines.append(f"Verdict: wrong ({case.verdict}{': ' + case.error[:error_chars] if case.error else ''})")
        lines.append(f"Correct calls: {_calls(case.correct)}")
    return "\n".join(lines)


def distil_messages(cases: Sequence[Case], system: str = SYSTEM, prompt: str = PROMPT) -> list[Message]:
    first = cases[0]
    hint = HINTS.get(first.verdict, HINTS.get(first.verdict.rpartition(":")[0], first.verdict))
    verdict_text = PASSED_TEXT if first.passed else FAILED_TEXT.format(hint=hint)
    body = "\n\n".join(describe_case(i, c) for i, c in enumerate(cases, start=1))
    text = prompt.format(count=len(cases), category=first.category, verdict_text=verdict_text, cases=body)
    return [{"role": "system", "content": system}, {"role": "user", "content": text}]


def _key(label: str) -> str:
    label = label.lower()
    return next(f for f in ("title", "when", "avoid", "do") if f in label.split())


def _clean(text: str, max_words: int) -> str:
    text = ECHO.split(" ".join(text.replace("**", "").split()))[0].strip(" \"'`")
    text = " ".join(s for s in re.split(r"(?<=[.!?])\s+", text) if not ECHOED.search(s))
    words = text.split(" ")
    return " ".join(words[:max_words]) + (" ..." if len(words) > max_words else "")


def parse_fields(text: str, max_words: int = 50) -> Parsed:
    """The four fields of an answer (labelled lines, or a JSON object), each cleaned and cut to ``max_words``."""
    found: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        match = LABEL.match(line)
        if match:
            current = _key(match.group(1))
            found.setdefault(current, "")
            found[current] = (found[current] + " " + match.group(2)).strip()
        elif current is not None and line.strip() and not line.strip().startswith("```"):
            found[current] += " " + line.strip()
    if not all(found.get(f, "").strip() for f in FIELDS):
        parsed = parse_json_object(text) or {}
        found = {f: str(parsed[f]) for f in FIELDS if isinstance(parsed.get(f), (str, int, float))} or found
    missing = [f for f in FIELDS if not found.get(f, "").strip()]
    if not text.strip():
        return Parsed(None, "empty answer")
    if missing:
        return Parsed(None, f"malformed: no {', '.join(missing)} field")
    fields = {f: _clean(found[f], 12 if f == "title" else max_words) for f in FIELDS}
    echoed = [f for f in FIELDS if not fields[f]]
    if echoed:
        return Parsed(None, f"malformed: the {', '.join(echoed)} field only repeats the prompt's instruction")
    return Parsed(fields)


def _leaves(value: Any) -> Iterable[Any]:
    if isinstance(value, Mapping):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def copied_values(cases: Iterable[Case]) -> list[str]:
    """The literal argument values of the cases' calls worth looking for, longest first."""
    out = set()
    for case in cases:
        for call in case.calls + case.correct:
            for value in _leaves(dict(call.arguments)):
                if isinstance(value, bool) or value is None:
                    continue
                if isinstance(value, (int, float)):
                    if not (isinstance(value, int) and -10 < value < 10):
                        out.add(str(value))
                elif isinstance(value, str):  # the value, and each comma-separated part ("Boston, MA": "Boston")
                    out.update(p for p in {value.strip(), *(part.strip() for part in value.split(","))} if len(p) >= 3)
    return sorted(out, key=lambda v: (-len(v), v))


def _pattern(value: str) -> re.Pattern[str]:
    before = r"(?<![\w.])" if value[0].isalnum() or value[0] == "_" else ""
    after = r"(?![\w]|\.\d)" if value[-1].isalnum() or value[-1] == "_" else ""
    return re.compile(before + re.escape(value) + after, re.IGNORECASE)


def check_copied(fields: Mapping[str, str], values: Sequence[str], mode: str = "strip",
                 max_stripped: int | None = None) -> Parsed:  # fmt: skip
    """``fields`` with every copied value stripped (``mode="strip"``) or refused (``"reject"``); stripped,
    an entry that copied more than ``max_stripped`` values (a case rewritten, not a lesson) is refused too."""
    if mode not in COPIED:
        raise ValueError(f"copied must be one of {COPIED}, got {mode!r}")
    out, hit = {}, {}
    for name, text in fields.items():
        hit[name] = 0
        for value in values:
            text, n = _pattern(value).subn(PLACEHOLDER, text)
            hit[name] += n
        out[name] = text
    count = sum(hit.values())
    if count and (mode == "reject" or (max_stripped is not None and count > max_stripped)):
        return Parsed(None, f"copied values: {count} literal argument value(s) of the cases", count)
    for name, text in out.items():
        if hit[name] and len(re.findall(r"[A-Za-z]{2,}", text.replace(PLACEHOLDER, " "))) < 2:
            return Parsed(None, f"copied values: the {name} field is left with no words of its own", count)
    return Parsed(out, stripped=count)
