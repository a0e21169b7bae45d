"""Does this machine run the installed llama.cpp build? Exit 0 when one token of the small model
generates, 2 when the build cannot run here (an illegal instruction kills the child process), 1 on
any other failure (printed)."""

import signal
import subprocess
import sys

CHILD = """
from kate.llm.llamacpp import LlamaCppChatModel
from kate.llm.registry import SMALL_TEST_MODEL
LlamaCppChatModel(SMALL_TEST_MODEL, n_ctx=256, max_parallel=1).chat([{"role": "user", "content": "hi"}], max_tokens=1)
"""

result = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
if result.returncode == -signal.SIGILL:
    print("[setup] llama.cpp's build dies here with an illegal instruction")
    sys.exit(2)
if result.returncode != 0:
    print(f"[setup] llama.cpp check failed (exit {result.returncode}): {result.stderr.strip()[-500:]}")
sys.exit(0 if result.returncode == 0 else 1)
