"""One policy step as a task's trace: what single-step tasks (BFCL single-turn entries, the
diagnostic sets) record, the same fields everywhere so stored records re-score and compare."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kate.agent.knowledge import KnowledgeContext
from kate.agent.policy import Policy
from kate.agent.records import usage_dict
from kate.llm.base import Message, ToolSchema

MODEL_ERROR = "kate:model_error"


def step_trace(policy: Policy, messages: Sequence[Message], tools: list[ToolSchema] | None, *, seed: int,
               context: KnowledgeContext | None = None) -> dict[str, Any]:  # fmt: skip
    """The step's calls, parse error, prompt as sent, knowledge, every sample's text, vote, usage and,
    from a gated sampler, what its gate saw and did;
    a model error (e.g. a prompt that does not fit the context) is a recorded failure, not a crash."""
    try:
        done = policy.step(messages, tools, seed=seed, context=context)
    except ValueError as error:
        prompt, retrieved = policy.prepare(messages, context)
        return {"calls": [], "parse_error": None, "error_type": MODEL_ERROR, "error": str(error), "prompt": prompt,
                "knowledge": retrieved.text if retrieved else None, "outputs": [], "vote": None}  # fmt: skip
    step = done.step
    gate = getattr(step, "gate", None)  # a gated sampler's record (kate.sampling.gate / abstain), if any
    return {
        **({"gate": gate} if gate else {}),
        "calls": [c.to_dict() for c in step.calls],
        "parse_error": step.parse_error,
        "prompt": done.prompt,
        "knowledge": done.knowledge,
        "outputs": [c.text for c in step.completions],
        "vote": step.vote.to_dict() if step.vote is not None else None,
        "usage": usage_dict(step.usage),
    }
