"""Does the model copy the example's number of calls? From an arm's stored single-turn records (no model):
for every entry that received a several-call example (the ```json list of ``Template.call_block=fenced_list``),
whether the reply made as many calls as the example shows, and whether it was right, per category; and
whether the example showed as many calls as the entry's ground truth holds. ``bench/copied_count.py`` runs
it on a run folder."""

from __future__ import annotations

import json
import re
from collections import Counter

OUTCOMES = ("copied_right", "copied_wrong", "other_right", "other_wrong")
FENCE = re.compile(r"```json\n(.*?)```", re.S)


def example_counts(knowledge: str) -> list[int]:
    """Number of calls in each fenced example list, in order (one that does not parse is left out)."""
    counts = []
    for block in FENCE.findall(knowledge or ""):
        try:
            calls = json.loads(block)
        except json.JSONDecodeError:
            continue
        counts.append(len(calls) if isinstance(calls, list) else 1)
    return counts


def tally(records, needed: dict[str, int] | None = None) -> dict:
    """Per category: copied (the reply made as many calls as the first example shows) / other x right /
    wrong, and ``copied_any`` (as many as some example shows: several examples of different counts,
    ``distinct_call_counts``); with ``needed`` (entry id -> ground-truth call count), also how many
    entries were shown an example of the needed count (``shown_needed``) and how many replies made it."""
    needed = needed or {}
    rows: dict[str, Counter] = {}
    for r in records:
        if r.get("category") == "multi_turn_base" or not r.get("knowledge"):
            continue
        shown = example_counts(r["knowledge"])
        if not shown:
            continue
        made = len(r.get("calls") or [])
        key = ("copied" if made == shown[0] else "other") + ("_right" if r.get("valid") else "_wrong")
        row = rows.setdefault(r["category"], Counter())
        row[key] += 1
        row["copied_any"] += made in shown
        if r.get("id") in needed:
            row["shown_needed"] += needed[r["id"]] in shown
            row["made_needed"] += made == needed[r["id"]]
    total = sum((c for c in rows.values()), Counter())
    return {"per_category": {k: dict(v) for k, v in sorted(rows.items())}, "total": dict(total),
            "reached": sum(total[k] for k in OUTCOMES), "copied": total["copied_right"] + total["copied_wrong"], "copied_any": total["copied_any"]}
