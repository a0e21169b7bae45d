#!/usr/bin/env bash
# Run the test suite; sets up whatever is missing first (a fresh clone needs nothing else).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m slow` for the heavy tests, or
# `bash scripts/test.sh -m "not slow and not model"` for the fast tier (fake models only).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --if-needed
bash scripts/setup_appworld.sh  # AppWorld's own environment: its installation is tested too
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if [ "$#" -eq 0 ]; then set -- -m "not slow"; fi
exec .venv/bin/python -m pytest -q "$@"
