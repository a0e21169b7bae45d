"""Samplers for code-action environments (AppWorld): greedy, or width (N samples in one request, a
vote over normalized code, and optionally a merge: when the candidates differ, the model writes
the next code chunk from them, as KATE does for AppWorld).

They are ``Sampler``s like the tool-call ones: a ``Step`` whose one call is the code action
(``ToolCall("python", {"code": ...})``), or no call and a ``parse_error`` when no sample wrote code.
Vote: each sample's code is normalized (``normalize_code``); the key with the most samples wins,
ties go to the earliest sample. Samples without code never win unless no sample has code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kate.llm.base import ChatModel, Completion, Message, ToolSchema, Usage
from kate.sampling.policy import Step, request_usage
from kate.toolcall.code import CodeAction, code_call, extract_code

MERGE_PROMPT = (
    "Candidate next code steps for the task above:\n\n{candidates}\n\n"
    "Write the single best next step, combining what the candidates get right. Reply with one "
    "```python code block only."
)


@dataclass(frozen=True)
class CodeVote:
    """The code vote as recorded: candidates with their votes, margin, method (majority | merge)."""

    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)


def code_step(code: str | None, text: str, error: str | None, completions: tuple[Completion, ...],
              vote: dict[str, Any] | None, usage: Usage) -> Step:
    """The Step of a code sampler: one code action, or none with the reason."""
    calls = (code_call(code),) if code is not None else ()
    return Step(calls, text, completions, CodeVote(vote) if vote is not None else None, usage,
                None if code is not None else (error or "no code"))  # fmt: skip


@dataclass(frozen=True)
class GreedyCode:
    max_tokens: int = field(default=400, metadata={"help": "token limit of the code step"})

    def act(self, model: ChatModel, messages: list[Message], tools: list[ToolSchema] | None = None, *,
            seed: int | None = None, one_call: bool = False) -> Step:
        completions = tuple(model.chat(messages, None, n=1, temperature=0.0, max_tokens=self.max_tokens, seed=seed))
        if not completions:
            raise RuntimeError(f"model {getattr(model, 'name', model)!r} returned no completion")
        action = extract_code(completions[0].text)
        return code_step(action.code, completions[0].text, action.error, completions[:1], None,
                         request_usage(completions[:1]))  # fmt: skip


@dataclass(frozen=True)
class CodeCandidate:
    code: str
    key: str
    votes: int
    samples: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "votes": self.votes, "samples": list(self.samples)}


def vote_code(actions: Sequence[CodeAction]) -> tuple[CodeCandidate | None, tuple[CodeCandidate, ...]]:
    """(winner, candidates by votes) over the samples that wrote code; (None, ()) when none did."""
    groups: dict[str, list[int]] = {}
    for i, action in enumerate(actions):
        if action.code:
            groups.setdefault(action.key, []).append(i)
    candidates = [CodeCandidate(actions[s[0]].code or "", key, len(s), tuple(s)) for key, s in groups.items()]
    candidates.sort(key=lambda c: (-c.votes, c.samples[0]))
    return (candidates[0] if candidates else None), tuple(candidates)


@dataclass(frozen=True)
class WidthCode:
    n: int = field(default=8, metadata={"help": "code samples drawn in one request and voted over"})
    temperature: float = field(default=1.0, metadata={"help": "temperature of the samples"})
    max_tokens: int = field(default=400, metadata={"help": "token limit of each sample"})
    merge: bool = field(default=False, metadata={"help": "when candidates differ, the model writes the next step "
                                                         "from them (KATE's AppWorld variant)"})
    merge_max_candidates: int = field(default=4, metadata={"help": "most candidates shown to the merge"})

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")

    def act(self, model: ChatModel, messages: list[Message], tools: list[ToolSchema] | None = None, *,
            seed: int | None = None, one_call: bool = False) -> Step:
        completions = tuple(model.chat(messages, None, n=self.n, temperature=self.temperature,
                                       max_tokens=self.max_tokens, seed=seed))  # fmt: skip
        if not completions:
            raise RuntimeError(f"model {getattr(model, 'name', model)!r} returned no completion")
        actions = [extract_code(c.text) for c in completions]
        winner, candidates = vote_code(actions)
        runner_up = candidates[1].votes if len(candidates) > 1 else 0
        vote = {"n": len(completions), "n_without_code": sum(a.code is None for a in actions),
                "candidates": [c.to_dict() for c in candidates],
                "margin": ((winner.votes - runner_up) / len(completions)) if winner else 0.0, "method": "majority"}  # fmt: skip
        if winner is None:
            return code_step(None, completions[0].text, actions[0].error, completions, vote, request_usage(completions))
        if self.merge and len(candidates) > 1:
            return self._merge(model, messages, winner, candidates, completions, vote, seed)
        return code_step(winner.code, completions[winner.samples[0]].text, None, completions, vote, request_usage(completions))

    def _merge(self, model: ChatModel, messages: list[Message], winner: CodeCandidate,
               candidates: tuple[CodeCandidate, ...], completions: tuple[Completion, ...], vote: dict[str, Any],
               seed: int | None) -> Step:  # fmt: skip
        shown = candidates[: self.merge_max_candidates]
        listing = "\n\n".join(f"Candidate {i} ({c.votes} of {len(completions)} samples):\n```python\n{c.code}\n```"
                              for i, c in enumerate(shown, start=1))  # fmt: skip
        prompt = [*messages, {"role": "user", "content": MERGE_PROMPT.format(candidates=listing)}]
        reply = model.chat(prompt, None, n=1, temperature=0.0, max_tokens=self.max_tokens, seed=seed)
        merged = extract_code(reply[0].text) if reply else CodeAction(None, "no merge reply")
        usage = request_usage(completions, request_usage(reply))
        vote = {**vote, "method": "merge", "merge_reply": reply[0].text if reply else None,
                "merge_fallback": merged.code is None}  # fmt: skip
        if merged.code is None:  # the merge failed: the majority stands
            return code_step(winner.code, completions[winner.samples[0]].text, None, completions, vote, usage)
        return code_step(merged.code, reply[0].text, None, completions, vote, usage)
