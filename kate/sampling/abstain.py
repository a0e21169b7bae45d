"""Abstention from the first token: greedy, but a call the model was unsure to start is dropped.

``AbstainSampler`` asks for the greedy reply with the most likely first tokens (``top_logprobs``).
P(call) is the probability mass of those first tokens that open a call (``openings``: a fenced
block, the Hermes tag, a JSON object), the first-token probe of ``kate diagnose name=first_token``
read off the reply itself, so it costs no extra forward pass. Where the reply calls and P(call) is
below ``tau``, the answer is asked again with ``no_tool_text`` prefilled (the prompt is in the
engine's prefix cache by then), and that answer is the step; its calls, if it still writes one,
stand; the step's completions are that answer's, then the dropped reply (a run's ``outputs``), and
its usage both requests'. A malformed call counts as a call. Only the decision point is gated (the
history ends with a user message): after a tool's result, calling again is the loop's business. The
step is a ``GatedStep`` whose ``gate`` says what the gate saw and did: ``{"belief": P(call),
"action": "no_tool" | "none", "prefill": text}`` (``kate eval`` records keep it as ``gate``).

The client must take ``logprobs=``, ``top_logprobs=`` and ``prefill=`` (llm=llamacpp does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from kate.llm.base import ChatModel, Completion, Message, ToolSchema, supports
from kate.sampling.gate import GateError, PrefilledModel, gated_step
from kate.sampling.policy import GreedySampler, Step, _require, request_usage

OPENINGS = ("```", "<tool_call>", "{")


def opens_call(token: str, openings: tuple[str, ...] = OPENINGS) -> bool:
    """Whether a first token starts (or is the start of) one of ``openings``, leading spaces aside."""
    text = token.lstrip()
    return bool(text) and any(text.startswith(o) or o.startswith(text) for o in openings)


def p_call(completion: Completion, openings: tuple[str, ...] = OPENINGS) -> float | None:
    """The first token's probability mass on call openings, from the reply's ``top`` logprobs (None:
    the client returned none)."""
    if not completion.logprobs or not completion.logprobs[0].top:
        return None
    return min(1.0, sum(math.exp(lp) for token, lp in completion.logprobs[0].top if opens_call(token, openings)))


@dataclass(frozen=True)
class AbstainSampler:
    """Greedy, with the call dropped where P(call) of its first token is below ``tau`` (see above)."""

    tau: float = field(default=0.85, metadata={"help": "a call whose first token's P(call) is below this is asked "
                                                       "again as a plain answer"})
    max_tokens: int = field(default=256, metadata={"help": "token limit of each reply"})
    top_logprobs: int = field(default=20, metadata={"help": "first tokens whose probabilities P(call) sums over"})
    openings: tuple[str, ...] = field(default=OPENINGS, metadata={"help": "texts a call starts with"})
    no_tool_text: str = field(default="I can answer this directly, without calling a tool. ",
                              metadata={"help": "prefilled where the call is dropped"})

    def __post_init__(self) -> None:
        if not 0.0 <= self.tau <= 1.0:
            raise ValueError(f"tau must be in [0, 1], got {self.tau!r}")
        if not isinstance(self.top_logprobs, int) or self.top_logprobs < 1:
            raise ValueError(f"top_logprobs must be a positive integer, got {self.top_logprobs!r}")
        object.__setattr__(self, "openings", tuple(self.openings))

    def act(self, model: ChatModel, messages: list[Message], tools: list[ToolSchema] | None, *,
            seed: int | None = None, one_call: bool = False) -> Step:  # fmt: skip
        greedy = GreedySampler(self.max_tokens)
        if not tools or not messages or messages[-1].get("role") != "user":
            return gated_step(greedy.act(model, messages, tools, seed=seed, one_call=one_call), None, "none", "")
        for option in ("top_logprobs", "prefill"):
            if not supports(model, option):
                raise GateError(f"the abstain gate needs {option}=, which model "
                                f"{getattr(model, 'name', model)!r} does not take (llm=llamacpp does)")  # fmt: skip
        completions = _require(model.chat(messages, tools, n=1, temperature=0.0, max_tokens=self.max_tokens,
                                          seed=seed, logprobs=True, top_logprobs=self.top_logprobs), model, one_call)
        first = completions[0]
        belief = p_call(first, self.openings)  # None where the reply is empty (no first token)
        step = Step(first.tool_calls, first.text, completions, None, request_usage(completions), first.parse_error)
        if not (first.tool_calls or first.parse_error):  # no call: nothing to drop
            return gated_step(step, belief, "none", "")
        if belief is None:
            raise GateError(f"model {getattr(model, 'name', model)!r} returned no top logprobs for the first token")
        if belief >= self.tau:
            return gated_step(step, belief, "none", "")
        answer = greedy.act(PrefilledModel(model, self.no_tool_text), messages, tools, seed=seed, one_call=one_call)
        usage = request_usage(completions, answer.usage)
        kept = (*answer.completions, *completions)  # the answer first, then the dropped reply (records keep both)
        return gated_step(Step(answer.calls, answer.text, kept, None, usage, answer.parse_error),
                      belief, "no_tool", self.no_tool_text)  # fmt: skip
