"""Prefilling a prompt for the llama.cpp batch scheduler: how much of it a sequence's cached cells
already hold (``common_prefix``), and the batches its new tokens decode in (``prompt_batches``)."""

from __future__ import annotations


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the common prefix of two token lists."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def prompt_batches(count: int, n_batch: int, min_prefill_tokens: int) -> list[tuple[int, int]]:
    """Batches of at most n_batch prompt tokens; none shorter than min_prefill_tokens if it can help."""
    bounds = [(start, min(start + n_batch, count)) for start in range(0, count, n_batch)]
    if len(bounds) > 1 and bounds[-1][1] - bounds[-1][0] < min_prefill_tokens:
        cut = count - min_prefill_tokens
        bounds[-2:] = [(bounds[-2][0], cut), (cut, count)]
    return bounds
