#!/usr/bin/env bash
# AppWorld's own environment, on request: AppWorld pins pydantic < 2, which kate's environment
# (bfcl-eval) cannot share, so it gets .venv-appworld and kate talks to it through a worker process
# (kate/appworld/worker.py). `appworld install` unpacks the apps offline; the task data is a
# separate download (`.venv-appworld/bin/appworld download data --root "$APPWORLD_ROOT"` on a
# machine with network), placed under $APPWORLD_ROOT/data (default ~/.cache/kate/appworld/data).
# Idempotent: a second run returns in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

PY=${KATE_PYTHON:-$(command -v python3.11 || command -v python3)}
VENV=.venv-appworld
APPWORLD_SPEC=${KATE_APPWORLD_SPEC:-appworld==0.1.3.post1}
ROOT=${APPWORLD_ROOT:-$HOME/.cache/kate/appworld}
STAMP=$VENV/.kate-appworld-$(echo "$APPWORLD_SPEC" | cat - scripts/setup_appworld.sh | sha256sum | cut -c1-16)

if [ ! -x "$VENV/bin/python" ]; then
  echo "[appworld] creating $VENV with $PY"
  "$PY" -m venv "$VENV"
fi
if [ ! -f "$STAMP" ]; then
  echo "[appworld] installing $APPWORLD_SPEC"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet "$APPWORLD_SPEC"
  mkdir -p "$ROOT"
  echo "[appworld] appworld install (unpacks the apps; offline)"
  (cd "$ROOT" && APPWORLD_ROOT="$ROOT" "$REPO/$VENV/bin/appworld" install)
  rm -f "$VENV"/.kate-appworld-*
  touch "$STAMP"
fi
if [ -d "$ROOT/data/tasks" ]; then
  echo "[appworld] ready; task data found at $ROOT/data"
else
  echo "[appworld] ready; task data NOT found at $ROOT/data (see README: AppWorld)"
fi
