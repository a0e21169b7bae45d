"""Model-adaptive necessity (arXiv 2605.14038): is a tool needed *by this model* for this item?

The model answers each item ``samples`` times (default 10) at ``temperature`` (0.7) with no tools
offered. The tool is unnecessary when it is right at least ``r`` of those times. The paper says
r = N (every sample right); the authors' released labels imply r = 9 of 10. ``r`` is a config
value defaulting to the paper's; ``report_r`` lists the thresholds a report shows side by side.

``stop_early`` draws the samples in rounds and stops an item as soon as it has more wrong answers
than the lowest reported threshold allows (N - min(r) + 1: 2 of 10 when 9 and 10 are reported): it is
then necessary at every reported r whatever the remaining samples say, so the labels are those of
all N samples of the same stream, for a model that is mostly wrong at a fraction of the cost. The
correct count of a stopped item is then a lower bound (its record says how many were ``drawn``), so
a label at an r below the lowest reported one is not what N samples would give: the cache key names
the stop, and such counts are never read as full ones.

``NecessityTask`` is the sampling as a task (kate's resumable runner runs it; a record keeps every
sample and its verdict); ``necessity_labels`` turns correct counts into labels for any r; the
``NecessityCache`` keeps the counts per (model weights hash, task set hash, sampling config) as
one JSON file each, written atomically, so a later diagnostic reuses them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kate.agent.policy import Policy
from kate.diagnose.items import VerifiableItem, task_set_sha256
from kate.io import atomic_write_json
from kate.llm.identity import model_identity
from kate.llm.registry import MODELS

MODEL_ERROR = "kate:model_error"


@dataclass(frozen=True)
class NecessityConfig:
    """How necessity is measured and thresholded."""

    samples: int = field(default=10, metadata={"help": "N: answers sampled per item without tools"})
    temperature: float = field(default=0.7, metadata={"help": "sampling temperature of those answers"})
    max_tokens: int = field(default=512, metadata={"help": "token limit of each answer"})
    r: int | None = field(default=None, metadata={"help": "unnecessary when right >= r of N; null: r = N (the paper)"})
    report_r: tuple[int, ...] = field(default=(10, 9), metadata={
        "help": "thresholds reported side by side (r = N, and r = 9 as the authors' labels imply); "
                "values above N are left out"})  # fmt: skip
    stop_early: bool = field(default=False, metadata={
        "help": "stop an item's sampling once it is necessary at every reported r (the same labels; a "
                "stopped item's correct count is a lower bound)"})  # fmt: skip

    def __post_init__(self) -> None:
        if not isinstance(self.samples, int) or self.samples < 1:
            raise ValueError(f"necessity.samples must be a positive integer, got {self.samples!r}")
        if self.temperature < 0:
            raise ValueError(f"necessity.temperature must be >= 0, got {self.temperature!r}")
        for name, value in (("r", self.r), *(("report_r", v) for v in self.report_r)):
            if value is not None and not (isinstance(value, int) and value >= 1):
                raise ValueError(f"necessity.{name} must be a positive integer, got {value!r}")
        if self.r is not None and self.r > self.samples:
            raise ValueError(f"necessity.r = {self.r} is more than samples = {self.samples}")
        object.__setattr__(self, "report_r", tuple(self.report_r))

    @property
    def threshold(self) -> int:
        return self.samples if self.r is None else self.r

    @property
    def reported(self) -> tuple[int, ...]:
        """The thresholds to report: ``threshold`` first, then ``report_r`` (those <= N), no repeats."""
        return tuple(dict.fromkeys([self.threshold, *(r for r in self.report_r if r <= self.samples)]))

    @property
    def stop_after_wrong(self) -> int | None:
        """With ``stop_early``: the wrong answers after which an item is necessary at every reported r."""
        return self.samples - min(self.reported) + 1 if self.stop_early else None

    def sampling(self, seed: int) -> dict[str, Any]:
        """What decides the counts (the cache key's config part); r does not, the early stop does."""
        out = {"samples": self.samples, "temperature": self.temperature, "max_tokens": self.max_tokens, "seed": seed}
        return {**out, "stop_after_wrong": self.stop_after_wrong} if self.stop_early else out


@dataclass
class NecessityTask:
    """Each item answered ``config.samples`` times without tools; a record has the correct count."""

    item_list: Sequence[VerifiableItem]
    config: NecessityConfig = field(default_factory=NecessityConfig)
    name: str = "necessity"

    def items(self) -> Sequence[VerifiableItem]:
        return self.item_list

    def describe(self) -> dict[str, Any]:
        c = self.config
        out = {"diagnostic": "necessity", "items_sha256": task_set_sha256(self.item_list), "samples": c.samples,
               "temperature": c.temperature, "max_tokens": c.max_tokens}  # fmt: skip
        return {**out, "stop_after_wrong": c.stop_after_wrong} if c.stop_early else out

    def solve(self, item: VerifiableItem, policy: Policy, seed: int) -> dict[str, Any]:
        """All N samples in one request; with ``stop_early``, rounds of as many as could end the item
        (round k seeded ``seed + samples drawn``), until it is decided or N are drawn."""
        c = self.config
        stop = c.stop_after_wrong
        outputs: list[str] = []
        reasons: list[Any] = []
        while len(outputs) < c.samples:
            wrong = sum(not item.check(text) for text in outputs)
            if stop is not None and wrong >= stop:
                break
            n = c.samples - len(outputs) if stop is None else min(stop - wrong, c.samples - len(outputs))
            try:
                completions = policy.model.chat(item.prompt(), None, n=n, temperature=c.temperature,
                                                max_tokens=c.max_tokens, seed=seed + len(outputs))  # fmt: skip
            except ValueError as error:  # the prompt does not fit: every sample counts as wrong
                return {"outputs": [], "error_type": MODEL_ERROR, "error": str(error)}
            outputs += [x.text for x in completions]
            reasons += [x.finish_reason for x in completions]
        return {"outputs": outputs, "finish_reasons": reasons}

    def score(self, item: VerifiableItem, trace: Mapping[str, Any]) -> dict[str, Any]:
        correct = [item.check(text) for text in trace.get("outputs", [])]
        count = sum(correct)
        necessary = count < self.config.threshold  # valid: the model does without the tool
        score = {"valid": not necessary, "necessary": necessary, "correct_count": count,
                 "samples": self.config.samples, "correct": correct}  # fmt: skip
        if self.config.stop_early:
            score["drawn"] = len(correct)
        if trace.get("error_type"):
            score.update(error_type=trace["error_type"], error=trace.get("error"))
        return score


def counts_from_records(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """``{item id: correct count}`` from a necessity run's records."""
    return {str(r["id"]): int(r["correct_count"]) for r in records}


def necessity_labels(counts: Mapping[str, int], samples: int, r: int | None = None) -> dict[str, bool]:
    """``{id: necessary}``: necessary when right fewer than ``r`` (default ``samples``) times."""
    r = samples if r is None else r
    if not 1 <= r <= samples:
        raise ValueError(f"r must be in 1..{samples}, got {r}")
    bad = [i for i, k in counts.items() if not 0 <= k <= samples]
    if bad:
        raise ValueError(f"correct counts outside 0..{samples} for {bad[:5]}")
    return {i: k < r for i, k in counts.items()}


def labels_for(items: Sequence[VerifiableItem], counts: Mapping[str, int], samples: int,
               r: int | None = None) -> dict[str, bool]:  # fmt: skip
    """Each item's label: the data's own (``item.necessary``) where it gives one, else measured
    from its correct count (an item with neither is an error naming it)."""
    measured = necessity_labels({i.id: counts[i.id] for i in items if i.necessary is None and i.id in counts},
                                samples, r)  # fmt: skip
    missing = [i.id for i in items if i.necessary is None and i.id not in counts]
    if missing:
        raise ValueError(f"{len(missing)} items have neither a known necessity nor a correct count, e.g. {missing[:3]}")
    return {i.id: i.necessary if i.necessary is not None else measured[i.id] for i in items}


def label_summary(counts: Mapping[str, int], config: NecessityConfig) -> dict[str, dict[str, int]]:
    """Necessary / unnecessary counts at each reported threshold (``{"r=10": {...}, "r=9": {...}}``)."""
    out = {}
    for r in config.reported:
        labels = necessity_labels(counts, config.samples, r)
        necessary = sum(labels.values())
        out[f"r={r}"] = {"necessary": necessary, "unnecessary": len(labels) - necessary}
    return out


def weights_sha256(model: Any) -> str:
    """The sha256 of the model's weights: the client's file hash, else a kate registry model's pin."""
    sha = model_identity(model).get("sha256")
    spec = MODELS.get(getattr(model, "name", ""))
    sha = sha or (spec.sha256 if spec is not None else None)
    if not sha:
        raise ValueError(f"cannot tell the weights hash of model {getattr(model, 'name', model)!r}; pass it explicitly")
    return sha


class NecessityCache:
    """Correct counts per (model weights, task set, sampling config): one JSON file per key in ``folder``."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    @staticmethod
    def key(model_sha256: str, items_sha256: str, sampling: Mapping[str, Any]) -> str:
        config = hashlib.sha256(json.dumps(dict(sampling), sort_keys=True).encode()).hexdigest()
        return f"{model_sha256[:16]}-{items_sha256[:16]}-{config[:12]}"

    def path(self, model_sha256: str, items_sha256: str, sampling: Mapping[str, Any]) -> Path:
        return self.folder / f"necessity-{self.key(model_sha256, items_sha256, sampling)}.json"

    def load(self, model_sha256: str, items_sha256: str, sampling: Mapping[str, Any]) -> dict[str, int] | None:
        """The cached counts, or None; a file that does not match its key is an error naming it."""
        path = self.path(model_sha256, items_sha256, sampling)
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ValueError(f"{path}: not a necessity cache file ({exc})") from None
        expected = {"model_sha256": model_sha256, "items_sha256": items_sha256, "sampling": dict(sampling)}
        if {k: data.get(k) for k in expected} != expected or not isinstance(data.get("counts"), dict):
            raise ValueError(f"{path}: its model, task set or sampling config does not match its name")
        return {str(k): int(v) for k, v in data["counts"].items()}

    def save(self, model_sha256: str, items_sha256: str, sampling: Mapping[str, Any],
             counts: Mapping[str, int]) -> Path:  # fmt: skip
        path = self.path(model_sha256, items_sha256, sampling)
        atomic_write_json(path, {"model_sha256": model_sha256, "items_sha256": items_sha256,
                                 "sampling": dict(sampling), "counts": dict(counts),
                                 "written": datetime.now(timezone.utc).isoformat(timespec="seconds")})  # fmt: skip
        return path


def config_dict(config: NecessityConfig) -> dict[str, Any]:
    return {**asdict(config), "report_r": list(config.report_r)}
