"""The four-way breakdown of the knowing-doing paper: necessity (from necessity labels or the data)
against action (a *parsed* call on the greedy run with tools offered).

    N-C    necessary, called        (aligned)
    N-NC   necessary, not called    (underuse)
    UN-C   unnecessary, called      (overuse)
    UN-NC  unnecessary, not called  (aligned)

Mismatch = (N-NC + UN-C) / n, split into underuse (N-NC / n) and overuse (UN-C / n); the rates
within each necessity class (underuse among the necessary, overuse among the unnecessary) come
with them. The paper reports arithmetic mismatch of 26.5-54.0% over its four 3-8B models.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

CLASSES = ("N-C", "N-NC", "UN-C", "UN-NC")
PAPER_ARITHMETIC_MISMATCH = (0.265, 0.540)  # the range over Qwen3-4B/8B, Llama-3.1-8B, Llama-3.2-3B


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


@dataclass(frozen=True)
class FourWay:
    """Counts of the four classes."""

    n_c: int = 0
    n_nc: int = 0
    un_c: int = 0
    un_nc: int = 0

    @property
    def n(self) -> int:
        return self.n_c + self.n_nc + self.un_c + self.un_nc

    @property
    def necessary(self) -> int:
        return self.n_c + self.n_nc

    @property
    def called(self) -> int:
        return self.n_c + self.un_c

    @property
    def mismatch(self) -> float | None:
        return _rate(self.n_nc + self.un_c, self.n)

    @property
    def underuse(self) -> float | None:
        """N-NC share of all items."""
        return _rate(self.n_nc, self.n)

    @property
    def overuse(self) -> float | None:
        """UN-C share of all items."""
        return _rate(self.un_c, self.n)

    @property
    def underuse_among_necessary(self) -> float | None:
        return _rate(self.n_nc, self.necessary)

    @property
    def overuse_among_unnecessary(self) -> float | None:
        return _rate(self.un_c, self.n - self.necessary)

    def counts(self) -> dict[str, int]:
        return dict(zip(CLASSES, (self.n_c, self.n_nc, self.un_c, self.un_nc)))

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, **self.counts(), "mismatch": self.mismatch, "underuse": self.underuse,
                "overuse": self.overuse, "underuse_among_necessary": self.underuse_among_necessary,
                "overuse_among_unnecessary": self.overuse_among_unnecessary,
                "call_rate": _rate(self.called, self.n)}  # fmt: skip


def classify(necessary: bool, called: bool) -> str:
    """The class name of one item."""
    return CLASSES[(0 if necessary else 2) + (0 if called else 1)]


def _aligned_ids(necessary: Mapping[str, bool], called: Mapping[str, bool]) -> list[str]:
    missing_call = [i for i in necessary if i not in called]
    missing_need = [i for i in called if i not in necessary]
    if missing_call or missing_need:
        raise ValueError(f"necessity and action labels cover different items: {len(missing_call)} without an "
                         f"action (e.g. {missing_call[:3]}), {len(missing_need)} without necessity "
                         f"(e.g. {missing_need[:3]})")  # fmt: skip
    return list(necessary)


def four_way(necessary: Mapping[str, bool], called: Mapping[str, bool]) -> FourWay:
    """The four-way counts over items labelled in both (the same ids in both, else ValueError)."""
    counts = dict.fromkeys(CLASSES, 0)
    for item_id in _aligned_ids(necessary, called):
        counts[classify(bool(necessary[item_id]), bool(called[item_id]))] += 1
    return FourWay(*(counts[c] for c in CLASSES))


def four_way_by(necessary: Mapping[str, bool], called: Mapping[str, bool],
                group_of: Mapping[str, str]) -> dict[str, FourWay]:  # fmt: skip
    """One four-way table per group (e.g. per arithmetic family), groups in sorted order."""
    ids = _aligned_ids(necessary, called)
    groups = sorted({group_of[i] for i in ids})
    return {g: four_way({i: necessary[i] for i in ids if group_of[i] == g},
                        {i: called[i] for i in ids if group_of[i] == g}) for g in groups}  # fmt: skip


def called_from_records(records: Iterable[Mapping[str, Any]]) -> dict[str, bool]:
    """``{item id: called}`` from an action run's records (the first step's parsed calls)."""
    return {str(r["id"]): bool(r["called"]) for r in records}


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def markdown_table(rows: Mapping[str, FourWay]) -> str:
    """A markdown table: one row per named breakdown (counts, mismatch, underuse, overuse)."""
    lines = ["| set | n | N-C | N-NC | UN-C | UN-NC | mismatch | underuse (N-NC) | overuse (UN-C) |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, t in rows.items():
        lines.append(f"| {name} | {t.n} | {t.n_c} | {t.n_nc} | {t.un_c} | {t.un_nc} | {_percent(t.mismatch)} | "
                     f"{_percent(t.underuse)} | {_percent(t.overuse)} |")  # fmt: skip
    return "\n".join(lines) + "\n"
