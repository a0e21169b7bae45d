"""A loopback HTTP proxy that injects faults between a client and a real upstream server (a test and
benchmark utility; ``kate.testing.stub_upstream`` has a stub OpenAI-compatible upstream to stand it
in front of).

    with FaultProxy(server.base_url, seeded(rate=0.2, seed=0), stall_seconds=31) as proxy:
        model = OpenAIChatModel(server.model, base_url=proxy.base_url, timeout=30)
        ...
        proxy.stats()  # {"requests": .., "forwarded": .., "faults": {"http_500": .., ...}}

Each POST is request number ``i`` (from 0, counted since the schedule was set); the schedule, ``(i, body) -> fault kind or None``,
decides what happens to it (other methods always pass). Fault kinds (``FAULT_KINDS``):

* ``http_500``, ``http_503``: an error response with a JSON body; nothing reaches the upstream.
* ``stall``: no answer for ``stall_seconds`` (make it longer than the client's timeout), then the
  connection is closed; nothing reaches the upstream.
* ``drop``: the connection is closed without a response; nothing reaches the upstream.
* ``drop_mid_body``: forwarded; the upstream's status, headers and half of its body, then close.
* ``truncate``: forwarded; a ``Content-Length`` larger than the body, the whole body, then close.

Everything else passes through unchanged (a chunked, e.g. streamed, response is relayed chunk by
chunk; ``drop_mid_body``/``truncate`` cut it after its first chunk). An upstream that cannot be
reached is answered 502. Counts are kept per fault kind, of requests seen and of requests forwarded.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from kate.testing.schedules import FAULT_KINDS, Schedule, check_kind, every, no_faults, persistent, scripted, seeded

__all__ = ["FAULT_KINDS", "FaultProxy", "Schedule", "every", "no_faults", "persistent", "scripted", "seeded"]

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade",
              "content-length", "host"}  # fmt: skip


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class FaultProxy:
    """The proxy on 127.0.0.1 (``port=0``: a free one; pass a port to come back on the same address,
    e.g. to resume a run whose configuration holds the URL). A context manager; ``schedule`` may be
    replaced while it runs."""

    def __init__(self, upstream: str, schedule: Schedule | None = None, *, stall_seconds: float = 5.0,
                 port: int = 0, upstream_timeout: float = 600.0) -> None:  # fmt: skip
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"upstream must be an http:// URL, got {upstream!r}")
        self.upstream_host, self.upstream_port = parts.hostname, parts.port or 80
        self.path = parts.path.rstrip("/")
        self._schedule: Schedule = schedule or no_faults
        self.stall_seconds = stall_seconds
        self.upstream_timeout = upstream_timeout
        self.requests = 0
        self._posts = 0
        self.forwarded = 0
        self.upstream_errors = 0
        self.clients_gone = 0  # forwarded requests whose client left before the answer (its timeout was too short)
        self.slowest_upstream = 0.0  # seconds, request sent to response read: what the client's timeout must exceed
        self.faults: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._server = _ProxyServer(("127.0.0.1", port), _handler(self))
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"fault-proxy-{self.port}", daemon=True)

    @property
    def schedule(self) -> Schedule:
        return self._schedule

    @schedule.setter
    def schedule(self, schedule: Schedule) -> None:
        """A new schedule; the requests it numbers start again from 0 (counts are kept)."""
        with self._lock:
            self._schedule, self._posts = schedule, 0

    @property
    def base_url(self) -> str:
        """The upstream's URL with the proxy's address (its path kept, e.g. ``/v1``)."""
        return f"http://127.0.0.1:{self.port}{self.path}"

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"requests": self.requests, "forwarded": self.forwarded, "upstream_errors": self.upstream_errors,
                    "clients_gone": self.clients_gone, "slowest_upstream_s": round(self.slowest_upstream, 3),
                    "faults": {kind: self.faults[kind] for kind in FAULT_KINDS}}  # fmt: skip

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; stalled requests wake and every open connection is closed."""
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(timeout=10)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ used by the handler
    def _decide(self, method: str, body: bytes) -> str | None:
        with self._lock:
            self.requests += 1
            if method != "POST":
                return None
            index, self._posts = self._posts, self._posts + 1
            schedule = self._schedule
        kind = schedule(index, body)
        check_kind(kind)
        if kind is not None:
            with self._lock:
                self.faults[kind] += 1
        return kind

    def _count(self, name: str) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)

    def _took(self, seconds: float) -> None:
        with self._lock:
            self.slowest_upstream = max(self.slowest_upstream, seconds)


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read counts, not logs
            pass

        def setup(self) -> None:
            super().setup()
            with proxy._lock:
                proxy._connections.add(self.connection)

        def finish(self) -> None:
            with proxy._lock:
                proxy._connections.discard(self.connection)
            try:
                super().finish()
            except OSError:
                pass

        def do_GET(self) -> None:
            self._handle()

        def do_POST(self) -> None:
            self._handle()

        def do_DELETE(self) -> None:
            self._handle()

        def _handle(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            kind = proxy._decide(self.command, body)
            if kind in ("http_500", "http_503"):
                self._send_error(int(kind[-3:]), f"fault proxy: injected {kind}")
            elif kind == "stall":
                proxy._stopping.wait(proxy.stall_seconds)
                self.close_connection = True
            elif kind == "drop":
                self.close_connection = True
            else:
                self._forward(body, kind)

        def _send_error(self, status: int, message: str) -> None:
            data = json.dumps({"error": {"message": message, "type": "server_error", "code": status}}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _forward(self, body: bytes, kind: str | None) -> None:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            upstream = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port,
                                                  timeout=proxy.upstream_timeout)  # fmt: skip
            start = time.monotonic()
            try:
                upstream.request(self.command, self.path, body=body or None, headers=headers)
                response = upstream.getresponse()
            except OSError as error:
                upstream.close()
                proxy._count("upstream_errors")
                self._send_error(502, f"fault proxy: upstream {proxy.upstream_host}:{proxy.upstream_port}: {error}")
                return
            proxy._count("forwarded")
            try:
                if response.getheader("Transfer-Encoding", "").lower() == "chunked":
                    self._relay_chunks(response, kind)
                else:
                    data = response.read()
                    proxy._took(time.monotonic() - start)
                    self._relay_body(response, data, kind)
            except OSError:  # the client went away (e.g. it timed out first): nothing to answer
                proxy._count("clients_gone")
                self.close_connection = True
            finally:
                upstream.close()

        def _start(self, response: http.client.HTTPResponse) -> None:
            self.send_response_only(response.status, response.reason)
            for key, value in response.getheaders():
                if key.lower() not in HOP_BY_HOP:
                    self.send_header(key, value)

        def _relay_body(self, response: http.client.HTTPResponse, data: bytes, kind: str | None) -> None:
            self._start(response)
            length = len(data) + max(16, len(data) // 2) if kind == "truncate" else len(data)
            self.send_header("Content-Length", str(length))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2] if kind == "drop_mid_body" else data)
            self.wfile.flush()
            if kind is not None:
                self.close_connection = True

        def _relay_chunks(self, response: http.client.HTTPResponse, kind: str | None) -> None:
            self._start(response)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while chunk := response.read1(65536):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
                if kind is not None:  # cut after the first chunk, without the terminating one
                    self.close_connection = True
                    return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler
