"""ES, experience summaries: an LLM writes a ~100-word analysis/advice paragraph per user turn,
from the earlier turns, the question and its ground-truth calls (KATE's recipe; any ChatModel).
Given the policy model's own failed attempts (``kate.knowledge.attempts``), a turn it got wrong is
written from what it did beside the correct calls (``ESConfig.failure_prompt``), so the advice names
the mistake the model makes.

Answers go through an ``LLMCache``: a rebuild asks only for turns whose prompt changed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kate.knowledge.attempts import Attempt
from kate.knowledge.entries import KnowledgeEntry, calls_payload, tool_names_of, turn_id
from kate.knowledge.llm_cache import LLMCache
from kate.knowledge.trajectory import Trajectory, TrajectoryTurn
from kate.llm.base import ChatModel, Message
from kate.toolcall import to_python_call

SYSTEM = "You analyse how tool-using assistants solve requests correctly. You write short, concrete advice."
PROMPT = """An assistant solved a user's request with function calls. Below are the earlier turns of the \
conversation, the current request, and the correct calls for it.

Earlier turns:
{previous}

Current request: {question}
Correct calls, in order:
{calls}

Write one plain paragraph of about {words} words (no lists, no headings, no code blocks) that identifies \
the key factors needed to solve this request correctly. First analyse this case concretely (which functions, \
in which order, where each argument value comes from, what state from earlier turns matters), then state \
transferable rules for similar requests."""
FAILURE_PROMPT = """An assistant was given a user's request and got it wrong. Below are the earlier turns of \
the conversation, the current request, what the assistant did, and the correct calls for it.

Earlier turns:
{previous}

Current request: {question}
What the assistant did (wrong):
{attempt}
Correct calls, in order:
{calls}

Write one plain paragraph of about {words} words (no lists, no headings, no code blocks) that names the \
assistant's mistake and what to do instead. First analyse this case concretely (what it did wrong, which \
functions are right, in which order, where each argument value comes from, when the turn is finished and \
the user should get an answer), then state transferable rules for similar requests."""
NO_CALLS = "(no call: the request cannot be completed as asked, because a needed function or piece of \
information is missing; the correct reply says so or asks the user)"


@dataclass(frozen=True)
class ESConfig:
    words: int = 100
    temperature: float = 0.7  # KATE's value
    max_tokens: int = 180
    seed: int = 0
    max_previous: int = 4  # earlier turns shown in the prompt
    max_words: int = 160  # longer answers are cut at a sentence end
    system: str = SYSTEM
    prompt: str = PROMPT
    failure_prompt: str = FAILURE_PROMPT  # a turn the policy model got wrong (its attempt is given)


def _calls_text(turn: TrajectoryTurn) -> str:
    if not turn.calls:
        return NO_CALLS
    return "\n".join(f"- {to_python_call(call)}" for call in turn.calls)


def es_messages(trajectory: Trajectory, number: int, config: ESConfig = ESConfig(),
                attempt: Attempt | None = None) -> list[Message]:
    earlier = [(i, t) for i, t in enumerate(trajectory.turns[:number]) if t.user.strip() or t.calls]
    earlier = earlier[-config.max_previous:] if config.max_previous else []
    previous = "\n".join(
        f"{i + 1}. User: {t.user.strip() or '(no new request; a function became available)'}\n"
        f"   Calls: {'; '.join(to_python_call(c) for c in t.calls) or '(none)'}"
        for i, t in earlier
    ) or "(none: this is the first turn)"
    turn = trajectory.turns[number]
    fields = {"previous": previous, "question": turn.user.strip(), "calls": _calls_text(turn), "words": config.words}
    if attempt is None:
        prompt = config.prompt.format(**fields)
    else:
        prompt = config.failure_prompt.format(**fields, attempt=attempt.describe())
    return [{"role": "system", "content": config.system}, {"role": "user", "content": prompt}]


def clean_summary(text: str, max_words: int) -> str:
    """One paragraph: labels and fences dropped, whitespace collapsed, cut at a sentence end."""
    text = re.sub(r"```[a-z]*", "", text)
    text = re.sub(r"^\s*(paragraph|analysis|summary|answer)\s*:\s*", "", text.strip(), flags=re.I)
    text = " ".join(text.split())
    words = text.split(" ")
    if len(words) > max_words:
        text = " ".join(words[:max_words])
        cut = max(text.rfind(". "), text.rfind("! "), text.rfind("? "))
        text = text[: cut + 1] if cut > len(text) // 2 else text + " ..."
    return text


def es_entries(trajectories: Iterable[Trajectory], model: ChatModel, cache: LLMCache,
               config: ESConfig = ESConfig(), *, attempts: Mapping[str, Attempt] | None = None,
               progress=None) -> list[KnowledgeEntry]:
    """One ES entry per user turn; an empty answer gives no entry. ``attempts``: failed attempts by
    ``turn_id`` (``kate.knowledge.attempts.failed_attempts``): those turns are written from the
    attempt, their payload keeps it. ``progress(done, total)``."""
    attempts = attempts or {}
    jobs = [(t, i) for t in trajectories for i, turn in enumerate(t.turns) if turn.user.strip()]
    out = []
    for done, (trajectory, number) in enumerate(jobs, start=1):
        turn, attempt = trajectory.turns[number], attempts.get(turn_id(trajectory.id, number))
        text = cache.chat(model, es_messages(trajectory, number, config, attempt), purpose="ES/1",
                          temperature=config.temperature, max_tokens=config.max_tokens, seed=config.seed)
        summary = clean_summary(text, config.max_words)
        if progress is not None:
            progress(done, len(jobs))
        if not summary:
            continue
        from_attempt = {"attempt": attempt.describe()} if attempt is not None else {}
        out.append(
            KnowledgeEntry(
                id=f"ES:{turn_id(trajectory.id, number)}",
                type="ES",
                text=turn.user,
                payload={"question": turn.user, "calls": calls_payload(turn.calls), "turn": number,
                         "summary": summary, **from_attempt},
                api_classes=trajectory.classes_of(turn.calls),
                tool_names=tool_names_of(turn.calls),
                source_ids=(trajectory.id, turn_id(trajectory.id, number)),
                source=trajectory.source,
                written_by=model.name,
            )
        )
    return out
