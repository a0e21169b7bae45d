"""Fault schedules for ``kate.testing.fault_proxy.FaultProxy``: ``(request number, body) -> fault kind
or None`` (pass), and the fault kinds a schedule may name."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence

FAULT_KINDS = ("http_500", "http_503", "stall", "drop", "drop_mid_body", "truncate")
Schedule = Callable[[int, bytes], str | None]


def check_kind(kind: str | None) -> None:
    if kind is not None and kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault kind {kind!r}; known: {FAULT_KINDS}")


def no_faults(index: int, body: bytes) -> None:
    return None


def scripted(kinds: Sequence[str | None]) -> Schedule:
    """Request ``i`` gets ``kinds[i]`` (None: pass); requests beyond the script pass."""
    for kind in kinds:
        check_kind(kind)
    script = list(kinds)
    return lambda index, body: script[index] if index < len(script) else None


def seeded(rate: float, seed: int = 0, kinds: Sequence[str] = FAULT_KINDS) -> Schedule:
    """Each request independently faulted with probability ``rate``, its kind drawn uniformly from
    ``kinds``; a function of (seed, request number) only, so a rerun draws the same schedule."""
    for kind in kinds:
        check_kind(kind)
    if not 0 <= rate <= 1:
        raise ValueError(f"rate must be in [0, 1], got {rate!r}")

    def schedule(index: int, body: bytes) -> str | None:
        rng = random.Random(f"{seed}:{index}")
        return rng.choice(list(kinds)) if rng.random() < rate else None

    return schedule


def every(k: int, kinds: Sequence[str] = FAULT_KINDS) -> Schedule:
    """Every ``k``-th request faulted (requests k-1, 2k-1, ...), the kinds taken in turn: a fixed rate
    of 1/k with each kind once in every ``k * len(kinds)`` requests, whatever the seed or the timing."""
    for kind in kinds:
        check_kind(kind)
    if k < 2:
        raise ValueError(f"k must be at least 2 (a faulted request's retry is the next one), got {k!r}")
    order = list(kinds)
    return lambda index, body: order[(index // k) % len(order)] if index % k == k - 1 else None


def persistent(kind: str, contains: str) -> Schedule:
    """``kind`` on every request whose body contains ``contains`` (as JSON writes it), so one item's
    requests fail through every retry while the others pass."""
    check_kind(kind)
    needle = json.dumps(contains)[1:-1].encode()
    return lambda index, body: kind if needle in body else None
