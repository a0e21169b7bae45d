"""Run a model on BFCL entries through kate's sampler and agent loop; score with the official
checkers; write one record per entry as it finishes.

Each record keeps the prompt as sent (knowledge included), every sample's raw text, the chosen
calls and the vote, so a run can be re-scored without regenerating (``rescore_record``).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from tqdm import tqdm

from kate.agent.loop import Retrieve, run_turn
from kate.bfcl.checkers import score_multi_turn, score_single_turn
from kate.bfcl.data import BFCLEntry
from kate.bfcl.env import BFCLEnvironment
from kate.eval.run_store import RunStore, load_run
from kate.io import atomic_write_text
from kate.llm.base import ChatModel, Message
from kate.sampling.policy import Sampler
from kate.toolcall import ToolCall

# BFCL's own message for the turn at which miss_func's held-out functions arrive.
ADDITIONAL_FUNCTIONS_MESSAGE = "I have updated some more functions you can choose from. What about now?"

# entry -> the retrieval hook for that entry (its tools and API classes decide what may be shown)
RetrieveFactory = Callable[[BFCLEntry], Retrieve | None]


def _calls(items: list[dict[str, Any]]) -> list[ToolCall]:
    return [ToolCall(c["name"], c["arguments"]) for c in items]


def _with_knowledge(messages: list[Message], retrieve: Retrieve | None) -> tuple[list[Message], str | None]:
    """KATE injects knowledge inside the (last) user message of the turn."""
    messages = [dict(m) for m in messages]
    if retrieve is None:
        return messages, None
    last = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    knowledge = retrieve(str(messages[last].get("content") or ""), messages[:last])
    if knowledge:
        messages[last]["content"] = f"{messages[last]['content']}\n\n{knowledge}"
    return messages, knowledge or None


def run_single_turn(entry: BFCLEntry, model: ChatModel, sampler: Sampler, retrieve: Retrieve | None, seed: int) -> dict:
    messages, knowledge = _with_knowledge(entry.turns[0], retrieve)
    try:
        step = sampler.act(model, messages, entry.tools, seed=seed)
    except ValueError as error:  # e.g. the prompt does not fit the context: a recorded failure
        return {"calls": [], "parse_error": None, "error_type": "kate:model_error", "error": str(error),
                "valid": False, "prompt": messages, "knowledge": knowledge, "outputs": [], "vote": None}  # fmt: skip
    score = score_single_turn(entry, list(step.calls), step.parse_error)
    return {
        **score,
        "calls": [c.to_dict() for c in step.calls],
        "parse_error": step.parse_error,
        "prompt": messages,
        "knowledge": knowledge,
        "outputs": [c.text for c in step.completions],
        "vote": step.vote.to_dict() if step.vote is not None else None,
        "usage": {"prompt_tokens": step.usage.prompt_tokens, "completion_tokens": step.usage.completion_tokens},
    }


def run_multi_turn(
    entry: BFCLEntry,
    model: ChatModel,
    sampler: Sampler,
    retrieve: Retrieve | None,
    seed: int,
    *,
    max_steps: int,
    repeat_policy: str,
    system_prompt: str | None,
) -> dict:
    env = BFCLEnvironment(entry)
    history: list[Message] = [{"role": "system", "content": system_prompt}] if system_prompt else []
    turns: list[dict[str, Any]] = []
    steps_per_turn: list[list[list[ToolCall]]] = []
    error = None
    try:
        for t, turn_messages in enumerate(entry.turns):
            if t in entry.missed_functions:
                env.add_functions(entry.missed_functions[t])
                turn_messages = [{"role": "user", "content": ADDITIONAL_FUNCTIONS_MESSAGE}]
            try:
                result = run_turn(model, env, [*history, *turn_messages], sampler, tools=env.tools(),
                                  max_steps=max_steps, repeat_policy=repeat_policy, retrieve=retrieve,
                                  seed=seed + 1000 * t)  # fmt: skip
            except ValueError as exc:  # context overflow (long_context policy): the dialogue stops here
                error = f"turn {t}: {exc}"
                break
            history = result.messages
            record = result.to_dict(full_history=False)
            record.pop("state", None)
            turns.append(record)
            steps_per_turn.append([list(s.calls) for s in result.steps if s.executed])
    finally:
        env.close()
    score = score_multi_turn(entry, steps_per_turn)
    if error is not None:
        score = {**score, "error_type": "kate:model_error", "error": error}
    return {
        **score,
        "turn_fraction": score["turns_passed"] / max(score["turns_total"], 1),
        "end_reasons": [t["end_reason"] for t in turns],
        "steps_per_turn": [[[c.to_dict() for c in step] for step in turn] for turn in steps_per_turn],
        "turns": turns,
    }


def run_entry(entry: BFCLEntry, model: ChatModel, sampler: Sampler, retrieve_factory: RetrieveFactory | None,
              seed: int, *, one_call: bool = True, **multi_turn_options: Any) -> dict:  # fmt: skip
    """``one_call``: in multi-turn dialogues each step is the first call the model writes (the
    same for every arm; small models otherwise write runs of calls until the token limit)."""
    retrieve = retrieve_factory(entry) if retrieve_factory is not None else None
    start = time.perf_counter()
    if entry.is_multi_turn:
        if one_call and dataclasses.is_dataclass(sampler) and hasattr(sampler, "one_call"):
            sampler = dataclasses.replace(sampler, one_call=True)
        body = run_multi_turn(entry, model, sampler, retrieve, seed, **multi_turn_options)
    else:
        body = run_single_turn(entry, model, sampler, retrieve, seed)
    return {"id": entry.id, "category": entry.category, "seed": seed, **body, "seconds": round(time.perf_counter() - start, 3)}


def rescore_record(entry: BFCLEntry, record: dict) -> dict:
    """Score a stored record again from its parsed calls (no generation)."""
    if entry.is_multi_turn:
        return score_multi_turn(entry, [[_calls(step) for step in turn] for turn in record["steps_per_turn"]])
    return score_single_turn(entry, _calls(record["calls"]), record.get("parse_error"))


def rescore_run(folder: str | Path) -> dict[str, int]:
    """Re-score every record of a run folder with the current checkers, in place (atomically):
    ``{"records": n, "changed": k}``. For a checker fix; nothing is regenerated."""
    from kate.bfcl.data import load_entries

    _, records = load_run(folder)
    entries = {e.id: e for c in sorted({r["category"] for r in records}) for e in load_entries(c, "all")}
    changed = 0
    for record in records:
        score = rescore_record(entries[record["id"]], record)
        if "turns_total" in score:
            score["turn_fraction"] = score["turns_passed"] / max(score["turns_total"], 1)
        if record.get("error_type") == "kate:model_error":  # the model failed, not the calls: keep why
            score.update(error_type=record["error_type"], error=record["error"])
        changed += any(record.get(k) != v for k, v in score.items())
        record.update(score)
    atomic_write_text(Path(folder) / "records.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return {"records": len(records), "changed": changed}


def run_entries(
    entries: list[BFCLEntry],
    model: ChatModel,
    sampler: Sampler,
    store: RunStore,
    *,
    seed: int = 0,
    workers: int = 1,
    retrieve_factory: RetrieveFactory | None = None,
    max_steps: int = 20,
    repeat_policy: str = "warn",
    system_prompt: str | None = None,
    one_call: bool = True,
    desc: str = "bfcl",
) -> list[dict]:
    """Run every entry not yet in ``store``; bounded parallelism; a progress bar with running accuracy."""
    done = store.done_ids()
    todo = [e for e in entries if e.id not in done]
    records = [r for r in store.records() if r["id"] in {e.id for e in entries}]
    options = dict(max_steps=max_steps, repeat_policy=repeat_policy, system_prompt=system_prompt, one_call=one_call)
    correct = sum(bool(r["valid"]) for r in records)
    bar = tqdm(total=len(entries), initial=len(records), desc=desc, unit="entry", dynamic_ncols=True)
    bar.set_postfix(acc=f"{correct / max(len(records), 1):.3f}")
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(run_entry, e, model, sampler, retrieve_factory, seed, **options) for e in todo]
        for future in as_completed(futures):
            record = future.result()
            store.append(record)
            records.append(record)
            correct += bool(record["valid"])
            bar.update(1)
            bar.set_postfix(acc=f"{correct / len(records):.3f}")
    bar.close()
    return records
