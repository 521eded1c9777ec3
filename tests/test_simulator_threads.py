"""The suite's block runner for numba's simulator (tests/simulator_threads.py) keeps numba's semantics: a
syncthreads waits for every running thread, threads that have ended no longer count, shared arrays are one
per source line, and a thread's error ends the launch with that error, its thread named."""

import numpy as np
import pytest

from eggnog.kernels.core.cuda_api import SIMULATED, cuda

pytestmark = [pytest.mark.skipif(not SIMULATED, reason="the simulator's block runner"),
              pytest.mark.timeout(60)]  # a barrier that waits for an ended thread never returns
THREADS = 64


@cuda.jit
def _reverse_through_shared(out, rounds):
    shared = cuda.shared.array(THREADS, np.int64)
    t = cuda.threadIdx.x
    value = t
    for _ in range(rounds):
        shared[t] = value
        cuda.syncthreads()
        value = shared[THREADS - 1 - t] + 1
        cuda.syncthreads()
    out[cuda.blockIdx.x, t] = value


@cuda.jit
def _half_leave_early(out):
    shared = cuda.shared.array(THREADS, np.int64)
    t = cuda.threadIdx.x
    shared[t] = t
    if t % 2:
        return
    cuda.syncthreads()
    out[t] = shared[(t + 2) % THREADS] + cuda.syncthreads_count(1)


@cuda.jit
def _one_thread_fails(out):
    t = cuda.threadIdx.x
    cuda.syncthreads()
    if t == 5:
        raise ValueError("planted")
    cuda.syncthreads()
    out[t] = 1


def test_every_thread_sees_the_others_writes_after_each_syncthreads():
    out = np.zeros((2, THREADS), np.int64)
    _reverse_through_shared[2, THREADS](out, 3)
    t = np.arange(THREADS)
    assert np.array_equal(out, np.tile((THREADS - 1 - t) + 3, (2, 1)))  # odd rounds: mirrored, plus one a round


def test_threads_that_ended_are_not_waited_for():
    out = np.full(THREADS, -1, np.int64)
    _half_leave_early[1, THREADS](out)
    t = np.arange(THREADS)
    even = t % 2 == 0
    assert np.array_equal(out[even], (t[even] + 2) % THREADS + THREADS // 2) and np.all(out[~even] == -1)


def test_a_thread_error_ends_the_launch_naming_its_thread():
    with pytest.raises(ValueError, match=r"tid=\[5, 0, 0\] ctaid=\[0, 0, 0\]: planted"):
        _one_thread_fails[1, THREADS](np.zeros(THREADS, np.int64))
