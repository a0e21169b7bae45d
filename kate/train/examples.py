"""Tokenized SFT examples from the step dataset: ``input_ids`` + ``completion_mask`` (TRL's
pre-tokenized format; ``completion_only_loss`` then trains on the mask's tokens only).

``pack="step"``: one example per step (the prompt, then the step). ``pack="dialogue"``: one example
per dialogue, holding every step of it with the mask on each assistant step. Every step's prompt is
a prefix of the next step's (the loop only appends to the history, knowledge included), so under a
causal model the packed example gives each step exactly the context it has alone, at the cost of
one forward pass per dialogue instead of one per step (a multi-turn BFCL dialogue has ~13 steps over
prompts of ~5k tokens). A dialogue whose steps are not prefixes of each other is left as steps.
A packed dialogue longer than ``max_length`` is split into its steps; a step longer than that is
left out and counted (``too_long``), never cut. ``kind_repeats`` shows an example several times by its
step kind (``{"answer": 4}``: a rare kind weighed up; a packed dialogue takes its steps' largest).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kate.toolcall import ToolCall
from kate.toolcall.format import to_hermes, to_json_text

PACKS = ("step", "dialogue")
CALL_FORMATS = ("template", "json")


def with_call_format(row: Mapping[str, Any], call_format: str) -> Mapping[str, Any]:
    """The row with its call step's target in ``call_format``: ``template`` as built; ``json`` as the
    call's JSON object (several: a list), then what the template wrote after the calls (its end of turn).
    A call step the template did not write as Hermes blocks is an error naming the row."""
    if call_format not in CALL_FORMATS:
        raise ValueError(f"call_format must be one of {CALL_FORMATS}, got {call_format!r}")
    if call_format == "template" or row["kind"] != "call":
        return row
    calls = [ToolCall.from_dict(c) for c in json.loads(row["target_calls"])]
    hermes = to_hermes(calls)
    if not row["completion_text"].startswith(hermes):
        raise ValueError(f"row {row['id']}: call_format=json needs the template's Hermes rendering of the calls, "
                         f"got {row['completion_text'][:80]!r}")
    return {**row, "completion_text": to_json_text(calls) + row["completion_text"][len(hermes):]}


def _encode(tokenizer: Any, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"] if text else []


def step_example(tokenizer: Any, row: Mapping[str, Any]) -> dict[str, list[int]]:
    prompt, completion = _encode(tokenizer, row["prompt_text"]), _encode(tokenizer, row["completion_text"])
    return {"input_ids": prompt + completion, "completion_mask": [0] * len(prompt) + [1] * len(completion)}


def dialogue_example(tokenizer: Any, rows: Sequence[Mapping[str, Any]]) -> dict[str, list[int]] | None:
    """All steps of one dialogue in one sequence, or None when a step's prompt does not extend the last."""
    ids: list[int] = []
    mask: list[int] = []
    text = ""
    for row in rows:
        prompt = row["prompt_text"]
        if not prompt.startswith(text):
            return None
        new = _encode(tokenizer, prompt[len(text):])
        completion = _encode(tokenizer, row["completion_text"])
        ids += new + completion
        mask += [0] * len(new) + [1] * len(completion)
        text = prompt + row["completion_text"]
    return {"input_ids": ids, "completion_mask": mask}


STEP_KINDS = ("call", "no_call", "answer")


def check_kind_repeats(kind_repeats: Mapping[str, int]) -> dict[str, int]:
    """``kind_repeats`` checked: known step kinds, whole copies of at least 1."""
    unknown = sorted(set(kind_repeats) - set(STEP_KINDS))
    if unknown:
        raise ValueError(f"kind_repeats: unknown step kind(s) {unknown}; kinds: {', '.join(STEP_KINDS)}")
    bad = {k: v for k, v in kind_repeats.items() if not isinstance(v, int) or isinstance(v, bool) or v < 1}
    if bad:
        raise ValueError(f"kind_repeats: copies must be whole numbers >= 1, got {bad}")
    return dict(kind_repeats)


def sft_examples(tokenizer: Any, rows: Iterable[Mapping[str, Any]], *, pack: str = "dialogue",
                 max_length: int | None = None, call_format: str = "template",
                 kind_repeats: Mapping[str, int] | None = None,
                 ) -> tuple[list[dict[str, Any]], dict[str, int]]:  # fmt: skip
    """The examples and counts (``examples``, ``steps``, ``packed_dialogues``, ``too_long``, ``repeated``:
    copies added by ``kind_repeats``); call steps' targets in ``call_format`` (``with_call_format``: with
    json, no dialogue packs, its history differs)."""
    if pack not in PACKS:
        raise ValueError(f"pack must be one of {PACKS}, got {pack!r}")
    repeats = check_kind_repeats(kind_repeats or {})
    by_dialogue: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        by_dialogue[row["source_id"]].append(with_call_format(row, call_format))
    examples: list[dict[str, Any]] = []
    counts = {"steps": 0, "packed_dialogues": 0, "too_long": 0, "repeated": 0}
    for source_id, group in by_dialogue.items():
        group.sort(key=lambda r: (r["turn"], r["index"]))
        counts["steps"] += len(group)
        packed = dialogue_example(tokenizer, group) if pack == "dialogue" and len(group) > 1 else None
        if packed is not None and max_length is not None and len(packed["input_ids"]) > max_length:
            packed = None  # too long as one sequence: its steps may still fit one by one
        if packed is not None:
            made = [(packed, max(repeats.get(r["kind"], 1) for r in group))]
        else:
            made = [(step_example(tokenizer, r), repeats.get(r["kind"], 1)) for r in group]
        counts["packed_dialogues"] += packed is not None
        for example, copies in made:
            if max_length is not None and len(example["input_ids"]) > max_length:
                counts["too_long"] += 1  # steps left out
                continue
            examples += [{**example, "source_id": source_id}] * copies
            counts["repeated"] += copies - 1
    counts["examples"] = len(examples)
    return examples, counts
