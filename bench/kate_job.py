"""One kate command as a child process of a benchmark script, stopped with it: a benchmark stopped by
SIGTERM or Ctrl-C must not leave its job (a trainer, a diagnostic) running on, writing into the same
folder beside the next run."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_kate(args: list[str], hydra_dir: Path) -> None:
    """``python -m kate.cli *args`` in the repository root; a non-zero exit stops the script."""
    command = [sys.executable, "-m", "kate.cli", *args, f"hydra.run.dir={hydra_dir}"]
    print("+", " ".join(command[2:]), flush=True)
    child = subprocess.Popen(command, cwd=ROOT)
    try:
        if child.wait() != 0:
            raise SystemExit(f"{' '.join(args[:2])} failed (exit {child.returncode})")
    finally:
        if child.poll() is None:
            child.terminate()
            child.wait()


def stop_on_sigterm() -> None:
    """SIGTERM exits through ``finally`` blocks (so ``run_kate`` stops its child)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
