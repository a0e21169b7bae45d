"""Any OpenAI-compatible server (vLLM, SGLang, llama.cpp's server, Ollama, OpenAI) via ``openai``.

The payload builder and the response parser are plain functions over dicts, so they are tested
without a network. ``n > 1`` is asked of the server in one request; when it returns fewer choices
(llama-cpp-python's server ignores ``n``), the rest come from single requests under bounded
concurrency, and when it refuses ``n > 1`` (llama.cpp's own server answers 400, others 422) the
client remembers that and sends ``n`` single requests from then on. Tool calls come from
``tool_calls``, or are parsed from the content when the server leaves them there.

429, 5xx, timeouts and dropped connections are retried with exponential backoff; when the retries
run out the call raises ``UpstreamUnavailable`` (the runner records it as an explicit failure that
a resume redoes; a server answers 504 for ``kind == "timeout"``, 502 otherwise). A request the
server refuses (400, 413, 422: e.g. a prompt longer than its context) raises ``UpstreamRejected``,
a ``ValueError`` like a local engine's, so it becomes a recorded failure of the item.
"""

from __future__ import annotations

import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kate.llm.base import Completion, Message, TokenLogprob, ToolSchema, Usage, check_sampling_args
from kate.toolcall import from_openai_tool_calls, parse_model_output

REJECTED = (400, 413, 422)  # the request itself was refused: not retried, a recorded failure of the item
N_REFUSED = (400, 422)  # what servers that take only n=1 answer to n > 1


class UpstreamError(RuntimeError):
    """A request the server did not answer: which server, what failed (``kind``: ``timeout``,
    ``connection`` or ``status``; ``status``: the HTTP status, when there was one), after how many attempts."""

    def __init__(self, message: str, *, base_url: str, kind: str, status: int | None, attempts: int) -> None:
        super().__init__(message)
        self.base_url, self.kind, self.status, self.attempts = base_url, kind, status, attempts


class UpstreamUnavailable(UpstreamError):
    """429, 5xx, timeouts or dropped connections on every attempt: the server, not the request."""


