#!/usr/bin/env bash
# One command for a GPU machine: tests/gpu on the GPU (no simulator) and every benchmark at its
# headline size within a 10-minute budget, summarised in bench/results/gpu-<GPU>-<date>.json and .md.
# The plan, the budget and the summary are bench/gpu_run.py's; arguments go to it:
#   bash bench/gpu.sh [--dry-run] [--budget SECONDS] [--only gpu-tests,eggroll,...]
set -euo pipefail
cd "$(dirname "$0")/.."
exec python bench/gpu_run.py "$@"
