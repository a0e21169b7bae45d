"""Any OpenAI-compatible server (vLLM, SGLang, llama.cpp's server, Ollama, OpenAI) via ``openai``.

The payload builder and the response parser are plain functions over dicts, so they are tested
without a network. ``n > 1`` is asked of the server in one request; when it returns fewer choices
(llama.cpp's server ignores ``n``), the rest come from single requests under bounded concurrency.
Tool calls come from ``tool_calls``, or are parsed from the content when the server leaves them
there. 429, 5xx, timeouts and dropped connections are retried with exponential backoff.
"""

from __future__ import annotations

import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kate.llm.base import Completion, Message, TokenLogprob, ToolSchema, Usage, check_sampling_args
from kate.toolcall import from_openai_tool_calls, parse_model_output


def build_payload(
    model: str,
    messages: list[Message],
    tools: list[ToolSchema] | None,
    *,
    n: int,
    temperature: float,
    max_tokens: int,
    seed: int | None,
    stop: list[str] | None,
    logprobs: bool,
    tool_choice: str | dict | None = None,
    extra_body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The keyword arguments of ``client.chat.completions.create``."""
    payload: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "n": n,
        "temperature": temperature,
        "max_tokens": max_tokens,
    }
    if tools:
        payload["tools"] = tools
        if tool_choice is not None:
            payload["tool_choice"] = tool_choice
    if seed is not None:
        payload["seed"] = seed
    if stop:
        payload["stop"] = list(stop)
    if logprobs:
        payload["logprobs"] = True
    if extra_body:
        payload["extra_body"] = dict(extra_body)
    return payload


def _as_dict(obj: Any) -> Any:
    return obj.model_dump() if hasattr(obj, "model_dump") else obj


def parse_response(response: Any, formats: tuple[str, ...] = ("hermes", "json")) -> list[Completion]:
    """Completions from a chat-completions response (an SDK object or its dict)."""
    data = _as_dict(response)
    usage = data.get("usage") or {}
    prompt_tokens = int(usage.get("prompt_tokens") or 0)
    choices = data.get("choices") or []
    completion_total = int(usage.get("completion_tokens") or 0)
    return [_choice(c, prompt_tokens, completion_total, len(choices), formats) for c in choices]


def _choice(choice: dict, prompt_tokens: int, completion_total: int, count: int, formats) -> Completion:
    message = choice.get("message") or {}
    text = message.get("content") or ""
    parsed = from_openai_tool_calls(message.get("tool_calls"))
    if parsed.ok and not parsed.calls:
        parsed = parse_model_output(text, formats=formats)
    token_logprobs = None
    content_logprobs = (choice.get("logprobs") or {}).get("content")
    if content_logprobs is not None:
        token_logprobs = tuple(TokenLogprob(t.get("token", ""), float(t.get("logprob", 0.0))) for t in content_logprobs)
    own_tokens = len(token_logprobs) if token_logprobs is not None else completion_total // max(count, 1)
    return Completion(
        text=text,
        tool_calls=parsed.calls,
        parse_error=parsed.error,
        finish_reason=choice.get("finish_reason"),
        logprobs=token_logprobs,
        usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=own_tokens),
    )


def _retryable(error: Exception) -> bool:
    import openai

    if isinstance(error, (openai.RateLimitError, openai.APITimeoutError, openai.APIConnectionError)):
        return True
    return isinstance(error, openai.APIStatusError) and error.status_code >= 500


class OpenAIChatModel:
    """A client of one model on one OpenAI-compatible server. The key is read from the environment."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        name: str | None = None,
        max_concurrency: int = 4,
        timeout: float = 120.0,
        max_retries: int = 5,
        backoff: float = 1.0,
        tool_choice: str | dict | None = None,
        extra_body: dict[str, Any] | None = None,
        formats: tuple[str, ...] = ("hermes", "json"),
    ) -> None:
        import openai

        self.model = model
        self.name = name or model
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.backoff = backoff
        self.tool_choice = tool_choice
        self.extra_body = dict(extra_body or {})
        self.formats = tuple(formats)
        self.client = openai.OpenAI(
            base_url=base_url,
            api_key=os.environ.get(api_key_env) or "not-needed",
            timeout=timeout,
            max_retries=0,  # retries are ours, so every backend retries the same way
        )

    def runtime(self) -> dict[str, object]:
        """The server decides the numerics; what kate knows of it is where it is and what it serves."""
        return {"engine": "openai-compatible", "base_url": str(self.client.base_url), "model": self.model,
                "max_concurrency": self.max_concurrency}  # fmt: skip

    def _create(self, payload: dict[str, Any]) -> list[Completion]:
        for attempt in range(self.max_retries + 1):
            try:
                return parse_response(self.client.chat.completions.create(**payload), self.formats)
            except Exception as error:  # noqa: BLE001 - classified right below
                if attempt == self.max_retries or not _retryable(error):
                    raise
                time.sleep(self.backoff * (2**attempt) * (1 + random.random() / 2))
        raise AssertionError("unreachable")

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
    ) -> list[Completion]:
        check_sampling_args(n, temperature, max_tokens)
        common = dict(temperature=temperature, max_tokens=max_tokens, stop=stop, logprobs=logprobs)
        extras = dict(tool_choice=self.tool_choice, extra_body=self.extra_body)
        completions = self._create(build_payload(self.model, messages, tools, n=n, seed=seed, **common, **extras))
        missing = n - len(completions)
        if missing <= 0:
            return completions[:n]

        def one(i: int) -> list[Completion]:
            request_seed = None if seed is None else seed + len(completions) + i
            return self._create(build_payload(self.model, messages, tools, n=1, seed=request_seed, **common, **extras))

        with ThreadPoolExecutor(max_workers=max(1, min(self.max_concurrency, missing))) as pool:
            for extra in pool.map(one, range(missing)):
                completions.extend(extra[:1])
        return completions
