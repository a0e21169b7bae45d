"""``kate serve``'s HTTP face: a FastAPI app over a ``ChatService`` (routes and guards only).

Routes: ``POST /v1/chat/completions`` (JSON or SSE stream), ``GET /v1/models``, ``GET /health``,
``GET /v1/kate`` (what the server runs: model, sampler, knowledge bases), and ``POST
/v1/kate/trajectories`` (learning from use, when enabled). Every error is OpenAI's body with the
right status: 400 invalid request, 401 wrong or missing key, 404 unknown model or route, 413 body
or messages too large, 429 queue full, 502 / 504 upstream failure or timeout, 500 otherwise.

Requests run on worker threads, at most ``max_concurrent`` at once (the local engine decodes their
sequences together), ``max_queue`` more waiting; a request still waiting or running after
``request_timeout`` seconds gets a 504 (its worker finishes in the background and keeps its slot
until then, so a stalled engine cannot be overloaded by retries).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from kate.serve.errors import APIError, bad_request, upstream_error
from kate.serve.request import Limits, read_request
from kate.serve.response import stream_chunks
from kate.serve.service import ChatService


@dataclass(frozen=True)
class ServerSettings:
    model_names: tuple[str, ...]
    api_key: str | None = None
    max_body_bytes: int = 4 * 1024 * 1024
    max_concurrent: int = 4
    max_queue: int = 16
    request_timeout: float = 300.0
    limits: Limits = field(default_factory=Limits)


class _Admission:
    """At most ``running`` requests at once and ``waiting`` more; a slot is held until its worker ends."""

    def __init__(self, running: int, waiting: int) -> None:
        self.running, self.waiting = running, waiting
        self.pending = 0
        self.semaphore = asyncio.Semaphore(running)

    async def run(self, pool: ThreadPoolExecutor, timeout: float, work: Callable[[], Any]) -> Any:
        if self.pending >= self.running + self.waiting:
            raise APIError(429, f"the server is busy ({self.pending} requests running or queued); retry later",
                           code="queue_full")  # fmt: skip
        self.pending += 1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            await asyncio.wait_for(self.semaphore.acquire(), timeout)
        except asyncio.TimeoutError:
            self.pending -= 1
            raise APIError(504, f"the request waited {timeout:.0f}s for a free slot", code="timeout") from None
        future = loop.run_in_executor(pool, work)

        def release(_: Any) -> None:
            self.semaphore.release()
            self.pending -= 1

        future.add_done_callback(release)
        try:
            return await asyncio.wait_for(asyncio.shield(future), max(0.0, deadline - loop.time()))
        except asyncio.TimeoutError:
            raise APIError(504, f"no answer within the server's request timeout ({timeout:.0f}s)",
                           code="timeout") from None  # fmt: skip


async def _read_json(request: Request, limit: int) -> Any:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise APIError(413, f"request body of {declared} bytes; this server takes at most {limit}", code="body_too_large")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise APIError(413, f"request body over {limit} bytes", code="body_too_large")
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise bad_request(f"the request body is not valid JSON: {error}", code="invalid_json") from None


def create_app(service: ChatService, settings: ServerSettings, *,
               learner: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
               describe: Callable[[], dict[str, Any]] | None = None) -> FastAPI:  # fmt: skip
    """The app. ``learner(body) -> outcome`` takes ``POST /v1/kate/trajectories`` (None: learning is off)."""
    app = FastAPI(title="kate", docs_url=None, redoc_url=None, openapi_url=None)
    pool = ThreadPoolExecutor(max_workers=settings.max_concurrent, thread_name_prefix="kate-serve")
    state: dict[str, _Admission] = {}

    def admission() -> _Admission:  # made inside the running loop
        if "admission" not in state:
            state["admission"] = _Admission(settings.max_concurrent, settings.max_queue)
        return state["admission"]

    def check_key(request: Request) -> None:
        if settings.api_key is None:
            return
        given = request.headers.get("authorization", "")
        token = given[7:] if given.lower().startswith("bearer ") else ""
        if not secrets.compare_digest(token.encode(), settings.api_key.encode()):
            raise APIError(401, "invalid or missing API key (Authorization: Bearer <key>)", code="invalid_api_key")

    @app.exception_handler(APIError)
    async def _api_error(_: Request, error: APIError) -> JSONResponse:
        return JSONResponse(error.body(), status_code=error.status)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, error: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(APIError(error.status_code, str(error.detail)).body(), status_code=error.status_code)

    @app.exception_handler(Exception)
    async def _internal(_: Request, error: Exception) -> JSONResponse:
        api = upstream_error(error)
        return JSONResponse(api.body(), status_code=api.status)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models(request: Request) -> dict[str, Any]:
        check_key(request)
        return {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "kate"}
                                           for name in settings.model_names]}  # fmt: skip

    @app.get("/v1/kate")
    async def kate_info(request: Request) -> dict[str, Any]:
        check_key(request)
        return describe() if describe is not None else {}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        check_key(request)
        chat_request = read_request(await _read_json(request, settings.max_body_bytes), settings.limits)
        if chat_request.model not in settings.model_names:
            raise APIError(404, f"The model `{chat_request.model}` does not exist; this server has "
                           f"{list(settings.model_names)}", "model", "model_not_found")  # fmt: skip

        def work() -> dict[str, Any]:
            try:
                return service.complete(chat_request)
            except APIError:
                raise
            except Exception as error:  # noqa: BLE001 - mapped to the status a client should see
                raise upstream_error(error) from error

        response = await admission().run(pool, settings.request_timeout, work)
        if not chat_request.stream:
            return JSONResponse(response)

        async def events():
            for chunk in stream_chunks(response, include_usage=chat_request.include_usage):
                yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})  # fmt: skip

    @app.post("/v1/kate/trajectories")
    async def trajectories(request: Request) -> JSONResponse:
        check_key(request)
        if learner is None:
            raise APIError(403, "learning from use is off on this server (kate serve learn.enabled=true)",
                           code="learning_off")  # fmt: skip
        body = await _read_json(request, settings.max_body_bytes)
        if not isinstance(body, dict):
            raise bad_request("the body is an object: {messages, tools, success}")
        outcome = await admission().run(pool, settings.request_timeout, lambda: learner(body))
        return JSONResponse(outcome)

    @app.on_event("shutdown")
    def _stop_pool() -> None:
        pool.shutdown(wait=True, cancel_futures=False)

    return app
