#!/usr/bin/env bash
# The whole test suite, as the README runs it: serial tests (CUDA kernels on numba's simulator,
# PTX compiled for sm_90), then the MPI tests on 4 ranks. Any failure, including pytest's
# "no tests collected" (exit 5), fails the run.
set -uo pipefail
cd "$(dirname "$0")/.."
export EGGNOG_REQUIRE_PTX=1 EGGNOG_PROGRESS=0

step() {
    echo "== $*"
    "$@"
    local rc=$?
    if [ "$rc" -ne 0 ]; then
        [ "$rc" -eq 5 ] && echo "pytest collected no tests: that is a failure here"
        echo "FAILED (exit $rc): $*"
        exit 1
    fi
}

step python -m pytest -q tests
# One numba thread per rank: 4 ranks share this machine's cores.
step timeout 900 env NUMBA_NUM_THREADS=1 mpiexec -n 4 python -m pytest -q tests/mpi --timeout=600
echo "all test layers passed"
