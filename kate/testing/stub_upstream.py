"""A stub OpenAI-compatible upstream on 127.0.0.1, to stand the fault proxy (or any OpenAI client) in
front of without a model.

    with StubUpstream(lambda body: "4") as stub:
        model = OpenAIChatModel("stub", base_url=stub.base_url)
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _StubServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def chat_response(content: str, model: str = "stub", n: int = 1) -> dict[str, Any]:
    """A chat-completions response body with ``n`` identical choices."""
    message = {"role": "assistant", "content": content}
    choices = [{"index": i, "message": message, "finish_reason": "stop", "logprobs": None} for i in range(n)]
    return {"id": "stub", "object": "chat.completion", "created": 0, "model": model, "choices": choices,
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}  # fmt: skip


class StubUpstream:
    """A tiny OpenAI-compatible server on 127.0.0.1: ``GET /v1/models`` and ``POST
    /v1/chat/completions`` answered with ``answer(request body) -> content`` (default a fixed text),
    ``n`` choices (streamed as server-sent events when the request asks); or ``refuse_n`` (400, 422) to ``n > 1``, as llama.cpp's own server does; or
    ``refuse_all`` to every chat request. Every request body is kept in ``bodies``."""

    def __init__(self, answer: Callable[[dict], str] | None = None, *, refuse_n: int | None = None,
                 refuse_all: int | None = None) -> None:  # fmt: skip
        self.answer = answer or (lambda body: "I have no tool to call.")
        self.refuse_n = refuse_n  # the status answered to n > 1, or None: n is honoured
        self.refuse_all = refuse_all  # the status answered to every chat request, or None
        self.bodies: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": "stub", "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                stub.bodies.append(body)
                n = int(body.get("n") or 1)
                refused = stub.refuse_all or (stub.refuse_n if n != 1 else None)
                if refused:
                    message = "Only one completion choice is allowed" if stub.refuse_n and n != 1 else "refused"
                    self._send(refused, {"error": {"message": message, "type": "invalid_request_error", "code": refused}})
                    return
                if body.get("stream"):
                    self._stream(stub.answer(body), body.get("model", "stub"))
                else:
                    self._send(200, chat_response(stub.answer(body), body.get("model", "stub"), n))

            def _stream(self, content: str, model: str) -> None:
                """Server-sent events, one word per chunk of a chunked response."""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                words = [w + " " for w in content.split(" ")]
                words[-1] = words[-1][:-1]
                for i, word in enumerate([*words, None]):
                    delta = {"role": "assistant", "content": word} if word is not None else {}
                    choice = {"index": 0, "delta": delta, "finish_reason": None if word is not None else "stop"}
                    event = {"id": "stub", "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [choice]}
                    data = b"data: " + json.dumps(event).encode() + b"\n\n"
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                done = b"data: [DONE]\n\n"
                self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
                self.wfile.flush()

        self._server = _StubServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"stub-{self.port}", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> StubUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
