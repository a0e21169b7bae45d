"""The requests the llama.cpp batch scheduler (``kate.llm.llamacpp_batch``) runs: what it needs from
a llama.cpp context (``DecodeEngine``, fed ``Entry`` batches), how one request samples
(``SamplingParams``), a request and its sequences (one per sample), and the counters of what ran
together (``SchedulerStats``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

Entry = tuple[int, int, tuple[int, ...], bool]  # (token, position, sequence ids, wants logits)


class DecodeEngine(Protocol):
    """What the scheduler needs from a llama.cpp context (``LlamaCppChatModel`` provides it)."""

    n_ctx: int  # one request's window
    kv_cells: int  # the cells every request in flight and every idle prefix cache share (>= n_ctx)
    n_batch: int
    max_parallel: int

    def decode_batch(self, entries: list[Entry], *, step: bool = False) -> None: ...
    def logits_at(self, index: int) -> np.ndarray: ...
    def seq_rm(self, seq: int, p0: int, p1: int) -> None: ...
    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None: ...
    def is_eog(self, token: int) -> bool: ...
    def detokenize(self, tokens: list[int]) -> str: ...



@dataclass(frozen=True)
class SamplingParams:
    """How one request samples: the same for every one of its sequences."""

    temperature: float = 0.0  # 0 is greedy
    top_p: float = 1.0  # nucleus mass kept when sampling
    max_tokens: int = 256  # generated tokens per sequence at most
    stop: tuple[str, ...] = ()  # strings that end a sequence (cut from its text)
    ignore_eos: bool = False  # keep going past end-of-generation tokens
    top_logprobs: int = 0  # most likely alternatives recorded per generated token
    stop_when: Callable[[str], bool] | None = None  # ends a sequence once its text so far passes (a whole first call)


@dataclass
class Sequence:
    """One sample of a request: its tokens, their logprobs, and why it ended."""

    seq_id: int
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    tops: list[tuple[tuple[int, float], ...]] = field(default_factory=list)
    finish: str | None = None
    text: str | None = None  # set when a stop string cut the text


@dataclass(eq=False)
class Request:
    """One ``chat`` call: ``n`` samples of ``prompt``, at most ``round_size`` decoding at once."""

    prompt: list[int]
    n: int
    round_size: int
    params: SamplingParams
    rng: np.random.Generator
    sequences: list[Sequence] = field(default_factory=list)  # finished samples, in order
    running: list[Sequence] = field(default_factory=list)  # the current round's, leader first
    logits: dict[int, np.ndarray] = field(default_factory=dict)  # next-token logits per seq id
    reserved: int = 0  # KV cells this round may use
    cached: int | None = None  # prompt tokens its first round took from the prefix cache
    error: BaseException | None = None
    done: bool = False


@dataclass
class SchedulerStats:
    """Counters for tests and benchmarks: evidence of what ran together."""

    steps: int = 0  # decode steps
    prefills: int = 0  # rounds admitted
    prefill_tokens: int = 0  # prompt tokens decoded (the rest came from the prefix cache)
    max_requests_per_step: int = 0  # most distinct requests in one decode batch
    max_seqs_per_step: int = 0  # most sequences in one decode batch
    prefill_seconds: float = 0.0  # wall time in prompt batches
    step_tokens: int = 0  # tokens decoded in decode steps (one per running sequence per step)
    step_seconds: float = 0.0  # wall time in decode steps (sampling included)
