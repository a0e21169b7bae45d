"""The verifier's data: width samples from run records, labelled by BFCL's official checker.

A run record (``bench/runs/.../records.jsonl``: one line per BFCL entry of a training half) holds the
step's ``outputs`` (the N raw samples) and its ``vote`` with the distinct ``candidates`` (canonical call
sets). ``candidate_rows`` gives one row per (record, candidate): the prompt as the sampler saw it
(the record's ``prompt``, else the entry's first turn), the entry's tools, the candidate's text (the
canonical ``to_json_text(calls)`` of a call candidate; the first sample's raw text for a no-call one,
which is what the vote sees too), its votes and share of the N samples, and ``label``: the
candidate right by ``kate.bfcl.checkers.score_single_turn``. Malformed candidates (samples whose call
could not be parsed) are left out and counted: the vote never picks them while another candidate stands.

``preference_pairs`` pairs every right candidate with every wrong one of the same record (at most
``max_per_entry``, a seeded choice); a record whose candidates are all right or all wrong gives none
and is counted. ``fold`` splits entries (by id, so an entry's rows and pairs never straddle folds)
into ``train`` and ``held_out`` by a seeded hash. Only training halves are read: a record of an
entry with an odd index (KATE's test half) raises, naming the file and the id. Everything is
deterministic: same files and settings, same rows, pairs and folds.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kate.io import read_jsonl
from kate.toolcall import ToolCall
from kate.toolcall.format import to_json_text

FOLDS = ("train", "held_out")


def fold(entry_id: str, held_out: float, seed: int = 0) -> str:
    """``"held_out"`` for a seeded-hash share ``held_out`` of entry ids, ``"train"`` for the rest."""
    if not 0.0 <= held_out < 1.0:
        raise ValueError(f"held_out must be in [0, 1), got {held_out!r}")
    digest = hashlib.sha256(f"verifier-fold:{seed}:{entry_id}".encode()).digest()
    return "held_out" if int.from_bytes(digest[:8], "big") / 2**64 < held_out else "train"


def candidate_text(candidate: dict[str, Any], outputs: Sequence[str]) -> str:
    """What the verifier reads for a candidate (and what the vote shows it at inference)."""
    if candidate["kind"] == "call":
        return to_json_text([ToolCall.from_dict(c) for c in candidate["calls"]])
    return outputs[candidate["samples"][0]]


def _entries(category: str, cache: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if category not in cache:
        from kate.bfcl.data import load_entries

        cache[category] = {e.id: e for e in load_entries(category, "train")}
    return cache[category]


def _entry(record: dict[str, Any], where: str, cache: dict[str, dict[str, Any]]) -> Any:
    from kate.bfcl.data import MULTI_TURN, _entry_index

    entry_id, category = record.get("id"), record.get("category")
    if not isinstance(entry_id, str) or not isinstance(category, str):
        raise ValueError(f"{where}: a record needs a string 'id' and 'category'")
    if _entry_index(entry_id) % 2 == 1:
        raise ValueError(f"{where}: {entry_id!r} is from KATE's test half (odd index); the verifier trains "
                         "only on training halves (even index)")
    if category in MULTI_TURN:
        raise ValueError(f"{where}: {entry_id!r} is multi-turn; the verifier reads single-turn width steps only")
    entry = _entries(category, cache).get(entry_id)
    if entry is None:
        raise ValueError(f"{where}: no BFCL {category} training-half entry {entry_id!r}")
    return entry


def _rows_of(record: dict[str, Any], entry: Any, source: str, where: str) -> tuple[list[dict[str, Any]], int]:
    from kate.bfcl.checkers import score_single_turn

    vote, outputs = record.get("vote"), record.get("outputs")
    if not isinstance(vote, dict) or not isinstance(vote.get("candidates"), list) or not isinstance(outputs, list):
        raise ValueError(f"{where}: {record['id']!r} has no width vote (needs 'vote.candidates' and 'outputs')")
    n = vote.get("n") or len(outputs)
    rows, malformed = [], 0
    for index, candidate in enumerate(vote["candidates"]):
        if candidate.get("kind") == "malformed":
            malformed += 1
            continue
        try:
            calls = [ToolCall.from_dict(c) for c in candidate.get("calls", [])]
            text = candidate_text(candidate, outputs)
        except (ValueError, KeyError, IndexError, TypeError) as error:
            raise ValueError(f"{where}: {record['id']!r} candidate {index} is unreadable ({error})") from None
        votes = int(candidate.get("votes", len(candidate.get("samples", []))))
        rows.append({
            "id": entry.id, "category": entry.category, "source": source, "candidate": index,
            "kind": candidate["kind"], "prompt": record.get("prompt") or entry.turns[0], "tools": entry.tools,
            "text": text, "votes": votes, "share": votes / n if n else 0.0,
            "label": bool(score_single_turn(entry, calls, None)["valid"]),
        })  # fmt: skip
    return rows, malformed


def candidate_rows(paths: Iterable[str | Path], *, held_out: float = 0.2,
                   seed: int = 0) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``(rows, counts)``: one labelled row per (record, candidate) of the records files, each with its
    ``fold``. Rows repeating an (id, text) already read (the same entry in another run) are dropped."""
    cache: dict[str, dict[str, Any]] = {}
    rows, seen = [], set()
    counts: Counter = Counter()
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such records file")
        for number, record in enumerate(read_jsonl(path), start=1):
            where = f"{path}:{number}"
            if not isinstance(record, dict):
                raise ValueError(f"{where}: a record must be a JSON object")
            entry = _entry(record, where, cache)
            found, malformed = _rows_of(record, entry, str(path), where)
            counts["records"] += 1
            counts["malformed_left_out"] += malformed
            for row in found:
                key = (row["id"], row["text"])
                if key in seen:
                    counts["duplicates"] += 1
                    continue
                seen.add(key)
                row["fold"] = fold(row["id"], held_out, seed)
                rows.append(row)
    counts["rows"] = len(rows)
    counts["right"] = sum(r["label"] for r in rows)
    counts["entries"] = len({r["id"] for r in rows})
    return rows, dict(counts)


