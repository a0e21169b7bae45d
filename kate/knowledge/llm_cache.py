"""LLM-written knowledge, cached by content hash: a rebuild asks only what changed.

The key of a request is the sha256 of the writer model's name, the messages, the sampling
parameters and the prompt's purpose. Answers are appended to a JSONL file, one fsynced line per
answer, so a build killed at any point resumes where it stopped: every answer it already had is
read back, and a final line cut short by the kill is dropped.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kate.io import append_jsonl, read_jsonl
from kate.llm.base import ChatModel, Message


def request_key(model_name: str, messages: list[Message], *, temperature: float, max_tokens: int,
                seed: int | None, purpose: str) -> str:
    body = {"model": model_name, "messages": messages, "temperature": temperature, "max_tokens": max_tokens,
            "seed": seed, "purpose": purpose}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


class LLMCache:
    """``key -> answer text``, persisted in ``path`` (JSONL). ``asked`` counts real model calls.
    Safe to share between threads (answers and counters are updated under a lock)."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = Path(path) if path is not None else None
        self._answers: dict[str, str] = {}
        self.asked = 0
        self.hits = 0
        self._lock = threading.Lock()
        if self.path is not None and self.path.exists():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a line cut short by a kill is expected here
                for record in read_jsonl(self.path):
                    self._answers[record["key"]] = record["text"]

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: str) -> str | None:
        return self._answers.get(key)

    def put(self, key: str, text: str, **meta: Any) -> None:
        with self._lock:
            self._put(key, text, meta)

    def _put(self, key: str, text: str, meta: dict[str, Any]) -> None:
        self._answers[key] = text
        if self.path is not None:
            record = {"key": key, "text": text, "time": datetime.now(timezone.utc).isoformat(timespec="seconds"), **meta}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a torn last line left by a kill is dropped, as expected
                append_jsonl(self.path, record)

    def chat(self, model: ChatModel, messages: list[Message], *, purpose: str, temperature: float = 0.0,
             max_tokens: int = 256, seed: int | None = 0) -> str:
        """The model's answer text to ``messages`` (no tools), from the cache when it has it."""
        key = request_key(model.name, messages, temperature=temperature, max_tokens=max_tokens, seed=seed,
                          purpose=purpose)
        with self._lock:
            cached = self.get(key)
            if cached is not None:
                self.hits += 1
                return cached
        [completion] = model.chat(messages, None, n=1, temperature=temperature, max_tokens=max_tokens, seed=seed)
        with self._lock:
            self.asked += 1
            self._put(key, completion.text, {"model": model.name, "purpose": purpose})
        return completion.text
