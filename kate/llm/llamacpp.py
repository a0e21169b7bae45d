"""llama-cpp-python in process: the fast local engine.

The high-level ``Llama`` API ignores ``n``, so this backend drives llama.cpp's batch API itself:
the prompt is decoded once into a unified KV cache with its cells shared by all ``n`` sequences
(one prefill), then the ``n`` continuations decode together, one token per sequence per batch.
The prompt's cells also stay cached between calls, so an agent loop whose history only grows
prefills only the new tokens of each step.
"""

from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kate.llm.base import Completion, Message, TokenLogprob, ToolSchema, Usage, check_sampling_args, completion_from_text
from kate.llm.chat_template import render_chat
from kate.llm.registry import MODELS, model_path


def resolve_gguf(model: str) -> Path:
    """A kate model name (verified against its pinned hash) or a path to a .gguf file."""
    if model in MODELS:
        return model_path(model)
    path = Path(model).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"{model!r} is neither a known kate model nor a GGUF file (see `kate models list`)")
    return path


@dataclass
class _Sequence:
    seq_id: int
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish: str | None = None
    text: str | None = None  # set when a stop string cut the text


class LlamaCppChatModel:
    """Chat with a GGUF model through llama.cpp; ``n`` samples share one prefill."""

    def __init__(
        self,
        model: str,
        *,
        name: str | None = None,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        n_batch: int = 512,
        max_parallel: int = 16,
        chat_template: str | None = None,
        formats: tuple[str, ...] = ("hermes", "json"),
        verbose: bool = False,
    ) -> None:
        import llama_cpp
        from llama_cpp import _internals as internals
        from llama_cpp import _logger

        _logger.set_verbose(verbose)  # llama.cpp's load logs only when asked for

        self._llama_cpp = llama_cpp
        self.path = resolve_gguf(model)
        self.name = name or (model if model in MODELS else self.path.stem)
        self.formats = tuple(formats)
        self.max_parallel = max_parallel
        llama_cpp.llama_backend_init()
        model_params = llama_cpp.llama_model_default_params()
        self._model = internals.LlamaModel(path_model=str(self.path), params=model_params, verbose=verbose)
        cores = os.cpu_count() or 1
        # llama-cpp-python's own defaults: half the cores for one-token decoding (its threads
        # spin-wait on each other; a busy neighbour on a small machine can make two threads 30x
        # slower than one), every core for batches (prefill, width-N decoding).
        threads = n_threads or max(1, cores // 2)
        threads_batch = n_threads_batch or cores
        ctx_params = llama_cpp.llama_context_default_params()
        ctx_params.n_ctx = n_ctx
        ctx_params.n_batch = max(n_batch, max_parallel)
        ctx_params.n_ubatch = max(n_batch, max_parallel)
        ctx_params.n_seq_max = max_parallel
        ctx_params.kv_unified = True  # prompt cells shared by every sequence
        ctx_params.n_threads = threads
        ctx_params.n_threads_batch = threads_batch
        self._ctx = internals.LlamaContext(model=self._model, params=ctx_params, verbose=verbose)
        self._batch = internals.LlamaBatch(n_tokens=ctx_params.n_batch, embd=0, n_seq_max=max_parallel, verbose=verbose)
        self.n_ctx = self._ctx.n_ctx()
        self.n_batch = ctx_params.n_batch
        self.n_vocab = self._model.n_vocab()
        metadata = self._model.metadata()
        self.chat_template = chat_template or metadata.get("tokenizer.chat_template")
        if not self.chat_template:
            raise ValueError(f"{self.path}: the GGUF carries no chat template; pass chat_template=")
        self.bos_token = self._model.token_get_text(self._model.token_bos()) if self._model.token_bos() >= 0 else ""
        self.eos_token = self._model.token_get_text(self._model.token_eos()) if self._model.token_eos() >= 0 else ""
        self._cached: list[int] = []  # prompt tokens whose cells (seq 0) are in the KV cache
        self._lock = threading.Lock()  # one llama context: one request at a time
        self._threads = (threads, threads_batch)

    def runtime(self) -> dict[str, object]:
        """What decides a greedy run's numerics on this machine: llama.cpp's version and build, the
        CPU features its kernels use, thread counts and batch shape (a near-tie can flip across builds)."""
        info = self._llama_cpp.llama_print_system_info()
        return {
            "engine": "llama-cpp-python", "version": self._llama_cpp.__version__,
            "system_info": info.decode("utf-8", "replace").strip() if isinstance(info, bytes) else str(info),
            "n_threads": self._threads[0], "n_threads_batch": self._threads[1], "cpu_count": os.cpu_count(),
            "n_ctx": self.n_ctx, "n_batch": self.n_batch, "max_parallel": self.max_parallel,
        }  # fmt: skip

    # ----------------------------------------------------------------------------- prompt
    def render(self, messages: list[Message], tools: list[ToolSchema] | None = None) -> str:
        return render_chat(self.chat_template, messages, tools, bos_token=self.bos_token, eos_token=self.eos_token)

    def tokenize(self, text: str) -> list[int]:
        return list(self._model.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def detokenize(self, tokens: list[int]) -> str:
        return self._model.detokenize(tokens, special=False).decode("utf-8", errors="replace")

    # ----------------------------------------------------------------------------- batch
    def _fill(self, entries: list[tuple[int, int, tuple[int, ...], bool]]) -> None:
        """Put (token, pos, seq_ids, wants_logits) entries in the batch and decode it."""
        batch = self._batch.batch
        batch.n_tokens = len(entries)
        for i, (token, pos, seq_ids, logits) in enumerate(entries):
            batch.token[i] = token
            batch.pos[i] = pos
            batch.n_seq_id[i] = len(seq_ids)
            for k, seq in enumerate(seq_ids):
                batch.seq_id[i][k] = seq
            batch.logits[i] = logits
        self._ctx.decode(self._batch)

    def _logits(self, index: int) -> np.ndarray:
        pointer = self._ctx.get_logits_ith(index)
        return np.ctypeslib.as_array(ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float)), shape=(self.n_vocab,)).copy()

    def _prefill(self, prompt: list[int], width: int) -> np.ndarray:
        """Make ``prompt`` the KV prefix of sequences 0..width-1, decoding only what is not cached.
        Returns the logits after the last prompt token."""
        llama_cpp, memory = self._llama_cpp, self._ctx.memory
        common = 0
        for a, b in zip(self._cached, prompt):
            if a != b:
                break
            common += 1
        common = min(common, len(prompt) - 1)  # always decode at least one token, for its logits
        for seq in range(1, self.max_parallel):
            llama_cpp.llama_memory_seq_rm(memory, seq, -1, -1)
        llama_cpp.llama_memory_seq_rm(memory, 0, common, -1)
        for seq in range(1, width):
            llama_cpp.llama_memory_seq_cp(memory, 0, seq, 0, common)
        seqs = tuple(range(width))
        rest = prompt[common:]
        for start in range(0, len(rest), self.n_batch):
            chunk = rest[start : start + self.n_batch]
            last = start + len(chunk) == len(rest)
            entries = [(t, common + start + i, seqs, last and i == len(chunk) - 1) for i, t in enumerate(chunk)]
            self._fill(entries)
        self._cached = list(prompt)
        return self._logits(len(rest[(len(rest) - 1) // self.n_batch * self.n_batch :]) - 1)

    # ----------------------------------------------------------------------------- sampling
    @staticmethod
    def _pick(logits: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator) -> tuple[int, float]:
        """A token and its log-probability under the model's own distribution (temperature 1)."""
        shifted = logits - logits.max()
        log_norm = np.log(np.exp(shifted, dtype=np.float64).sum())
        if temperature <= 0:
            token = int(np.argmax(logits))
        else:
            scaled = np.exp((shifted / temperature).astype(np.float64))
            probs = scaled / scaled.sum()
            if top_p < 1.0:
                order = np.argsort(-probs)
                keep = order[: int(np.searchsorted(np.cumsum(probs[order]), top_p)) + 1]
                mask = np.zeros_like(probs)
                mask[keep] = probs[keep]
                probs = mask / mask.sum()
            token = int(rng.choice(len(probs), p=probs))
        return token, float(shifted[token] - log_norm)

    def chat(
        self,
        messages: list[Message],
        tools: list[ToolSchema] | None = None,
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int = 256,
        seed: int | None = None,
        stop: list[str] | None = None,
        logprobs: bool = False,
        top_p: float = 1.0,
        ignore_eos: bool = False,
    ) -> list[Completion]:
        check_sampling_args(n, temperature, max_tokens)
        prompt = self.tokenize(self.render(messages, tools))
        if len(prompt) + max_tokens > self.n_ctx:
            raise ValueError(
                f"{self.name}: prompt of {len(prompt)} tokens + max_tokens {max_tokens} exceeds n_ctx {self.n_ctx}"
            )
        rng = np.random.default_rng(seed)
        room = (self.n_ctx - len(prompt)) // max_tokens  # sequences whose continuations fit beside the prompt
        round_size = max(1, min(n, self.max_parallel, room))
        sequences: list[_Sequence] = []
        with self._lock:
            while len(sequences) < n:
                width = min(round_size, n - len(sequences))
                sequences += self._generate(prompt, width, temperature, top_p, max_tokens, stop or [], rng, ignore_eos)
        return [self._completion(s, len(prompt), logprobs) for s in sequences]

    def _generate(self, prompt, width, temperature, top_p, max_tokens, stop, rng, ignore_eos) -> list[_Sequence]:
        first_logits = self._prefill(prompt, width)
        sequences = [_Sequence(seq_id=s) for s in range(width)]
        logits_of = {s.seq_id: first_logits for s in sequences}
        vocab = self._model.vocab
        for step in range(max_tokens):
            active = [s for s in sequences if s.finish is None]
            entries = []
            for s in active:
                token, logprob = self._pick(logits_of[s.seq_id], temperature, top_p, rng)
                if not ignore_eos and self._llama_cpp.llama_vocab_is_eog(vocab, token):
                    s.finish = "stop"
                    continue
                s.tokens.append(token)
                s.logprobs.append(logprob)
                if stop and self._hit_stop(s, stop):
                    continue
                if len(s.tokens) >= max_tokens:
                    s.finish = "length"
                    continue
                entries.append((token, len(prompt) + step, (s.seq_id,), True))
            if not entries:
                break
            self._fill(entries)
            for i, (_, _, (seq_id,), _) in enumerate(entries):
                logits_of[seq_id] = self._logits(i)
        for s in sequences:
            s.finish = s.finish or "length"
        return sequences

    def _hit_stop(self, s: _Sequence, stop: list[str]) -> bool:
        text = self.detokenize(s.tokens)
        cuts = [text.find(x) for x in stop if x in text]
        if not cuts:
            return False
        s.text, s.finish = text[: min(cuts)], "stop"
        return True

    def _completion(self, s: _Sequence, prompt_tokens: int, logprobs: bool) -> Completion:
        text = s.text if s.text is not None else self.detokenize(s.tokens)
        token_logprobs = tuple(
            TokenLogprob(self.detokenize([t]), lp, t) for t, lp in zip(s.tokens, s.logprobs)
        )
        return completion_from_text(
            text,
            formats=self.formats,
            finish_reason=s.finish,
            logprobs=token_logprobs if logprobs else None,
            usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=len(s.tokens)),
        )

    def close(self) -> None:
        self._batch.close()
        self._ctx.close()
        self._model.close()
