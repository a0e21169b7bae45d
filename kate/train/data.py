"""The training dataset: one row per assistant step (``kate.train.steps``), rendered in the model's
own chat format (``kate.train.render``), split by dialogue into an SFT part and an RL part, saved as
a Hugging Face ``datasets`` dataset with its own manifest.

    rows, skipped = build_rows(builder, entries, trajectories, renderer, rl_share=0.5, seed=0)
    save_dataset(rows, manifest, "train/data/bfcl_steps")
    dataset, manifest = load_dataset_dir("train/data/bfcl_steps", part="sft")

Columns: ``id``, ``source_id``, ``category``, ``kind`` (call | answer | no_call), ``part`` (sft | rl),
``turn``, ``index``, ``prompt`` (the messages as sent, JSON), ``completion`` (the target assistant
message, JSON), ``tools`` (JSON), ``target_calls`` (JSON), ``target_answer``, ``hits`` (the knowledge
shown, JSON), ``has_distractor``, ``answer_writer`` (who wrote a final answer), ``prompt_text`` /
``completion_text`` (rendered), ``prompt_tokens`` / ``completion_tokens``, ``masked`` (its function and
parameter names masked: ``kate.train.masking``).
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from kate.io import atomic_folder, atomic_write_json
from kate.train.masking import is_masked, mask_step, masking_for
from kate.train.render import RenderError, StepRenderer, assistant_message
from kate.train.steps import Skipped, SolvedStep, StepBuilder, iterate, sibling_ids

MANIFEST = "kate-train-data.json"
FORMAT = "kate-train-steps/1"
PARTS = ("sft", "rl", "all")


def part_of(source_id: str, seed: int, rl_share: float) -> str:
    """``rl`` for ~``rl_share`` of dialogues (by a seeded hash of the id; BFCL's sibling dialogues,
    which share questions, always land in the same part), else ``sft``."""
    digest = hashlib.sha256(f"{seed}|{sibling_ids(source_id)[0]}".encode("utf-8")).digest()
    return "rl" if int.from_bytes(digest[:8], "big") / 2**64 < rl_share else "sft"


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=False)


def step_row(step: SolvedStep, renderer: StepRenderer, part: str, masked: bool = False) -> dict[str, Any]:
    """One dataset row: the step's messages, target and knowledge, rendered and counted."""
    target = assistant_message(step.target.calls, step.target.answer)
    prompt_text = renderer.prompt_text(step.prompt, step.tools)
    completion_text = renderer.completion_text(step.prompt, step.tools, target)
    ids, mask = renderer.encode(prompt_text, completion_text)
    return {
        "id": step.id, "source_id": step.source_id, "category": step.category, "kind": step.target.kind,
        "part": part, "turn": step.turn, "index": step.index,
        "prompt": _dumps(step.prompt), "completion": _dumps(target), "tools": _dumps(step.tools or []),
        "target_calls": _dumps([c.to_dict() for c in step.target.calls]),
        "target_answer": step.target.answer if not step.target.calls else "",
        "hits": _dumps(step.hits), "has_distractor": any(h.get("distractor") for h in step.hits),
        "answer_writer": step.answer_label or "",
        "prompt_text": prompt_text, "completion_text": completion_text,
        "prompt_tokens": len(ids) - sum(mask), "completion_tokens": sum(mask), "masked": masked,
    }  # fmt: skip


