"""llama-cpp-python in process: the fast local engine.

The high-level ``Llama`` API ignores ``n``, so this backend drives llama.cpp's batch API itself:
the prompt is decoded once into a unified KV cache with its cells shared by all ``n`` sequences
(one prefill), then the ``n`` continuations decode together, one token per sequence per batch.
The prompt's cells also stay cached between calls, so an agent loop whose history only grows
prefills only the new tokens of each step. Concurrent ``chat`` calls from several threads share the
context: their sequences decode together, a token each per batch (kate.llm.llamacpp_batch); a
request alone runs exactly the batches it ran before there was a scheduler.

``lora`` applies a LoRA adapter to the context at run time, over the quantized base: a llama.cpp
adapter .gguf, or a PEFT adapter folder converted once into ``<folder>/adapter.gguf`` (kate.llm.lora).
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from kate.llm.base import (
    Completion, EngineError, Message, TokenLogprob, ToolSchema, Usage, check_sampling_args, completion_from_text,
)  # fmt: skip
from kate.llm.chat_template import render_chat
from kate.llm.llamacpp_batch import BatchScheduler
from kate.llm.llamacpp_log import quiet_cache_warning
from kate.llm.llamacpp_requests import Entry, Request, SamplingParams, Sequence
from kate.llm.registry import MODELS, model_path, sha256_of
from kate.llm.tool_prompt import FORMATS, ask_both, check_tool_prompt, default_formats
from kate.toolcall import first_call_complete


def _first_call_after(prefill: str, text: str) -> bool:
    return first_call_complete(prefill + text)


def resolve_gguf(model: str) -> Path:
    """A kate model name (verified against its pinned hash) or a path to a .gguf file."""
    if model in MODELS:
        return model_path(model)
    path = Path(model).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"{model!r} is neither a known kate model nor a GGUF file (see `kate models list`)")
    return path


class LlamaCppChatModel:
    """Chat with a GGUF model through llama.cpp; ``n`` samples share one prefill, and concurrent
    calls decode together (kate.llm.llamacpp_batch). ``lora``: an adapter applied at ``lora_scale``;
    its path and sha256 are in ``runtime()`` and its short hash in the default ``name``. ``tool_prompt``:
    the tools in the chat template's own form (native), BFCL's prompt-mode Python form (python), or
    both at once (kate.llm.tool_prompt; ``several_calls``: a gate on the request that must also expect several
    calls for the Python reply to be kept); ``formats``: the call formats parsed (None: the form's)."""

    options = ("top_p", "top_logprobs", "prefill", "stop_after_call")  # extra chat() keywords (base.supports)

    def __init__(
        self,
        model: str,
        *,
        name: str | None = None,
        n_ctx: int = 8192,
        kv_cells: int | None = None,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        n_threads_step: int | None = None,
        n_batch: int = 512,
        max_parallel: int = 16,
        min_prefill_tokens: int = 1,
        chat_template: str | None = None,
        formats: tuple[str, ...] | None = None,
        tool_prompt: str = "native",
        verbose: bool = False,
        lora: str | None = None,
        lora_scale: float = 1.0,
        several_calls: Callable[[list[Message]], bool] | None = None,
    ) -> None:
        import llama_cpp
        from llama_cpp import _internals as internals
        from llama_cpp import _logger

        _logger.set_verbose(verbose)  # llama.cpp's load logs only when asked for
        quiet_cache_warning()

        self._llama_cpp = llama_cpp
        self.path = resolve_gguf(model)
        self.lora_path: Path | None = None
        self.lora_sha256: str | None = None
        self.lora_scale = float(lora_scale)
        if lora:
            from kate.llm.lora import llama_adapter

            self.lora_path = llama_adapter(lora, base=self.path).resolve()
            self.lora_sha256 = sha256_of(self.lora_path)
        self.name = name or (model if model in MODELS else self.path.stem)
        if self.lora_sha256 and name is None:
            scale = f"@{self.lora_scale:g}" if self.lora_scale != 1 else ""
            self.name = f"{self.name}+lora-{self.lora_sha256[:12]}{scale}"  # model_identity tells them apart
        self.tool_prompt = check_tool_prompt(tool_prompt)
        self.formats = tuple(formats) if formats is not None else default_formats(tool_prompt)
        self.formats_default = formats is None  # each form's replies parsed as that form's (``both``)
        self.several_calls = several_calls  # ``both``: the request's gate on the Python reply (None: none)
        self.max_parallel = max_parallel
        if kv_cells is not None and kv_cells < n_ctx:
            raise ValueError(f"kv_cells ({kv_cells}) must be at least n_ctx ({n_ctx}): one request may fill its window")
        llama_cpp.llama_backend_init()
        model_params = llama_cpp.llama_model_default_params()
        self._model = internals.LlamaModel(path_model=str(self.path), params=model_params, verbose=verbose)
        cores = os.cpu_count() or 1
        # llama-cpp-python's own defaults: half the cores for one-token decoding (its threads
        # spin-wait on each other; a busy neighbour on a small machine can make two threads 30x
        # slower than one), every core for prompt batches. A decode step of several sequences
        # (width N, concurrent requests) costs little more than a one-token one, so it runs on the
        # one-token count too: on 2 cores busy with other work a 4-token step of the 0.5B model took
        # 0.2 s on one thread and 1-5 s on two (on quieter cores two were faster: 4 clients 2.9x one
        # client's requests/s vs 1.9x, bench/results/llamacpp_batching.json). Thread counts do not
        # change the numerics (checked: greedy and width-4 logprobs, both registry models).
        threads = n_threads or max(1, cores // 2)
        threads_batch = n_threads_batch or cores
        threads_step = n_threads_step or threads
        ctx_params = llama_cpp.llama_context_default_params()
        # n_ctx is one request's window (prompt + max_tokens); kv_cells the unified cache every
        # request in flight and every idle prefix cache share (see BatchScheduler)
        ctx_params.n_ctx = kv_cells or n_ctx
        ctx_params.n_batch = max(n_batch, max_parallel)
        ctx_params.n_ubatch = max(n_batch, max_parallel)
        ctx_params.n_seq_max = max_parallel
        ctx_params.kv_unified = True  # prompt cells shared by every sequence
        ctx_params.n_threads = threads
        ctx_params.n_threads_batch = threads_batch
        self._ctx = internals.LlamaContext(model=self._model, params=ctx_params, verbose=verbose)
        if self.lora_path is not None:
            self._apply_lora()
        self._batch = internals.LlamaBatch(n_tokens=ctx_params.n_batch, embd=0, n_seq_max=max_parallel, verbose=verbose)
        self.kv_cells = self._ctx.n_ctx()  # llama.cpp may round it up
        self.n_ctx = min(n_ctx, self.kv_cells)
        self.n_batch = ctx_params.n_batch
        self.n_vocab = self._model.n_vocab()
        metadata = self._model.metadata()
        self.chat_template = chat_template or metadata.get("tokenizer.chat_template")
        if not self.chat_template:
            raise ValueError(f"{self.path}: the GGUF carries no chat template; pass chat_template=")
        self.bos_token = self._model.token_get_text(self._model.token_bos()) if self._model.token_bos() >= 0 else ""
        self.eos_token = self._model.token_get_text(self._model.token_eos()) if self._model.token_eos() >= 0 else ""
        self._threads = (threads, threads_batch)
        self._threads_step = threads_step
        self._threads_now = threads_batch  # what the context's n_threads_batch is set to
        # One llama context shared by every concurrent chat(). min_prefill_tokens=64 makes a warm
        # prompt's numerics equal a cold one's (see BatchScheduler); 1 reuses every cached token.
        self.scheduler = BatchScheduler(self, min_prefill_tokens=min_prefill_tokens)

    def runtime(self) -> dict[str, object]:
        """What decides a greedy run's numerics on this machine: llama.cpp's version and build, the
        CPU features its kernels use, thread counts and batch shape (a near-tie can flip across builds)."""
        info = self._llama_cpp.llama_print_system_info()
        return {
            "engine": "llama-cpp-python", "version": self._llama_cpp.__version__,
            "system_info": info.decode("utf-8", "replace").strip() if isinstance(info, bytes) else str(info),
            "n_threads": self._threads[0], "n_threads_batch": self._threads[1], "n_threads_step": self._threads_step,
            "cpu_count": os.cpu_count(),
            "n_ctx": self.n_ctx, "kv_cells": self.kv_cells, "n_batch": self.n_batch, "max_parallel": self.max_parallel,
            "min_prefill_tokens": self.scheduler.min_prefill_tokens,
            **({"lora": str(self.lora_path), "lora_sha256": self.lora_sha256, "lora_scale": self.lora_scale}
               if self.lora_path is not None else {}),
        }  # fmt: skip

    def _apply_lora(self) -> None:
        """Load the adapter onto the model (llama.cpp frees it with the model) and set it on the context."""
        llama_cpp = self._llama_cpp
        adapter = llama_cpp.llama_adapter_lora_init(self._model.model, str(self.lora_path).encode("utf-8"))
        if not adapter:
            raise ValueError(f"{self.lora_path}: llama.cpp could not load this LoRA adapter for {self.path.name}")
        adapters = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(adapter)
        scales = (ctypes.c_float * 1)(self.lora_scale)
        if llama_cpp.llama_set_adapters_lora(self._ctx.ctx, adapters, 1, scales):
            raise RuntimeError(f"{self.lora_path}: llama.cpp could not set the LoRA adapter on the context")

    # ----------------------------------------------------------------------------- prompt
    def render(self, messages: list[Message], tools: list[ToolSchema] | None = None, form: str | None = None) -> str:
        """The prompt text; ``form``: the tool prompt's form (default: the client's; ``both``'s native one)."""
        form = form or ("native" if self.tool_prompt == "both" else self.tool_prompt)
        return render_chat(self.chat_template, messages, tools, bos_token=self.bos_token, eos_token=self.eos_token,
                           tool_prompt=form)

    def tokenize(self, text: str) -> list[int]:
        return list(self._model.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def detokenize(self, tokens: list[int]) -> str:
        return self._model.detokenize(tokens, special=False).decode("utf-8", errors="replace")

    # ----------------------------------------------------------------------------- engine
    # What the batch scheduler drives (kate.llm.llamacpp_batch.DecodeEngine); not for callers.
    def decode_batch(self, entries: list[Entry], *, step: bool = False) -> None:
        """Put (token, pos, seq_ids, wants_logits) entries in the batch and decode it; a ``step``
        (one token per sequence) runs on n_threads_step threads, prompt tokens on n_threads_batch."""
        threads = self._threads_step if step else self._threads[1]
        if threads != self._threads_now:
            self._llama_cpp.llama_set_n_threads(self._ctx.ctx, self._threads[0], threads)
            self._threads_now = threads
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

    def logits_at(self, index: int) -> np.ndarray:
        pointer = self._ctx.get_logits_ith(index)
        return np.ctypeslib.as_array(ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float)), shape=(self.n_vocab,)).copy()

    def seq_rm(self, seq: int, p0: int, p1: int) -> None:
        self._llama_cpp.llama_memory_seq_rm(self._ctx.memory, seq, p0, p1)

    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None:
        self._llama_cpp.llama_memory_seq_cp(self._ctx.memory, src, dst, p0, p1)

    def is_eog(self, token: int) -> bool:
        return bool(self._llama_cpp.llama_vocab_is_eog(self._model.vocab, token))

    # ----------------------------------------------------------------------------- chat
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
        top_logprobs: int = 0,
        prefill: str | None = None,
        stop_after_call: bool = False,
    ) -> list[Completion]:
        """``n`` completions; concurrent calls from several threads decode together.

        ``prefill``: text the answer starts with, tokenized on its own after the rendered prompt;
        the returned text includes it (and is parsed for tool calls whole), logprobs,
        ``completion_tokens`` and ``stop`` see only generated tokens, ``prompt_tokens`` includes it.
        ``top_logprobs``: with ``logprobs``, the k most likely tokens at each position.
        ``stop_after_call``: a sample ends once its text (the prefill's included) holds a whole first call
        (kate.toolcall.first_call_complete), for a one-call step; not in BFCL's Python form, whose list
        is read whole.
        """
        check_sampling_args(n, temperature, max_tokens)
        if not isinstance(top_logprobs, int) or top_logprobs < 0:
            raise ValueError(f"top_logprobs must be a non-negative integer, got {top_logprobs!r}")
        args = dict(n=n, temperature=temperature, max_tokens=max_tokens, seed=seed, stop=stop, logprobs=logprobs,
                    top_p=top_p, ignore_eos=ignore_eos, top_logprobs=top_logprobs, prefill=prefill,
                    stop_after_call=stop_after_call)
        if self.tool_prompt == "both" and tools and not prefill:  # a prefilled reply continues the native form
            several = self.several_calls is None or bool(self.several_calls(messages))
            return ask_both(lambda form: self._chat_form(messages, tools, form, **args), several)
        return self._chat_form(messages, tools, "native" if self.tool_prompt == "both" else self.tool_prompt, **args)

    def _chat_form(self, messages: list[Message], tools: list[ToolSchema] | None, form: str, *, n: int,
                   temperature: float, max_tokens: int, seed: int | None, stop: list[str] | None, logprobs: bool,
                   top_p: float, ignore_eos: bool, top_logprobs: int, prefill: str | None,
                   stop_after_call: bool) -> list[Completion]:
        formats = FORMATS[form] if self.formats_default else self.formats
        stop_when = None
        if stop_after_call and "python_list" not in formats:
            stop_when = functools.partial(_first_call_after, prefill or "")
        prompt = self.tokenize(self.render(messages, tools, form))
        if prefill:
            prompt += self.tokenize(prefill)
        if len(prompt) + max_tokens > self.n_ctx:
            raise ValueError(
                f"{self.name}: prompt of {len(prompt)} tokens + max_tokens {max_tokens} exceeds n_ctx {self.n_ctx}"
            )
        room = (self.kv_cells - len(prompt)) // max_tokens  # sequences whose continuations fit beside the prompt
        params = SamplingParams(
            temperature=temperature, top_p=top_p, max_tokens=max_tokens, stop=tuple(stop or ()),
            ignore_eos=ignore_eos, top_logprobs=top_logprobs if logprobs else 0, stop_when=stop_when,
        )  # fmt: skip
        request = Request(
            prompt=prompt, n=n, round_size=max(1, min(n, self.max_parallel, room)), params=params,
            rng=np.random.default_rng(seed),
        )  # fmt: skip
        try:
            self.scheduler.run(request)
        except RuntimeError as error:  # llama_decode's return code, a closed model: this request's failure
            raise EngineError(f"{self.name}: {error}") from error
        usage = Usage(prompt_tokens=len(prompt), cached_tokens=request.cached or 0)
        return [self._completion(s, usage, logprobs, prefill or "", tools, formats) for s in request.sequences]

    def _completion(self, s: Sequence, usage: Usage, logprobs: bool, prefill: str,
                    tools: list[ToolSchema] | None, formats: tuple[str, ...]) -> Completion:
        text = s.text if s.text is not None else self.detokenize(s.tokens)
        tops = s.tops or [()] * len(s.tokens)
        token_logprobs = tuple(
            TokenLogprob(self.detokenize([t]), lp, t, tuple((self.detokenize([a]), alp) for a, alp in top))
            for t, lp, top in zip(s.tokens, s.logprobs, tops)
        )
        return completion_from_text(
            prefill + text,
            formats=formats,
            finish_reason=s.finish,
            logprobs=token_logprobs if logprobs else None,
            usage=replace(usage, completion_tokens=len(s.tokens)),
            tools=tools,
        )

    def close(self) -> None:
        self.scheduler.close()
        self._batch.close()
        self._ctx.close()
        self._model.close()
