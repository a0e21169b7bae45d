"""The policy: a model client, optional knowledge, a sampler with its vote, and loop settings.

It is the one thing kate runs. It answers one step (``messages, tools -> PolicyStep``: the chosen
calls or answer, the vote, the prompt as sent and the knowledge in it) and runs a user turn or a
whole dialogue over an environment. BFCL single-turn entries are one step, BFCL multi-turn and
AppWorld tasks are dialogues and turns, and the server, the client wrapper and training rollouts
build on the same object::

    policy = Policy(model, WidthSampler(n=8), knowledge=make_knowledge(retrieval_config, model))
    step = policy.step(messages, tools)                    # one action, with its vote
    result = policy.run_dialogue(env, ["first request", "second request"])

Knowledge enters the prompt in one place, ``prepare`` (``kate.agent.knowledge.inject``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kate.agent.knowledge import Knowledge, KnowledgeContext, Retrieved, inject
from kate.agent.loop import run_dialogue, run_turn
from kate.agent.records import DialogueResult, TurnResult
from kate.agent.settings import LoopSettings
from kate.agent.turn_end import check_answers_supported
from kate.envs.base import Environment
from kate.llm.base import ChatModel, Message, ToolSchema, supports
from kate.llm.identity import model_identity
from kate.sampling.policy import GreedySampler, Sampler, Step


@dataclass(frozen=True)
class PolicyStep:
    """One step: the sampler's ``Step``, the prompt as sent (knowledge included), the knowledge."""

    step: Step
    prompt: list[Message]
    retrieved: Retrieved | None

    @property
    def knowledge(self) -> str | None:
        return self.retrieved.text if self.retrieved is not None else None


@dataclass(frozen=True)
class Policy:
    model: ChatModel
    sampler: Sampler = field(default_factory=GreedySampler)
    knowledge: Knowledge | None = None
    settings: LoopSettings | None = None  # None: LoopSettings.answering() where the model takes prefill=

    def __post_init__(self) -> None:
        if self.settings is None:
            default = LoopSettings.answering() if supports(self.model, "prefill") else LoopSettings()
            object.__setattr__(self, "settings", default)
        if self.settings.asks_answers:  # fail when the policy is made, before any item runs
            check_answers_supported(self.model)

    def prepare(self, messages: Sequence[Message],
                context: KnowledgeContext | None = None) -> tuple[list[Message], Retrieved | None]:
        """The messages as the model will see them: knowledge appended inside the last user message."""
        return inject(messages, self.knowledge, context)

    def step(self, messages: Sequence[Message], tools: list[ToolSchema] | None = None, *, seed: int | None = 0,
             context: KnowledgeContext | None = None, one_call: bool = False) -> PolicyStep:
        """One action for the history (which ends with a user or tool message)."""
        prompt, retrieved = self.prepare(messages, context)
        step = self.sampler.act(self.model, prompt, tools, seed=seed, one_call=one_call)
        return PolicyStep(step, prompt, retrieved)

    def run_turn(self, env: Environment, messages: list[Message], *, seed: int = 0,
                 context: KnowledgeContext | None = None, tools: list[ToolSchema] | None = None) -> TurnResult:
        return run_turn(self, env, messages, seed=seed, context=context, tools=tools)

    def run_dialogue(self, env: Environment, user_turns: Sequence[str | Message | Sequence[Message]], *,
                     seed: int = 0, context: KnowledgeContext | None = None,
                     before_turn: Callable[[int], None] | None = None) -> DialogueResult:
        return run_dialogue(self, env, user_turns, seed=seed, context=context, before_turn=before_turn)

    def describe(self) -> dict[str, Any]:
        """What determines this policy's outputs, for a run's meta (JSON-able)."""
        describe = getattr(self.knowledge, "describe", None)
        return {
            "model": model_identity(self.model),
            "sampler": repr(self.sampler),
            "knowledge": describe() if callable(describe) else (repr(self.knowledge) if self.knowledge else None),
            "settings": {**self.settings.to_dict(), "system_message": self.settings.system_message},
        }
