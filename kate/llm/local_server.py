"""Start an OpenAI-compatible server on 127.0.0.1 as a child process, wait until it answers, stop it.

Used by tests and benchmarks to exercise the ``openai`` backend against real engines:
llama-cpp-python's server (installed with kate) and vLLM's CPU build (its own environment).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from kate.llm.registry import model_path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LocalServer:
    process: subprocess.Popen
    port: int
    model: str
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def wait_ready(self, timeout: float, path: str = "/v1/models") -> "LocalServer":
        """Poll ``path`` (under the server's root) until it answers 200."""
        deadline = time.monotonic() + timeout
        root = self.base_url.removesuffix("/v1")
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}; log: {self.log_path}\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{root}{path}", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"server not ready after {timeout:.0f}s; log: {self.log_path}\n{self.log_tail()}")

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> "LocalServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def launch(cmd: list[str], port: int, model: str, log_dir: Path, env: dict | None = None) -> LocalServer:
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"server-{port}.log"
    log = open(log_path, "wb")
    process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    return LocalServer(process=process, port=port, model=model, log_path=log_path)


def start_llamacpp_server(
    model: str, *, n_ctx: int = 4096, log_dir: Path = Path("/tmp/kate-servers"), timeout: float = 120
) -> LocalServer:
    """llama-cpp-python's OpenAI-compatible server for a kate model (or a .gguf path)."""
    path = model_path(model) if not model.endswith(".gguf") else Path(model)
    port = free_port()
    cmd = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(path), "--model_alias", model,
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(n_ctx), "--verbose", "false",
    ]  # fmt: skip
    return launch(cmd, port, model, log_dir).wait_ready(timeout)