def preference_pairs(rows: Sequence[dict[str, Any]], *, max_per_entry: int | None = 8,
                     seed: int = 0) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """``(pairs, counts)``: (right, wrong) candidate pairs of the same entry, with the prompt, the tools,
    ``chosen`` / ``rejected`` texts and the entry's fold. ``counts`` has ``all_right`` / ``all_wrong``
    (entries that give no pair) and ``pairs``."""
    by_entry: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_entry.setdefault(row["id"], []).append(row)
    pairs, counts = [], Counter()
    for entry_id in sorted(by_entry):
        group = by_entry[entry_id]
        right = [r for r in group if r["label"]]
        wrong = [r for r in group if not r["label"]]
        if not wrong or not right:
            counts["all_right" if not wrong else "all_wrong"] += 1
            continue
        combos = [(a, b) for a in right for b in wrong]
        if max_per_entry is not None and len(combos) > max_per_entry:
            picker = random.Random(f"{seed}:{entry_id}")
            combos = [combos[i] for i in sorted(picker.sample(range(len(combos)), max_per_entry))]
            counts["capped"] += 1
        for a, b in combos:
            pairs.append({"id": entry_id, "category": a["category"], "fold": a["fold"], "prompt": a["prompt"],
                          "tools": a["tools"], "chosen": a["text"], "rejected": b["text"],
                          "chosen_share": a["share"], "rejected_share": b["share"]})  # fmt: skip
    counts["pairs"] = len(pairs)
    counts["entries_with_pairs"] = len({p["id"] for p in pairs})
    return pairs, dict(counts)


def in_fold(items: Iterable[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    if name not in FOLDS:
        raise ValueError(f"fold must be one of {FOLDS}, got {name!r}")
    return [item for item in items if item["fold"] == name]


def pairs_sha256(pairs: Sequence[dict[str, Any]]) -> str:
    """A digest of the pairs trained on: a resumed run refuses other data (``check_job``)."""
    import json

    text = json.dumps([[p["id"], p["chosen"], p["rejected"]] for p in pairs], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()
