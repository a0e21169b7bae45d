"""kate inside an agent loop you already have: ``wrap(openai_client)`` returns a drop-in client whose
``chat.completions.create(...)`` takes the ``openai`` package's arguments and returns its types (a
``ChatCompletion``, or a stream of ``ChatCompletionChunk``), with the wrapped client as the model
and kate's knowledge and width vote in between::

    from openai import OpenAI
    from kate.serve import wrap

    client = wrap(OpenAI(base_url="http://127.0.0.1:8001/v1", api_key="-"), width=8)
    response = client.chat.completions.create(model="qwen2.5", messages=messages, tools=tools)
    response.choices[0].message.tool_calls      # the voted calls
    response.model_extra["kate"]                 # the vote and the knowledge hits

Wrapping an ``AsyncOpenAI`` gives an async client (``await ....create(...)``; streams are async
iterators); its requests run on a worker thread through a synchronous twin of the client (same
base URL, key, timeout and retries). Each request is the same ``ChatService`` call ``kate serve``
makes, so the wrapper and the server give the same calls for the same seed. Everything else
(``client.models.list()``, ...) is the wrapped client's own. The served turn end
(``kate.serve.answers``) needs an engine that takes a prefill, which an OpenAI-compatible client
does not: a wrapped client's steps pass through as its model wrote them (behind ``kate serve`` on a
local engine, the server answers them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from typing import Any

from kate.llm.base import ChatModel
from kate.retrieval.config import RetrievalConfig
from kate.serve.errors import APIError
from kate.serve.knowledge import ServedKnowledge
from kate.serve.request import Limits, read_request
from kate.serve.response import stream_chunks
from kate.serve.service import ChatService, ServeSettings

TRANSPORT_ONLY = ("extra_headers", "extra_query", "timeout")


class KateStream:
    """The chunks of one streamed answer (iterate; a context manager like the SDK's ``Stream``)."""

    def __init__(self, chunks: list[Any]) -> None:
        self._chunks = chunks

    def __iter__(self) -> Iterator[Any]:
        return iter(self._chunks)

    def __aiter__(self):
        async def chunks():
            for chunk in self._chunks:
                yield chunk

        return chunks()

    def __enter__(self) -> "KateStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> "KateStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._chunks = []


def _sync_twin(client: Any) -> Any:
    import openai

    if isinstance(client, openai.AsyncOpenAI):
        return openai.OpenAI(api_key=client.api_key, organization=client.organization, project=client.project,
                             base_url=client.base_url, timeout=client.timeout, max_retries=client.max_retries)  # fmt: skip
    return client


class _Completions:
    def __init__(self, owner: "KateClient") -> None:
        self._owner = owner

    def create(self, **kwargs: Any) -> Any:
        return self._owner._create(kwargs)


class _AsyncCompletions(_Completions):
    async def create(self, **kwargs: Any) -> Any:  # type: ignore[override]
        return await asyncio.to_thread(self._owner._create, kwargs)


class _Chat:
    def __init__(self, completions: _Completions) -> None:
        self.completions = completions


class KateClient:
    """The wrapped client with kate in its ``chat.completions.create``."""

    def __init__(self, client: Any, service: ChatService, limits: Limits = Limits(), *, asynchronous: bool = False) -> None:
        self._client = client
        self._service = service
        self._limits = limits
        self.chat = _Chat(_AsyncCompletions(self) if asynchronous else _Completions(self))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def _create(self, kwargs: dict[str, Any]) -> Any:
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        body = {k: v for k, v in kwargs.items() if k not in TRANSPORT_ONLY and k != "extra_body"}
        body.update(kwargs.get("extra_body") or {})
        try:
            request = read_request(body, self._limits)
            response = self._service.complete(request)
        except APIError as error:
            raise _status_error(error) from None
        if not request.stream:
            return ChatCompletion.model_validate(response)
        chunks = stream_chunks(response, include_usage=request.include_usage)
        return KateStream([ChatCompletionChunk.model_validate(c) for c in chunks])


def _status_error(error: APIError) -> Exception:
    """The ``openai`` exception a server's status would have raised in the SDK."""
    import httpx
    import openai

    kinds = {400: openai.BadRequestError, 401: openai.AuthenticationError, 403: openai.PermissionDeniedError,
             404: openai.NotFoundError, 409: openai.ConflictError, 422: openai.UnprocessableEntityError,
             429: openai.RateLimitError}  # fmt: skip
    kind = kinds.get(error.status, openai.InternalServerError if error.status >= 500 else openai.APIStatusError)
    request = httpx.Request("POST", "http://kate.local/v1/chat/completions")
    response = httpx.Response(error.status, json=error.body(), request=request)
    return kind(error.message, response=response, body=error.body())


def wrap(client: Any, *, width: int = 8, vote: str = "valid_majority", temperature: float = 1.0, max_tokens: int = 512,
         knowledge: RetrievalConfig | Mapping[str, Any] | ServedKnowledge | None = None, report: bool = True,
         max_concurrency: int = 4) -> KateClient:  # fmt: skip
    """``client`` (``openai.OpenAI`` or ``AsyncOpenAI``) with kate between the loop and the model.

    ``width``: samples voted over per step (1: no vote); ``vote``: valid_majority | majority |
    critic | adaptive (the act-first adaptive vote: up to ``width`` samples, fewer when they agree); ``temperature`` / ``max_tokens``: for requests that give none; ``knowledge``: retrieval
    settings (``RetrievalConfig`` or its fields, e.g. ``{"kb": "bfcl_train"}``) or None;
    ``max_concurrency``: parallel single requests when the server ignores or rejects ``n``.
    """
    import openai

    from kate.llm.openai import OpenAIChatModel

    twin = _sync_twin(client)
    models: dict[str, ChatModel] = {}

    def model_for(name: str) -> ChatModel:
        if name not in models:
            models[name] = OpenAIChatModel(name, client=twin, max_concurrency=max_concurrency)
        return models[name]

    if knowledge is not None and not isinstance(knowledge, ServedKnowledge):
        config = knowledge if isinstance(knowledge, RetrievalConfig) else RetrievalConfig(**dict(knowledge))
        knowledge = ServedKnowledge(config)
        knowledge.open_all()
    settings = ServeSettings(width=width, vote=vote, temperature=temperature, max_tokens=max_tokens, report=report)
    service = ChatService(model_for, knowledge, settings)
    return KateClient(client, service, asynchronous=isinstance(client, openai.AsyncOpenAI))