class UpstreamRejected(UpstreamError, ValueError):
    """The server refused the request (400, 413, 422), e.g. a prompt that does not fit its context."""


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
    top_p: float | None = None,
    top_logprobs: int | None = None,
    extra_body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The keyword arguments of ``client.chat.completions.create``. ``top_logprobs`` implies ``logprobs``."""
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
    if top_p is not None:
        payload["top_p"] = top_p
    if logprobs or top_logprobs:
        payload["logprobs"] = True
    if top_logprobs:
        payload["top_logprobs"] = top_logprobs
    if extra_body:
        payload["extra_body"] = dict(extra_body)
    return payload


def check_extra_options(top_p: float | None, top_logprobs: int | None) -> None:
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
    if top_logprobs is not None and (not isinstance(top_logprobs, int) or not 0 <= top_logprobs <= 20):
        raise ValueError(f"top_logprobs must be an integer from 0 to 20, got {top_logprobs!r}")


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


def _token_logprob(entry: dict) -> TokenLogprob:
    top = tuple((t.get("token", ""), float(t.get("logprob", 0.0))) for t in entry.get("top_logprobs") or ())
    return TokenLogprob(entry.get("token", ""), float(entry.get("logprob", 0.0)), top=top)


def _choice(choice: dict, prompt_tokens: int, completion_total: int, count: int, formats) -> Completion:
    message = choice.get("message") or {}
    text = message.get("content") or ""
    parsed = from_openai_tool_calls(message.get("tool_calls"))
    if parsed.ok and not parsed.calls:
        parsed = parse_model_output(text, formats=formats)
    token_logprobs = None
    content_logprobs = (choice.get("logprobs") or {}).get("content")
    if content_logprobs is not None:
        token_logprobs = tuple(_token_logprob(t) for t in content_logprobs)
    own_tokens = len(token_logprobs) if token_logprobs is not None else completion_total // max(count, 1)
    return Completion(
        text=text,
        tool_calls=parsed.calls,
        parse_error=parsed.error,
        finish_reason=choice.get("finish_reason"),
        logprobs=token_logprobs,
        usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=own_tokens),
    )


def _failure(error: Exception) -> tuple[str, int | None, bool]:
    """(kind, HTTP status, retryable) of an exception from the SDK."""
    import openai

    if isinstance(error, openai.APITimeoutError):  # a subclass of APIConnectionError: test it first
        return "timeout", None, True
    if isinstance(error, openai.APIConnectionError):
        return "connection", None, True
    if isinstance(error, openai.APIStatusError):
        return "status", error.status_code, error.status_code == 429 or error.status_code >= 500
    return "other", None, False


def _upstream_error(error: Exception, base_url: str, attempts: int) -> Exception:
    """The exception a failed request raises: says which server, what failed, after how many attempts."""
    kind, status, retryable = _failure(error)
    if kind == "other":
        return error
    what = {"timeout": "timed out", "connection": "connection failed"}.get(kind, f"HTTP {status}")
    cause = error.__cause__ if kind == "connection" and error.__cause__ is not None else error
    detail = f"{type(cause).__name__}: {str(cause).strip()}".splitlines()[0][:300]
    message = f"{base_url}: {what} after {attempts} attempt{'s' * (attempts > 1)} ({detail})"
    cls = UpstreamUnavailable if retryable else UpstreamRejected if status in REJECTED else UpstreamError
    return cls(message, base_url=base_url, kind=kind, status=status, attempts=attempts)


class OpenAIChatModel:
    """A client of one model on one OpenAI-compatible server. The key is read from the environment.

    ``client``: an ``openai.OpenAI`` to use instead of making one (its base URL, key, timeout and
    headers are kept, and ``base_url``, ``api_key_env`` and ``timeout`` are ignored). kate sends its
    requests through ``client.with_options(max_retries=0)``, a copy sharing the connection pool, so
    kate's retry loop (``max_retries``, ``backoff``) is the only one: the SDK's retries are not
    stacked under it, and the caller's own object keeps the ``max_retries`` they set for their own calls.
    """

    options = ("top_p", "top_logprobs", "tool_choice")  # see kate.llm.base.supports

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
        client: Any = None,
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
        self.n_refused = False  # set when this server refused n > 1: n single requests from then on
        if client is not None:
            self.client = client.with_options(max_retries=0) if hasattr(client, "with_options") else client
        else:
            self.client = openai.OpenAI(
                base_url=base_url,
                api_key=os.environ.get(api_key_env) or "not-needed",
                timeout=timeout,
                max_retries=0,  # retries are ours, so every backend retries the same way
            )

    @property
    def base_url(self) -> str:
        return str(self.client.base_url)

    def runtime(self) -> dict[str, object]:
        """The server decides the numerics; what kate knows of it is where it is and what it serves."""
        return {"engine": "openai-compatible", "base_url": self.base_url, "model": self.model,
                "max_concurrency": self.max_concurrency}  # fmt: skip

    def _create(self, payload: dict[str, Any]) -> list[Completion]:
        for attempt in range(self.max_retries + 1):
            try:
                return parse_response(self.client.chat.completions.create(**payload), self.formats)
            except Exception as error:  # noqa: BLE001 - classified right below
                if attempt == self.max_retries or not _failure(error)[2]:
                    failure = _upstream_error(error, self.base_url, attempt + 1)
                    if failure is error:
                        raise
                    raise failure from error
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
        top_p: float | None = None,
        top_logprobs: int | None = None,
        tool_choice: str | dict | None = None,
    ) -> list[Completion]:
        """``tool_choice`` here overrides the constructor's; ``top_logprobs`` fills ``TokenLogprob.top``."""
        check_sampling_args(n, temperature, max_tokens)
        check_extra_options(top_p, top_logprobs)
        common = dict(temperature=temperature, max_tokens=max_tokens, stop=stop, logprobs=logprobs, top_p=top_p,
                      top_logprobs=top_logprobs, tool_choice=tool_choice if tool_choice is not None else self.tool_choice,
                      extra_body=self.extra_body)  # fmt: skip

        def request(width: int, request_seed: int | None) -> list[Completion]:
            return self._create(build_payload(self.model, messages, tools, n=width, seed=request_seed, **common))

        completions: list[Completion] = []
        if n == 1 or not self.n_refused:
            try:
                completions = request(n, seed)
            except UpstreamRejected as error:
                if n == 1 or error.status not in N_REFUSED:
                    raise
                completions = request(1, seed)  # raises again if the refusal was not about n
                self.n_refused = True
        missing = n - len(completions)
        if missing <= 0:
            return completions[:n]
        first = len(completions)

        def one(i: int) -> list[Completion]:
            return request(1, None if seed is None else seed + first + i)

        with ThreadPoolExecutor(max_workers=max(1, min(self.max_concurrency, missing))) as pool:
            for extra in pool.map(one, range(missing)):
                completions.extend(extra[:1])
        return completions
