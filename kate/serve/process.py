"""Start ``kate serve`` on 127.0.0.1 as a child process and wait until it answers (tests, benchmarks)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from kate.llm.local_server import LocalServer, free_port, launch


def start_kate_server(overrides: Sequence[str] = (), *, timeout: float = 300,
                      log_dir: Path = Path("/tmp/kate-servers"), env: dict[str, str] | None = None) -> LocalServer:  # fmt: skip
    """``kate serve`` with Hydra ``overrides`` on a free port (unless one is given), ready to call."""
    overrides = list(overrides)
    port = next((int(o.split("=", 1)[1]) for o in overrides if o.startswith("port=")), 0) or free_port()
    overrides = [o for o in overrides if not o.startswith("port=")] + [f"port={port}", "host=127.0.0.1"]
    model = next((o.split("=", 1)[1] for o in overrides if o.startswith("served_model_name=")), "kate")
    cmd = [sys.executable, "-m", "kate.cli", "serve", *overrides]
    return launch(cmd, port, model, log_dir, env).wait_ready(timeout, path="/health")


class ThreadedServer:
    """An app served by uvicorn on a thread of this process, on 127.0.0.1 and a free port::

        with ThreadedServer(app) as server:
            OpenAI(base_url=server.base_url, api_key="-")...
    """

    def __init__(self, app: object, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app, self.host, self.port = app, host, port
        self._server = None
        self._thread = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def __enter__(self) -> "ThreadedServer":
        import socket
        import threading
        import time

        import uvicorn

        sock = socket.socket()
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the in-process server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
