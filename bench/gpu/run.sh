#!/usr/bin/env bash
# The commands for a GPU node, each within one command's limit of a short GPU slot (after
# `python3 bin/selfcheck.py --gpu`):
#   bash bench/gpu/run.sh --quick --out DIR  # selfcheck, the riskiest GPU tests, EGGROLL 6x256: 150 s
#   bash bench/gpu/run.sh --profile --out DIR  # where the time goes, kernel by kernel: 300 s
#   bash bench/gpu/run.sh --out DIR [--nano-egg DIR]  # the other GPU tests, the benchmarks beside peers: 450 s
#   bash bench/gpu/run.sh --first-contact --out DIR [--nano-egg DIR]  # one pass after kernel changes: tests,
#       probes, tuner, benchmarks beside peers, profile, refit, goal rows predicted against measured: 480 s
# Plans, budgets, summaries and the log are bench/gpu/run.py's; arguments go to it (--dry-run,
# --budget SECONDS, --only STEP,...). Only bash builtins and python3: such nodes may have no more.
set -euo pipefail
here=${BASH_SOURCE[0]%/*}
[ "$here" = "${BASH_SOURCE[0]}" ] && here=.
# no cd: a relative --out is the caller's; the checkout on PYTHONPATH finds the bench package
root=$(cd "$here/../.." && pwd)
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" exec python3 -m bench.gpu.run "$@"
