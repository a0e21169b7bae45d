"""Sampling for the llama.cpp batch scheduler: the next token from a sequence's logits
(``pick_token``), and one step of a request (``advance``): a token for each of its running
sequences, ended by an end-of-generation token, a stop string, a whole first call (``stop_when``) or
``max_tokens``. Each request samples with its own generator, so what runs beside it never changes its
draws."""

from __future__ import annotations

import numpy as np

from kate.llm.llamacpp_requests import DecodeEngine, Entry, Request, Sequence
from kate.toolcall.parse import CALL_CLOSERS


def pick_token(
    logits: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator, top_k: int = 0
) -> tuple[int, float, tuple[tuple[int, float], ...]]:
    """A token, its log-probability under the model's own distribution (temperature 1), and the
    ``top_k`` most likely (token, logprob) pairs under that distribution, most likely first."""
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
    top: tuple[tuple[int, float], ...] = ()
    if top_k > 0:
        k = min(top_k, len(logits))
        ids = np.argpartition(-shifted, k - 1)[:k]
        ids = ids[np.lexsort((ids, -shifted[ids]))]  # most likely first; ties by token id, as argmax
        top = tuple((int(t), float(shifted[t] - log_norm)) for t in ids)
    return token, float(shifted[token] - log_norm), top


def advance(request: Request, engine: DecodeEngine) -> list[tuple[Entry, Sequence]]:
    """Pick the next token of each of the request's running sequences; the entries to decode."""
    params, out = request.params, []
    for s in request.running:
        if s.finish is not None:
            continue
        logits = request.logits[s.seq_id]
        token, logprob, top = pick_token(logits, params.temperature, params.top_p, request.rng, params.top_logprobs)
        if not params.ignore_eos and engine.is_eog(token):
            s.finish = "stop"
            continue
        s.tokens.append(token)
        s.logprobs.append(logprob)
        if top:
            s.tops.append(top)
        if params.stop and _hit_stop(s, params.stop, engine):
            continue
        if params.stop_when is not None and _call_ended(s, params.stop_when, engine):
            continue
        if len(s.tokens) >= params.max_tokens:
            s.finish = "length"
            continue
        out.append(((token, len(request.prompt) + len(s.tokens) - 1, (s.seq_id,), True), s))
    return out


def _call_ended(s: Sequence, stop_when, engine: DecodeEngine) -> bool:
    """``stop_when`` on the text so far, asked only when the new token could close a call."""
    closes = any(c in CALL_CLOSERS for c in engine.detokenize(s.tokens[-1:]))
    if not closes or not stop_when(engine.detokenize(s.tokens)):
        return False
    s.finish = "stop"
    return True


def _hit_stop(s: Sequence, stop: tuple[str, ...], engine: DecodeEngine) -> bool:
    text = engine.detokenize(s.tokens)
    cuts = [text.find(x) for x in stop if x in text]
    if not cuts:
        return False
    s.text, s.finish = text[: min(cuts)], "stop"
    return True
