"""Continuous batching for the llama.cpp backend: concurrent ``chat`` calls decode together.

Each admitted request holds its own sequence ids out of ``max_parallel`` (one per sample of its
current round) and every active sequence of every admitted request advances one token per
``llama_decode`` batch. A new request's prompt is prefilled between decode steps, in batches of its
own tokens only (the running requests pause for it); it joins the next decode step. Requests are
admitted first come, first served, except that one continuing an idle cache (an agent loop's next
step) goes first; one whose sequences or KV cells do not fit waits, and so does everyone behind it,
until running requests free theirs. Each request samples with its own generator, so what runs
beside it never changes its draws; an error in one request (a failed decode of its prompt, a bad
sample) fails that request alone.

Prefix cache, per sequence like llama.cpp's server slots: an idle sequence keeps the cells of the
last prompt it led, and a new request leads with the free sequence whose cache shares the longest
prefix with its prompt, so an agent loop whose history only grows prefills only its new tokens.
When a running request's prompt shares a longer prefix (the same system prompt and tools), the new
request shares those cells instead. Idle caches are dropped, least recently used first, when their
cells are needed: the engine's ``kv_cells`` must hold every history in flight, or agent loops that
take turns evict each other's caches and each step prefills its whole prompt again (what a request
took from the cache is its ``cached`` count, reported as ``Usage.cached_tokens``). An idle cache is
also dropped once ``idle_steps`` decode steps have passed without a request reusing it (unless a
queued request extends it): every cell held slows every request's attention, which reads the whole
used range of the unified cache (on 2 cores, 19,968 idle cells made a 1,662-token prefill 82% and a
decode 39% slower, 6,656 cells 28% and 7%; bench/results/idle_cache.json), while an agent loop's next
step comes within a few. A single-step request's cache (a BFCL single-turn entry) is never reused and
so goes soon.

Numerics: decoding beside other requests is exact (a decode batch's tokens do not change each
other's logits), but llama.cpp's CPU results for a sequence depend on where its cells sit in the
unified cache and on how long its prompt batches were (the attention kernels take different paths
and summation orders), so a request that ran beside others (or after them, or on a warm prefix) is
not bit-identical to the same request alone on a fresh cache, and a greedy near-tie can flip (the
benchmarks report how often: bench/results/inflight.json). A request alone runs exactly the
batches the backend ran before it had a scheduler.

There is no engine thread: the first caller that finds nobody driving drives the loop until its own
request is done, then hands over to a caller still waiting.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from contextlib import contextmanager
from typing import Iterator

from kate.llm.llamacpp_prefill import common_prefix, prompt_batches
from kate.llm.llamacpp_requests import DecodeEngine, Entry, Request, SamplingParams, SchedulerStats, Sequence
from kate.llm.llamacpp_sampling import advance, pick_token

# the request types, the sampling and the prompt's batches live in llamacpp_requests, llamacpp_sampling and
# llamacpp_prefill; the public names are importable from here too
IDLE_STEPS = 64  # decode steps an idle prefix cache waits for the request that extends it

__all__ = ["BatchScheduler", "DecodeEngine", "Entry", "Request", "SamplingParams", "SchedulerStats", "Sequence",
           "pick_token"]


def _extends(prompt: list[int], cached: list[int]) -> bool:
    """Whether ``prompt`` continues the cached prompt (holds it whole as its prefix)."""
    return prompt[: len(cached)] == cached


class BatchScheduler:
    """Admits requests into free sequence ids and decodes all of them together, a token a step."""

    def __init__(self, engine: DecodeEngine, *, min_prefill_tokens: int = 1,
                 idle_steps: int | None = IDLE_STEPS) -> None:  # fmt: skip
        """``min_prefill_tokens``: prompt tokens decoded anew even when the prefix cache holds them,
        and the fewest in a prompt batch. 1 reuses every cached token. llama.cpp's CPU kernels
        compute a prompt batch of under 64 tokens differently from a longer one, so a warm prompt with
        fewer new tokens than that is not bit-identical to the same prompt cold, and greedy text can
        flip on a near-tie. 64 makes warm and cold agree (text and logprobs) at up to 64 extra prompt
        tokens a call; a prompt shorter than that is then not kept for reuse. ``idle_steps``: decode
        steps after which an idle cache nobody reused or queued for is dropped (None: kept until its
        cells are needed)."""
        if not 1 <= min_prefill_tokens <= engine.n_batch:
            raise ValueError(f"min_prefill_tokens must be in 1..n_batch ({engine.n_batch}), got {min_prefill_tokens!r}")
        self.engine = engine
        self.min_prefill_tokens = min_prefill_tokens
        self.idle_steps = idle_steps
        slots = engine.max_parallel
        self.stats = SchedulerStats()
        self._cond = threading.Condition()
        self._pending: deque[Request] = deque()  # guarded by _cond
        self._paused = False
        self._driving = False
        self._closed = False
        # Below: touched only by the driving thread.
        self._active: list[Request] = []
        self._owner: list[Request | None] = [None] * slots
        self._cached: list[list[int]] = [[] for _ in range(slots)]  # prompt whose cells a seq holds
        self._used_at = [0] * slots
        self._clock = 0
        self._steps = 0  # decode steps run
        self._idle_since = [0] * slots  # the step at which a sequence's cache went idle

    # ------------------------------------------------------------------------------ callers
    def run(self, request: Request) -> None:
        """Decode ``request``, with whatever else is running, until it is done; raise its error."""
        with self._cond:
            if self._closed:
                raise RuntimeError("the model is closed")
            self._pending.append(request)
            self._cond.notify_all()
            while not request.done and self._driving:
                self._cond.wait()
            drive = not request.done
            self._driving = self._driving or drive
        if drive:
            try:
                self._drive(request)
            finally:
                with self._cond:
                    self._driving = False
                    self._cond.notify_all()
        if request.error is not None:
            raise request.error

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Hold back admissions (running requests go on): queue several requests, then let them in at once."""
        with self._cond:
            self._paused = True
        try:
            yield
        finally:
            with self._cond:
                self._paused = False
                self._cond.notify_all()

    def wait_pending(self, count: int, timeout: float | None = None) -> bool:
        """Wait until ``count`` requests are queued (for tests, with ``paused``)."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self._pending) >= count, timeout)

    def close(self) -> None:
        """Fail what is queued and wait for the driver to stop; the engine may then be freed."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            while self._driving:
                self._cond.wait()
            while self._pending:
                self._complete(self._pending.popleft(), RuntimeError("the model was closed"))

    # ------------------------------------------------------------------------------ driving
    def _drive(self, mine: Request) -> None:
        while not mine.done:
            if self._closed:
                for request in list(self._active):
                    self._release(request, keep_cache=False)
                    self._complete(request, RuntimeError("the model was closed"))
                with self._cond:
                    while self._pending:
                        self._complete(self._pending.popleft(), RuntimeError("the model was closed"))
                return
            self._admit()
            if self._active:
                self._step()
            elif not mine.done:
                with self._cond:  # only a pause keeps an idle engine from admitting the queue's head
                    while self._paused and not self._closed:
                        self._cond.wait()

    def _admit(self) -> None:
        self._drop_stale()
        while True:
            with self._cond:
                if self._paused or not self._pending:
                    return
                i = self._next()
                plan = self._plan(self._pending[i])
                if plan is None:
                    return
                request = self._pending[i]
                del self._pending[i]
            self._start_round(request, *plan)

    def _next(self) -> int:
        """The queued request to admit next: the first that continues an idle cache (an agent loop's next
        step, a request's next round), else the oldest. A dialogue is a chain of steps, each waiting for
        the last; behind every new request in the queue its steps would wait on all of them."""
        idle = [c for s, c in enumerate(self._cached) if c and self._owner[s] is None]
        for i, request in enumerate(self._pending):
            if any(_extends(request.prompt, cached) for cached in idle):
                return i
        return 0

    def _drop_stale(self) -> None:
        """Drop the idle caches unused for more than ``idle_steps`` decode steps that no queued request extends."""
        if self.idle_steps is None:
            return
        stale = [s for s, cached in enumerate(self._cached)
                 if cached and self._owner[s] is None and self._steps - self._idle_since[s] > self.idle_steps]
        if not stale:
            return
        with self._cond:
            queued = [r.prompt for r in self._pending]
        for s in stale:
            cached = self._cached[s]
            if not any(_extends(prompt, cached) for prompt in queued):
                self.engine.seq_rm(s, -1, -1)
                self._cached[s] = []

    def _plan(self, request: Request) -> tuple[int, int, list[int], list[int], int] | None:
        """(leader, the seq whose cached prefix it starts from, other members, idle caches to drop,
        cells to reserve), or None to wait."""
        width = min(request.round_size, request.n - len(request.sequences))
        free = [s for s in range(self.engine.max_parallel) if self._owner[s] is None]
        if len(free) < width:
            return None
        lead, source = self._lead_and_source(request.prompt, free, width)
        others = [s for s in free if s not in (lead, source)]
        members = sorted(others, key=lambda s: (bool(self._cached[s]), s))[: width - 1]
        need = len(request.prompt) + width * request.params.max_tokens
        used = sum(r.reserved for r in self._active)
        idle = [s for s in free if s != lead and s not in members and self._cached[s]]
        idle.sort(key=lambda s: self._used_at[s])  # least recently used first
        held = sum(len(self._cached[s]) for s in idle)  # an idle source's cells stay: counted, never dropped
        evict = []
        for s in (s for s in idle if s != source):
            if used + held + need <= self.engine.kv_cells:
                break
            evict.append(s)
            held -= len(self._cached[s])
        if used + held + need > self.engine.kv_cells:
            return None
        return lead, source, members, evict, need

    def _lead_and_source(self, prompt: list[int], free: list[int], width: int) -> tuple[int, int]:
        """The sequence the request leads with, and the one whose cached prefix it starts from. Its own
        history (a cache that is all a prefix of the prompt) continues in place; a longer prefix held
        elsewhere (another loop's cache with the same system prompt and tools, idle or running) is
        shared, not cut, and the request leads with an empty sequence, else the least recently used
        cache; with no prefix anywhere, that one alone."""
        common = [common_prefix(cached, prompt) for cached in self._cached]
        best = max(range(self.engine.max_parallel), key=lambda s: (common[s], -s))
        if best in free and common[best] == len(self._cached[best]) and common[best]:
            return best, best
        lead = min(free, key=lambda s: (bool(self._cached[s]), self._used_at[s], s))
        source = best if common[best] > common[lead] else lead
        if source != lead and source in free and len(free) - 2 < width - 1:
            return source, source  # no room to keep it apart from the round's sequences: cut it in place
        return lead, source

    def _start_round(
        self, request: Request, lead: int, source: int, members: list[int], evict: list[int], need: int
    ) -> None:
        """Make the prompt the KV prefix of the round's sequences, decoding only what is not cached."""
        engine, prompt = self.engine, request.prompt
        for s in sorted(evict + members + ([lead] if source != lead else [])):
            engine.seq_rm(s, -1, -1)
            self._cached[s] = []
        # Decode at least one token (for its logits), or min_prefill_tokens of them (see __init__).
        common = max(0, min(common_prefix(self._cached[source], prompt), len(prompt) - self.min_prefill_tokens))
        if source != lead:
            engine.seq_cp(source, lead, 0, common)  # the cells are shared, not copied
        engine.seq_rm(lead, common, -1)
        self._cached[lead] = []
        for s in members:
            engine.seq_cp(lead, s, 0, common)
        seqs = (lead, *members)
        bounds = prompt_batches(len(prompt) - common, engine.n_batch, self.min_prefill_tokens)
        started = time.perf_counter()
        try:
            for start, end in bounds:
                entries = [(prompt[p], p, seqs, p == len(prompt) - 1) for p in range(common + start, common + end)]
                engine.decode_batch(entries)
            logits = engine.logits_at(bounds[-1][1] - bounds[-1][0] - 1)
        except Exception as error:  # this request fails; the others never saw its cells
            for s in seqs:
                engine.seq_rm(s, -1, -1)
            self._complete(request, error)
            return
        # A prompt shorter than min_prefill_tokens was decoded in a short batch: not reused when asked for long ones.
        self._cached[lead] = list(prompt) if len(prompt) - common >= self.min_prefill_tokens else []
        self._clock += 1
        for s in seqs:
            self._owner[s], self._used_at[s] = request, self._clock
        request.running = [Sequence(seq_id=s) for s in seqs]
        request.logits = dict.fromkeys(seqs, logits)
        request.reserved = need
        self._active.append(request)
        self.stats.prefills += 1
        self.stats.prefill_tokens += len(prompt) - common
        request.cached = common if request.cached is None else request.cached
        self.stats.prefill_seconds += time.perf_counter() - started

    def _step(self) -> None:
        """Sample one token for every running sequence, then decode them all in one batch."""
        entries: list[Entry] = []
        owners: list[tuple[Request, Sequence]] = []
        started = time.perf_counter()
        for request in list(self._active):
            try:
                mine = advance(request, self.engine)
            except Exception as error:  # a bad sample fails its request alone
                self._release(request, keep_cache=False)
                self._complete(request, error)
                continue
            entries += [e for e, _ in mine]
            owners += [(request, s) for _, s in mine]
        if entries:
            try:
                self.engine.decode_batch(entries, step=True)
            except Exception as error:  # the batch is lost: every request in it fails
                for request in dict.fromkeys(r for r, _ in owners):
                    self._release(request, keep_cache=False)
                    self._complete(request, error)
                return
            for i, (request, s) in enumerate(owners):
                request.logits[s.seq_id] = self.engine.logits_at(i)
            self.stats.steps += 1
            self._steps += 1
            self.stats.step_tokens += len(entries)
            self.stats.step_seconds += time.perf_counter() - started
            self.stats.max_seqs_per_step = max(self.stats.max_seqs_per_step, len(entries))
            self.stats.max_requests_per_step = max(self.stats.max_requests_per_step, len({id(r) for r, _ in owners}))
        for request in list(self._active):
            if all(s.finish is not None for s in request.running):
                self._end_round(request)

    def _end_round(self, request: Request) -> None:
        self._release(request, keep_cache=True)
        request.sequences += request.running
        request.running = []
        if len(request.sequences) < request.n:
            with self._cond:
                self._pending.appendleft(request)  # its next round goes first
        else:
            self._complete(request, None)

    def _release(self, request: Request, *, keep_cache: bool) -> None:
        """Free the request's sequences; the leader keeps its prompt's cells when ``keep_cache``."""
        for k, s in enumerate(request.running):
            if k == 0 and keep_cache and self._cached[s.seq_id]:
                self.engine.seq_rm(s.seq_id, len(request.prompt), -1)
                self._idle_since[s.seq_id] = self._steps
            else:
                self.engine.seq_rm(s.seq_id, -1, -1)
                self._cached[s.seq_id] = []
            self._owner[s.seq_id] = None
        if request in self._active:
            self._active.remove(request)
        request.logits = {}

    def _complete(self, request: Request, error: BaseException | None) -> None:
        with self._cond:
            request.error, request.done = error, True
            self._cond.notify_all()

