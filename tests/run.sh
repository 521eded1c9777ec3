#!/usr/bin/env bash
# The whole test suite, as the README runs it: serial tests (CUDA kernels on numba's simulator,
# PTX compiled for sm_90) beside the fault suites; then, when a GPU is visible, the GPU layer on it
# (kernels at full size against their CPU twins); then the MPI tests on 4 ranks. Any failure, including
# pytest's "no tests collected" (exit 5), fails the run, with a line naming the step (tests/test_ci_scripts.py).
set -Eeuo pipefail
trap '_status=$?; if [ "$BASHPID" = "$$" ]; then echo "FAILED (exit $_status) at line $LINENO: $BASH_COMMAND"; fi' ERR
cd "$(dirname "$0")/.."
export EGGNOG_REQUIRE_PTX=1 EGGNOG_PROGRESS=0

failed() {  # exit status, then the command: say which failed, and stop
    if [ "$1" -eq 5 ]; then echo "pytest collected no tests: that is a failure here"; fi
    echo "FAILED (exit $1): ${*:2}"
    exit 1
}

step() {
    echo "== $*"
    local rc=0
    "$@" || rc=$?
    if [ "$rc" -ne 0 ]; then failed "$rc" "$@"; fi
}

gpu_visible() {
    NUMBA_ENABLE_CUDASIM=0 python -c \
        "from eggnog.kernels.core.backend import gpu_usable; raise SystemExit(0 if gpu_usable() else 1)" 2>/dev/null
}

# Two workers, each taking whole files (module-level fixtures and the kernel-launch registry stay
# within one process); most serial tests are single-threaded compiles and simulator runs. The fault
# suites (clusters of processes killed and slowed on purpose, with deadlines) run beside them at normal
# priority, the serial layer at idle priority (`chrt --idle`: it gets only the CPU time the clusters
# leave, so their deadlines hold, and they leave most of it). The serial tests with deadlines of their
# own run last, after the fault suites (tests/conftest.py, DEADLINES_LAST). The serial layer's output is
# printed when it ends.
set -m  # the serial layer in a process group of its own, stopped with its workers if the fault suites fail
serial_log=$(mktemp)
serial=(python -m pytest -q -n "${EGGNOG_TEST_WORKERS:-2}" --dist loadfile tests --ignore=tests/faults)
if chrt --idle 0 true 2> /dev/null; then idle=(chrt --idle 0); else idle=(nice -n 19); fi  # where no chrt
echo "== ${serial[*]} (beside the fault suites, at idle priority)"
"${idle[@]}" "${serial[@]}" > "$serial_log" 2>&1 &
serial_pid=$!
trap 'kill -- -"$serial_pid" 2> /dev/null || true; rm -f "$serial_log"' EXIT
step python -m pytest -q tests/faults
serial_rc=0
wait "$serial_pid" || serial_rc=$?
cat "$serial_log"
if [ "$serial_rc" -ne 0 ]; then failed "$serial_rc" "${serial[@]}"; fi
if gpu_visible; then
    echo "GPU visible: running the GPU layer (tests/gpu) on it"
    step env NUMBA_ENABLE_CUDASIM=0 EGGNOG_REQUIRE_GPU=1 python -m pytest -q tests/gpu
    gpu_layer="ran on the GPU"
else
    echo "no GPU visible: the GPU layer (tests/gpu) was skipped"
    gpu_layer="skipped (no GPU)"
fi
# One numba thread per rank: 4 ranks share this machine's cores. Every MPI test checks the world
# has EGGNOG_MPI_RANKS ranks (a launcher of another MPI would start 4 worlds of one).
step timeout 900 env NUMBA_NUM_THREADS=1 EGGNOG_MPI_RANKS=4 mpiexec -n 4 python -m pytest -q tests/mpi --timeout=600
echo "all test layers passed; GPU layer: $gpu_layer"
