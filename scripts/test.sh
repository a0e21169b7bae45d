#!/usr/bin/env bash
# Run the test suite; sets up whatever is missing first (a fresh clone needs nothing else).
# Without arguments it runs the default tier: every test not marked `model` or `slow` (logic on
# fake models, seconds-long real parts). Extra arguments go to pytest instead, e.g.
# `bash scripts/test.sh -m model` for the tests that load real language models, `-m slow` for the
# heavy ones (vLLM's CPU server).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --if-needed
bash scripts/setup_appworld.sh  # AppWorld's own environment: its installation is tested too
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if [ "$#" -eq 0 ]; then set -- -m "not slow and not model"; fi
exec .venv/bin/python -m pytest -q "$@"
