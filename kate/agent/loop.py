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


def run_turn(policy: Policy, env: Environment, messages: list[Message], *, seed: int = 0,
             context: KnowledgeContext | None = None, tools: list[ToolSchema] | None = None) -> TurnResult:
    """Run one user turn; ``messages`` ends with the user message and is not mutated.
    ``tools`` defaults to ``env.tools()``."""
    if not messages or messages[-1].get("role") != "user":
        raise ValueError("a turn needs a history that ends with a user message")
    settings, policy_format = policy.settings, action_format_of(env)
    start = len(messages) - 1
    user_text = str(messages[start].get("content") or "")
    history, retrieved = policy.prepare(messages, context)
    tools = env.tools() if tools is None else tools
    repeat_policy = settings.repeat_policy
    if settings.asks_answers:
        check_answers_supported(policy.model)
    max_tokens = getattr(policy.sampler, "max_tokens", 256)

    steps: list[StepRecord] = []

    def end_with_answer(index: int) -> tuple[str | None, str]:
        """Ask for the answer (prefilled), record the step, keep the answer in the history: (answer, end
        reason), the reason ``"repeat"`` when the reply is still no answer."""
        asked, answer = ask_answer(policy.model, history, tools, prefill=settings.answer_prefill, index=index,
                                   seed=seed + index, max_tokens=max_tokens)  # fmt: skip
        steps.append(asked)
        if answer is not None:
            history.append({"role": "assistant", "content": answer})
        return answer, ("answer" if answer is not None else "repeat")

    executed: list[Executed] = []
    seen: dict[tuple[str, ...], tuple[int, tuple[ToolCall, ...], tuple[Observation, ...]]] = {}
    malformed: dict[str, int] = {}  # raw text of malformed steps -> first step index
    repeats, in_a_row, answer, end_reason = 0, 0, None, "max_steps"
    for i in range(settings.max_steps):
        step = policy.sampler.act(policy.model, history, tools, seed=seed + i, one_call=settings.one_call)
        vote = step.vote.to_dict() if step.vote is not None else None
        record = dict(index=i, text=step.text, vote=vote, usage=step.usage)
        if (settings.echo_policy != "keep" and not step.calls and step.parse_error is None
                and no_answer(step.text, history)):  # fmt: skip
            steps.append(StepRecord(**record, calls=(), observations=(), executed=False, echo=True))
            if settings.echo_policy == "answer" or executed:
                answer, end_reason = end_with_answer(i + 1)
                break
            step = ask_call(policy.model, history, tools, prefill=settings.call_prefill, seed=seed + i,
                            max_tokens=max_tokens, one_call=settings.one_call)  # fmt: skip
            record = dict(index=i, text=step.text, vote=None, usage=step.usage, prefill=settings.call_prefill)
        if not step.calls:
            if step.parse_error is not None:
                first = malformed.get(step.text) if repeat_policy != "off" else None
                steps.append(StepRecord(**record, calls=(), observations=(), executed=False,
                                        parse_error=step.parse_error, repeat_of=first))
                in_a_row += 1
                if first is not None:  # the same broken output again: the model is stuck
                    end_reason = "repeat"
                    break
                if settings.max_malformed is not None and in_a_row >= settings.max_malformed:
                    end_reason = "malformed"
                    break
                malformed.setdefault(step.text, i)
                history.extend(policy_format.malformed(step.text, step.parse_error))
                continue
            history.append({"role": "assistant", "content": step.text})
            steps.append(StepRecord(**record, calls=(), observations=(), executed=False))
            answer, end_reason = step.text, "answer"
            break
        in_a_row = 0
        unique = tuple(dict.fromkeys(step.calls)) if repeat_policy != "off" else tuple(step.calls)
        calls = _with_ids(unique, f"call_{len(history)}")
        key = canonical_call_set(calls)
        earlier = seen.get(key) if repeat_policy != "off" else None
        fed = fed_sources(calls, executed) if earlier is None and settings.repeat_match == "fed" else None
        if earlier is not None or fed is not None:
            if earlier is not None:
                first, earlier_calls, earlier_obs = earlier
                results = _earlier_results(calls, earlier_calls, earlier_obs)
            else:
                first, results = min(j for j, _, _ in fed), [o for _, _, o in fed]
            repeats += 1
            steps.append(StepRecord(**record, calls=calls, observations=(), executed=False, repeat_of=first))
            if repeat_policy == "answer":
                answer, end_reason = end_with_answer(i + 1)
                break
            if repeat_policy == "end_turn" or repeats > 1:
                end_reason = "repeat"
                break
            history.append(policy_format.assistant(step.text, calls))
            notes = [REPEAT_NOTE.format(result=o.content) for o in results]
            history.extend(policy_format.results(calls, notes))
            continue
        observations = tuple(_safe_execute(env, call) for call in calls)
        history.append(policy_format.assistant(step.text, calls))
        history.extend(policy_format.results(calls, [o.content for o in observations]))
        seen.setdefault(key, (i, calls, observations))
        executed.extend((i, c, o) for c, o in zip(calls, observations))
        steps.append(StepRecord(**record, calls=calls, observations=observations, executed=True))
        if is_finished(env):
            end_reason = "finished"
            break
    else:
        if settings.answer_at_max_steps:
            answer, _ = end_with_answer(settings.max_steps)
            end_reason = "answer" if answer is not None else end_reason
    knowledge = retrieved.text if retrieved is not None else None
    return TurnResult(user_text, knowledge, tuple(steps), answer, end_reason, history, start, env.state(), retrieved)


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
