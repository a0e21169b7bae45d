"""The policy (model + knowledge + sampler + loop settings), the agent loop and its records."""

from kate.agent.knowledge import Knowledge, KnowledgeContext, Retrieved, StaticKnowledge, inject
from kate.agent.policy import Policy, PolicyStep
from kate.agent.records import DialogueResult, StepRecord, TurnResult
from kate.agent.settings import LoopSettings, resolve_system_prompt

__all__ = [
    "DialogueResult", "Knowledge", "KnowledgeContext", "LoopSettings", "Policy", "PolicyStep", "Retrieved",
    "StaticKnowledge", "StepRecord", "TurnResult", "inject", "resolve_system_prompt",
]  # fmt: skip
