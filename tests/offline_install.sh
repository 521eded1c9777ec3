#!/usr/bin/env bash
# The offline-node install route of the README, end to end: fetch (with network) the wheels of
# eggnog's minimal stack for this interpreter's Python and platform (no extras, so no threadpoolctl,
# platformdirs or zarr; plus the mpich wheel, the MPI library mpi4py loads at run time), install
# them into a fresh venv with no index and no pip configuration (only the folder), then run eggnog
# from the checkout on PYTHONPATH, not installed, from a folder outside it, on the CUDA simulator.
# Any failing command stops the run with a line naming it (tests/test_ci_scripts.py fails each in turn).
set -Eeuo pipefail
trap '_status=$?; if [ "$BASHPID" = "$$" ]; then echo "FAILED (exit $_status) at line $LINENO: $BASH_COMMAND"; fi' ERR
cd "$(dirname "$0")/.."
checkout=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 -m venv "$work/venv"
node="$work/venv/bin/python"
version=$("$node" -c 'import sys; print("%d.%d" % sys.version_info[:2])')

echo "== fetch the wheels for Python $version on this platform"
python bin/offline_wheels.py fetch --python "$version" --out "$work/wheels" --with mpich

echo "== install them into a fresh venv from the folder alone"
# no index, no find-links but the folder: pip reads neither the environment nor its config files (nothing
# after this installs)
unset "${!PIP_@}"
export PIP_CONFIG_FILE=/dev/null
python bin/offline_wheels.py install "$work/wheels" --interpreter "$node"

echo "== run from the checkout on PYTHONPATH, outside it, on the simulator"
mkdir "$work/elsewhere"
cd "$work/elsewhere"
export PYTHONPATH="$checkout" NUMBA_ENABLE_CUDASIM=1 EGGNOG_CACHE_DIR="$work/cache" NUMBA_CACHE_DIR="$work/numba"
"$node" - "$checkout" <<'EOF'
import importlib.util
import os
import sys

import eggnog

assert os.path.dirname(os.path.dirname(os.path.abspath(eggnog.__file__))) == sys.argv[1], eggnog.__file__
present = [name for name in ("threadpoolctl", "platformdirs", "zarr") if importlib.util.find_spec(name)]
assert not present, f"the minimal stack should not hold {present}"
print(f"eggnog {eggnog.__version__} from {sys.argv[1]}; no threadpoolctl, platformdirs or zarr")
EOF
# MPI (the mpich wheel), the default corpus and a few noise elements (the simulator runs a kernel
# thread by thread); then the node's CUDA stack
"$node" "$checkout/bin/selfcheck.py" --elements 4096
"$node" "$checkout/bin/selfcheck.py" --gpu
echo "offline install: OK"
