"""A belief-triggered gate (When2Tool, arXiv 2605.09252): before the inner sampler acts, a belief
that a tool is needed (``belief(messages, tools) -> p`` in [0, 1], e.g. a hidden-state probe read
as ``sigmoid(logit / T)``) decides what the answer must start with:

* ``p < tau``: the "no tool" text is prefilled (``no_tool_text``), steering to a direct answer;
* ``p >= tau_high`` (``tau`` when unset): in ``soft`` mode the "tool" text (``tool_text``), in
  ``hard`` mode the opening of a call in the model's own format (``call_opening``);
* otherwise (between the thresholds, or no tools offered) the inner sampler acts unchanged.

Only the decision point is gated (``first_step_only``: the history ends with a user message), where
the probe was trained; the steps after a tool's result are the inner sampler's own.

Prefill goes through the client's ``prefill`` option (``kate.llm.base.supports``); a client without
it is a ``GateError``, never a silently ungated run (not a ``ValueError``: tasks record those as
model errors item by item, and a gate that cannot act should stop the run). The gate is a ``Sampler`` like any other, so it
runs in the loop, in ``kate eval`` and wherever a sampler is configured; the probe behind the belief
lives in ``kate.diagnose.gate``. Its step is a ``GatedStep``: the inner ``Step`` plus what the gate
saw and did.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from kate.llm.base import ChatModel, Completion, Message, ToolSchema, supports
from kate.sampling.policy import GreedySampler, Sampler, Step
from kate.toolcall.format import HERMES_CALL_START

GATE_MODES = ("soft", "hard")
GATE_ACTIONS = ("no_tool", "tool", "none")  # what was prefilled: the no-tool text, the tool text/opening, nothing
Belief = Callable[[list[Message], list[ToolSchema] | None], float]


class GateError(RuntimeError):
    """The gate cannot act as configured (no prefill option, no probe, a belief that is no probability)."""


@dataclass(frozen=True)
class GatedStep(Step):
    """A ``Step`` with the gate's record: ``{"belief": p, "action": "no_tool" | "tool" | "none", "prefill": text}``."""

    gate: dict[str, Any] = field(default_factory=dict)


@dataclass
class PrefilledModel:
    """``inner`` whose every ``chat`` answer starts with ``prefill`` (the client's own option)."""

    inner: ChatModel
    prefill: str

    def __post_init__(self) -> None:
        if not supports(self.inner, "prefill"):
            raise GateError(f"the gate prefills the answer, but model {getattr(self.inner, 'name', self.inner)!r} "
                             "does not take prefill= (use a client that does, e.g. llm=llamacpp or llm=hf)")  # fmt: skip

    @property
    def name(self) -> str:
        return self.inner.name

    def __getattr__(self, item: str) -> Any:  # runtime(), path, options: what identity and metas read
        if item == "inner":
            raise AttributeError(item)
        return getattr(self.inner, item)

    def chat(self, messages: list[Message], tools: list[ToolSchema] | None = None, **kwargs: Any) -> list[Completion]:
        return self.inner.chat(messages, tools, **{**kwargs, "prefill": self.prefill})


def gate_action(p: float, tau: float, tau_high: float | None = None) -> str:
    """``no_tool`` below ``tau``, ``tool`` at or above ``tau_high`` (default ``tau``), else ``none``."""
    high = tau if tau_high is None else tau_high
    if p < tau:
        return "no_tool"
    return "tool" if p >= high else "none"


@dataclass(frozen=True)
class GateSampler:
    """The inner sampler (greedy by default), its answer's start chosen by ``belief`` (see above)."""

    belief: Belief = field(metadata={"help": "belief(messages, tools) -> P(a tool is needed): the probe "
                                             "(kate.diagnose.gate.ProbeBelief)"})
    tau: float = field(default=0.5, metadata={"help": "below: the no-tool text is prefilled"})
    tau_high: float | None = field(default=None, metadata={"help": "at or above: the tool text (soft) or the call "
                                                                  "opening (hard); null: tau"})
    mode: str = field(default="soft", metadata={"help": "soft (prefill tool / no-tool text) | hard (prefill the call "
                                                        "opening)"})
    no_tool_text: str = field(default="I can answer this directly, without calling a tool. ",
                              metadata={"help": "prefilled below tau"})
    tool_text: str = field(default="I need to call a tool for this.\n", metadata={"help": "prefilled at or above "
                                                                                         "tau_high (soft mode)"})
    # the opening alone is not enough (kate.serve's call_prefill)
    call_opening: str = field(default=HERMES_CALL_START, metadata={"help": "prefilled at or above tau_high (hard mode)"})
    inner: Sampler | None = field(default=None, metadata={"help": "the sampler that acts after the prefill (a "
                                                                  "conf/sampling/ node); null: greedy"})
    first_step_only: bool = field(default=True, metadata={"help": "gate the decision point only (the history ends "
                                                                  "with a user message)"})

    def __post_init__(self) -> None:
        if self.mode not in GATE_MODES:
            raise ValueError(f"gate mode must be one of {GATE_MODES}, got {self.mode!r}")
        if not 0.0 <= self.tau <= 1.0 or (self.tau_high is not None and not self.tau <= self.tau_high <= 1.0):
            raise ValueError(
                f"gate thresholds need 0 <= tau <= tau_high <= 1, got tau={self.tau}, tau_high={self.tau_high}"
            )

    def __repr__(self) -> str:  # the belief's own repr says which probe (run metas record it)
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self))
        return f"GateSampler({shown})"

    def prefill_for(self, action: str) -> str:
        """The text prefilled for a gate action ('' for none)."""
        if action == "no_tool":
            return self.no_tool_text
        if action == "tool":
            return self.tool_text if self.mode == "soft" else self.call_opening
        return ""

    def act(self, model: ChatModel, messages: list[Message], tools: list[ToolSchema] | None, *,
            seed: int | None = None, one_call: bool = False) -> Step:  # fmt: skip
        inner = self.inner if self.inner is not None else GreedySampler()
        after_user = bool(messages) and messages[-1].get("role") == "user"
        if not tools or (self.first_step_only and not after_user):  # nothing to gate
            return gated_step(inner.act(model, messages, tools, seed=seed, one_call=one_call), None, "none", "")
        p = float(self.belief(messages, tools))
        if not 0.0 <= p <= 1.0:
            raise GateError(f"the gate's belief must be a probability, got {p!r}")
        action = gate_action(p, self.tau, self.tau_high)
        prefill = self.prefill_for(action)
        acting = PrefilledModel(model, prefill) if prefill else model
        return gated_step(inner.act(acting, messages, tools, seed=seed, one_call=one_call), p, action, prefill)


def gated_step(step: Step, belief: float | None, action: str, prefill: str) -> GatedStep:
    values = {f.name: getattr(step, f.name) for f in fields(Step)}
    return GatedStep(**values, gate={"belief": belief, "action": action, "prefill": prefill})
