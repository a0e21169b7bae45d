"""The agent loop, a multi-turn MDP: at each step the policy emits actions (tool calls, or code)
or a final answer, and the environment executes them.

A turn: the policy's knowledge (if any) is appended inside the user message; then up to
``max_steps`` times the sampler acts. No calls -> the text is the answer and the turn ends.
Calls -> the action and its results enter the history in the environment's action format
(``kate/envs/actions.py``). A malformed action is recorded and shown to the model, never a crash.
An environment that reports ``finished()`` ends the turn after the step that finished it.

Repetition (the measured dominant failure of small models: the same call after every result
until the step cap): a step whose canonical call set equals an earlier executed step of the same
turn is a repeat, handled by ``repeat_policy`` for every sampler alike:

* ``"end_turn"``: the turn ends (``end_reason="repeat"``); the repeat is recorded, not executed.
* ``"warn"``: not executed again; each result says the call was already made, gives its
  earlier result, and invites an answer. A second repeat in the turn ends it.
* ``"answer"``: not executed again; the loop asks for the answer, its reply starting with
  ``answer_prefill``, and the turn ends (``kate/agent/turn_end.py``).
* ``"off"``: repeats are executed like any call.
``repeat_match="fed"`` also counts as a repeat a call that feeds an earlier call's result back into
the same function; ``answer_at_max_steps`` asks for the answer once at the step cap; ``echo_policy``
handles a reply that is empty or writes a tool result or an earlier answer again (``turn_end.no_answer``):
``"answer"`` asks for the answer in its place; ``"act"`` asks for a call while the turn has made
none (the asked call is step ``i``, recorded after the echo with its prefill), else for the answer.
Under ``"end_turn"`` and ``"warn"`` a call repeated *within* one step runs once, and the same
malformed output twice in a turn ends it (``end_reason="repeat"``); ``max_malformed`` ends a turn
after that many malformed steps in a row (``end_reason="malformed"``).

Seeds: step ``i`` of a turn samples with ``seed + i``; turn ``t`` of a dialogue starts at
``seed + SEED_STRIDE * t`` (``kate/agent/settings.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from kate.agent.knowledge import KnowledgeContext
from kate.agent.records import DialogueResult, StepRecord, TurnResult
from kate.agent.settings import SEED_STRIDE
from kate.agent.turn_end import Executed, ask_answer, ask_call, check_answers_supported, fed_sources, no_answer
from kate.envs.actions import action_format_of, is_finished
from kate.envs.base import Environment, Observation
from kate.llm.base import Message, ToolSchema
from kate.toolcall import ToolCall, canonical_call_set

if TYPE_CHECKING:
    from kate.agent.policy import Policy

REPEAT_NOTE = (
    "Not executed again: you already made this exact call earlier in this turn. Its result was:\n"
    "{result}\nIf you have what you need, answer the user now instead of calling a tool."
)


def _safe_execute(env: Environment, call: ToolCall) -> Observation:
    """``env.execute``; an environment that breaks its contract still cannot crash the loop."""
    try:
        return env.execute(call)
    except Exception as exc:  # noqa: BLE001
        return Observation.failure(f"the environment failed on {call.name}: {type(exc).__name__}: {exc}")


def _with_ids(calls: tuple[ToolCall, ...], prefix: str) -> tuple[ToolCall, ...]:
    return tuple(
        c if c.call_id else ToolCall(c.name, c.arguments, call_id=f"{prefix}_{j}") for j, c in enumerate(calls)
    )


def _earlier_results(calls: tuple[ToolCall, ...], earlier: tuple[ToolCall, ...],
                     observations: tuple[Observation, ...]) -> list[Observation]:
    """The earlier observation of each call (the sets are equal as multisets; order may differ)."""
    unused = list(zip(earlier, observations))
    out = []
    for call in calls:
        j = next(j for j, (e, _) in enumerate(unused) if e == call)
        out.append(unused.pop(j)[1])
    return out


class _Turn:
    """One user turn's state; ``run`` samples steps and hands each to the handler of its kind
    (an echo, a malformed action, an answer, a repeat, new calls). A handler returns True when the
    turn ends, having set ``answer`` and ``end_reason``."""

    def __init__(self, policy: Policy, env: Environment, messages: list[Message], seed: int,
                 context: KnowledgeContext | None, tools: list[ToolSchema] | None) -> None:  # fmt: skip
        if not messages or messages[-1].get("role") != "user":
            raise ValueError("a turn needs a history that ends with a user message")
        self.policy, self.env, self.seed = policy, env, seed
        self.settings, self.format = policy.settings, action_format_of(env)
        self.start = len(messages) - 1
        self.user_text = str(messages[self.start].get("content") or "")
        self.history, self.retrieved = policy.prepare(messages, context)
        self.tools = env.tools() if tools is None else tools
        self.repeat_policy = self.settings.repeat_policy
        if self.settings.asks_answers:
            check_answers_supported(policy.model)
        self.max_tokens = getattr(policy.sampler, "max_tokens", 256)
        self.steps: list[StepRecord] = []
        self.executed: list[Executed] = []
        self.seen: dict[tuple[str, ...], tuple[int, tuple[ToolCall, ...], tuple[Observation, ...]]] = {}
        self.malformed: dict[str, int] = {}  # raw text of malformed steps -> first step index
        self.repeats, self.in_a_row, self.answer, self.end_reason = 0, 0, None, "max_steps"

    def run(self) -> TurnResult:
        settings = self.settings
        for i in range(settings.max_steps):
            step = self.policy.sampler.act(self.policy.model, self.history, self.tools, seed=self.seed + i,
                                           one_call=settings.one_call)  # fmt: skip
            record = dict(index=i, text=step.text, vote=step.vote.to_dict() if step.vote is not None else None,
                          usage=step.usage)  # fmt: skip
            if self.is_echo(step):
                asked = self.on_echo(i, record)
                if asked is None:
                    break
                step, record = asked
            if not step.calls:
                malformed = step.parse_error is not None
                ended = self.on_malformed(i, step, record) if malformed else self.on_answer(step, record)
            else:
                ended = self.on_calls(i, step, record)
            if ended:
                break
        else:
            if settings.answer_at_max_steps:
                answer, _ = self.end_with_answer(settings.max_steps)
                self.answer, self.end_reason = answer, "answer" if answer is not None else self.end_reason
        knowledge = self.retrieved.text if self.retrieved is not None else None
        return TurnResult(self.user_text, knowledge, tuple(self.steps), self.answer, self.end_reason, self.history,
                          self.start, self.env.state(), self.retrieved)  # fmt: skip

    def end_with_answer(self, index: int) -> tuple[str | None, str]:
        """Ask for the answer (prefilled), record the step, keep the answer in the history: (answer, end
        reason), the reason ``"repeat"`` when the reply is still no answer."""
        asked, answer = ask_answer(self.policy.model, self.history, self.tools, prefill=self.settings.answer_prefill,
                                   index=index, seed=self.seed + index, max_tokens=self.max_tokens)  # fmt: skip
        self.steps.append(asked)
        if answer is not None:
            self.history.append({"role": "assistant", "content": answer})
        return answer, ("answer" if answer is not None else "repeat")

    def is_echo(self, step) -> bool:
        return (self.settings.echo_policy != "keep" and not step.calls and step.parse_error is None
                and no_answer(step.text, self.history))  # fmt: skip

    def on_echo(self, i: int, record: dict):
        """An empty or echoing reply: asks for the answer (None: the turn ended) or for a call (the asked step)."""
        self.steps.append(StepRecord(**record, calls=(), observations=(), executed=False, echo=True))
        if self.settings.echo_policy == "answer" or self.executed:
            self.answer, self.end_reason = self.end_with_answer(i + 1)
            return None
        step = ask_call(self.policy.model, self.history, self.tools, prefill=self.settings.call_prefill,
                        seed=self.seed + i, max_tokens=self.max_tokens, one_call=self.settings.one_call)  # fmt: skip
        return step, dict(index=i, text=step.text, vote=None, usage=step.usage, prefill=self.settings.call_prefill)

    def on_malformed(self, i: int, step, record: dict) -> bool:
        first = self.malformed.get(step.text) if self.repeat_policy != "off" else None
        self.steps.append(StepRecord(**record, calls=(), observations=(), executed=False,
                                     parse_error=step.parse_error, repeat_of=first))  # fmt: skip
        self.in_a_row += 1
        if first is not None:  # the same broken output again: the model is stuck
            self.end_reason = "repeat"
            return True
        if self.settings.max_malformed is not None and self.in_a_row >= self.settings.max_malformed:
            self.end_reason = "malformed"
            return True
        self.malformed.setdefault(step.text, i)
        self.history.extend(self.format.malformed(step.text, step.parse_error))
        return False

    def on_answer(self, step, record: dict) -> bool:
        self.history.append({"role": "assistant", "content": step.text})
        self.steps.append(StepRecord(**record, calls=(), observations=(), executed=False))
        self.answer, self.end_reason = step.text, "answer"
        return True

    def on_calls(self, i: int, step, record: dict) -> bool:
        self.in_a_row = 0
        unique = tuple(dict.fromkeys(step.calls)) if self.repeat_policy != "off" else tuple(step.calls)
        calls = _with_ids(unique, f"call_{len(self.history)}")
        key = canonical_call_set(calls)
        earlier = self.seen.get(key) if self.repeat_policy != "off" else None
        fed = fed_sources(calls, self.executed) if earlier is None and self.settings.repeat_match == "fed" else None
        if earlier is not None or fed is not None:
            return self.on_repeat(i, step, record, calls, earlier, fed)
        observations = tuple(_safe_execute(self.env, call) for call in calls)
        self.history.append(self.format.assistant(step.text, calls))
        self.history.extend(self.format.results(calls, [o.content for o in observations]))
        self.seen.setdefault(key, (i, calls, observations))
        self.executed.extend((i, c, o) for c, o in zip(calls, observations))
        self.steps.append(StepRecord(**record, calls=calls, observations=observations, executed=True))
        if is_finished(self.env):
            self.end_reason = "finished"
            return True
        return False

    def on_repeat(self, i: int, step, record: dict, calls, earlier, fed) -> bool:
        if earlier is not None:
            first, earlier_calls, earlier_obs = earlier
            results = _earlier_results(calls, earlier_calls, earlier_obs)
        else:
            first, results = min(j for j, _, _ in fed), [o for _, _, o in fed]
        self.repeats += 1
        self.steps.append(StepRecord(**record, calls=calls, observations=(), executed=False, repeat_of=first))
        if self.repeat_policy == "answer":
            self.answer, self.end_reason = self.end_with_answer(i + 1)
            return True
        if self.repeat_policy == "end_turn" or self.repeats > 1:
            self.end_reason = "repeat"
            return True
        self.history.append(self.format.assistant(step.text, calls))
        notes = [REPEAT_NOTE.format(result=o.content) for o in results]
        self.history.extend(self.format.results(calls, notes))
        return False


def run_turn(policy: Policy, env: Environment, messages: list[Message], *, seed: int = 0,
             context: KnowledgeContext | None = None, tools: list[ToolSchema] | None = None) -> TurnResult:
    """Run one user turn; ``messages`` ends with the user message and is not mutated.
    ``tools`` defaults to ``env.tools()``."""
    return _Turn(policy, env, messages, seed, context, tools).run()


def run_dialogue(policy: Policy, env: Environment, user_turns: Sequence[str | Message | Sequence[Message]], *,
                 seed: int = 0, context: KnowledgeContext | None = None,
                 before_turn: Callable[[int], None] | None = None) -> DialogueResult:
    """Run the user turns in order; each continues the same history, after the policy's system
    prompt. A turn is a user text, a user message, or a list of messages ending with the user's.
    ``before_turn(t)`` runs before turn ``t`` (e.g. new tools arrive). A turn whose model call
    raises ``ValueError`` (a prompt that no longer fits the context) ends the dialogue as
    ``DialogueResult.error``, never a crash."""
    system = policy.settings.system_message
    history: list[Message] = [{"role": "system", "content": system}] if system else []
    turns: list[TurnResult] = []
    for t, user in enumerate(user_turns):
        if before_turn is not None:
            before_turn(t)
        if isinstance(user, str):
            new = [{"role": "user", "content": user}]
        elif isinstance(user, dict):
            new = [dict(user)]
        else:
            new = [dict(m) for m in user]
        try:
            turn = run_turn(policy, env, [*history, *new], seed=seed + SEED_STRIDE * t, context=context)
        except ValueError as error:
            return DialogueResult(tuple(turns), history, f"turn {t}: {error}")
        turns.append(turn)
        history = turn.messages
    return DialogueResult(tuple(turns), history)