def rows_sha256(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows' sha256; an unmasked row hashes without its ``masked`` column, as rows were hashed
    before masking existed (a dataset built with ``masking.share=0`` keeps its sha256)."""
    plain = [{k: v for k, v in r.items() if k != "masked" or v} for r in rows]
    return hashlib.sha256(json.dumps(plain, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def training_sha256(rows: Sequence[Mapping[str, Any]]) -> str:
    """The sha256 of what a trainer reads: the rows without the retrieval scores of their ``hits``
    (floats that differ in the last place between CPUs, so a rebuild elsewhere would not resume)."""
    return rows_sha256([{**r, "hits": _without_scores(r["hits"])} if r.get("hits") else r for r in rows])


def _without_scores(hits: Any) -> Any:
    shown = json.loads(hits) if isinstance(hits, str) else hits
    if not isinstance(shown, list):
        return hits
    return json.dumps([{k: v for k, v in h.items() if k != "score"} if isinstance(h, dict) else h for h in shown])


def build_rows(builder: StepBuilder, entries: Sequence[Any], trajectories: Sequence[Any], renderer: StepRenderer,
               *, rl_share: float, seed: int, own_tools: Sequence[Any] = (), mask_share: float = 0.0,
               mask_seed: int = 0, progress: bool = True) -> tuple[list[dict[str, Any]], list[Skipped]]:  # fmt: skip
    """Every item's rows (with its part) and the items left out, with why; ~``mask_share`` of the
    items (by a seeded hash of the id) with their function and parameter names masked."""
    rows: list[dict[str, Any]] = []
    skipped: list[Skipped] = []
    bar = tqdm(iterate(builder, entries, trajectories, own_tools),
               total=len(entries) + len(trajectories) + len(own_tools),
               desc="training steps", disable=not progress)
    for source_id, result in bar:
        if isinstance(result, Skipped):
            skipped.append(result)
            continue
        part = part_of(source_id, seed, rl_share)
        masked = is_masked(source_id, mask_seed, mask_share)
        try:
            rows += [step_row(mask_step(step, masking_for(step.tools, source_id, mask_seed)) if masked else step,
                              renderer, part, masked) for step in result]
        except RenderError as error:  # the item is left out, named; the build goes on
            skipped.append(Skipped(source_id, f"rendering: {error}"))
        bar.set_postfix(steps=len(rows), skipped=len(skipped))
    return rows, skipped


def _percentiles(values: Sequence[int]) -> dict[str, int]:
    if not values:
        return {}
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"p50": pick(0.5), "p90": pick(0.9), "p99": pick(0.99), "max": ordered[-1],
            "mean": round(statistics.fmean(ordered), 1)}


def stats(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Counts per part, kind and category, and token-length percentiles (prompt, completion, total)."""
    rows = list(rows)
    by = lambda key: dict(sorted(Counter(r[key] for r in rows).items()))  # noqa: E731
    return {
        "steps": len(rows), "dialogues": len({r["source_id"] for r in rows}),
        "part": by("part"), "kind": by("kind"), "category": by("category"),
        "with_knowledge": sum(1 for r in rows if r["hits"] != "[]"),
        "with_distractor": sum(1 for r in rows if r["has_distractor"]),
        "answer_writer": dict(Counter(r["answer_writer"] for r in rows if r["answer_writer"])),
        "tokens": {"prompt": _percentiles([r["prompt_tokens"] for r in rows]),
                   "completion": _percentiles([r["completion_tokens"] for r in rows]),
                   "total": _percentiles([r["prompt_tokens"] + r["completion_tokens"] for r in rows])},
    }  # fmt: skip


def save_dataset(rows: Sequence[Mapping[str, Any]], manifest: Mapping[str, Any], out_dir: str | os.PathLike) -> Path:
    """``datasets``' ``save_to_disk`` into a temporary sibling, the manifest beside it, then a rename."""
    from datasets import Dataset

    out = Path(out_dir)
    with atomic_folder(out) as tmp:
        Dataset.from_list(list(rows)).save_to_disk(str(tmp))
        atomic_write_json(tmp / MANIFEST, {"format": FORMAT, **manifest})
    return out


def load_dataset_dir(path: str | os.PathLike, part: str = "all") -> tuple[Any, dict[str, Any]]:
    """The dataset (only ``part``'s rows) and its manifest; a missing or foreign folder fails naming it."""
    from datasets import load_from_disk

    if part not in PARTS:
        raise ValueError(f"part must be one of {PARTS}, got {part!r}")
    folder = Path(path)
    manifest_path = folder / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{manifest_path}: no training dataset here (run `kate train data`)") from None
    except ValueError as error:
        raise ValueError(f"{manifest_path}: not valid JSON ({error})") from None
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{manifest_path}: format {manifest.get('format')!r}, expected {FORMAT!r}")
    dataset = load_from_disk(str(folder))
    if len(dataset) != manifest.get("stats", {}).get("steps", len(dataset)):
        raise ValueError(f"{folder}: {len(dataset)} rows, the manifest says {manifest['stats']['steps']}")
    if part != "all":
        dataset = dataset.filter(lambda row: row["part"] == part)
    return dataset, manifest
