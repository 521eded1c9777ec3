"""A faster block runner for numba's CUDA simulator, installed by the suite's conftest, with numba's semantics.

numba's simulator runs a block as one Python thread per CUDA thread, watched by the launching thread, which
sweeps over them without pause to see who waits at syncthreads. That sweep holds the interpreter lock most
of the time: a 256-thread block of the fused EGG kernel took over 10 minutes. Here:
- a syncthreads is a barrier (`_Barrier`): the last running thread to arrive releases the others at once,
  and the launching thread only waits for the threads to end (a sweep paused 5 ms between passes, the
  previous fix, left short kernels waiting on those pauses with the CPU idle);
- during a launch the interpreter switches threads every 50 ms instead of 5: a thread preempted while it
  holds one of the simulator's per-module locks makes every other thread block on that lock in turn;
- the block's threads wait at a gate until all have started: a started thread running the kernel held
  the interpreter lock for up to 50 ms before the next could be started;
- `cuda.shared.array` keys its allocation by the caller's file and line from the caller's frame, not from
  a traceback of the whole stack (pytest's included), read line by line from the sources at every call.
"""

import functools
import sys
import threading

import numpy as np

SWITCH_INTERVAL_S = 0.05


class _Barrier:
    """A block's syncthreads: the last of the running threads to arrive releases the others; a thread that
    ends no longer counts (numba's rule); a thread's error releases every waiter with the simulator's abort."""

    def __init__(self, threads):
        self.cond = threading.Condition()
        self.running = threads
        self.waiting = 0
        self.generation = 0
        self.failed = None  # the thread whose error aborted the block

    def _release(self):
        self.waiting = 0
        self.generation += 1
        self.cond.notify_all()

    def wait(self):
        with self.cond:
            if self.failed is not None:
                raise RuntimeError("abort flag set on syncthreads call")
            self.waiting += 1
            if self.waiting == self.running:
                self._release()
            else:
                generation = self.generation
                while generation == self.generation and self.failed is None:
                    self.cond.wait()
            if self.failed is not None:
                raise RuntimeError("abort flag set on syncthreads clear")

    def leave(self, failed):
        with self.cond:
            self.running -= 1
            if failed and self.failed is None:
                self.failed = threading.current_thread()
                self.cond.notify_all()
            elif self.running and self.waiting == self.running:
                self._release()


@functools.cache  # one class for every launch
def _block_thread():
    from numba.cuda.simulator.kernel import BlockThread

    class Thread(BlockThread):
        barrier = None

        def syncthreads(self):  # syncthreads_count/_and/_or call it too
            self.barrier.wait()

    return Thread


def _run(self, grid_point, *args):
    points = list(np.ndindex(*self._block_dim))
    barrier, gate = _Barrier(len(points)), threading.Event()

    def target():
        gate.wait()
        failed = True
        try:
            self._f(*args)
            failed = False
        finally:
            barrier.leave(failed)

    thread_type = _block_thread()
    threads = [thread_type(target, self, grid_point, point, self._debug) for point in points]
    for t in threads:
        t.barrier = barrier
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        for t in threads:
            t.start()
        gate.set()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(previous)
    if barrier.failed is not None:  # as numba does: the first error, with its thread and block named
        raise barrier.failed.exception[0].with_traceback(barrier.failed.exception[1])


def _shared_array(self, shape, dtype, alignment=None):
    """numba's FakeCUDAShared.array with the caller's (file, line) read from its frame."""
    if alignment is not None:
        raise RuntimeError("Array alignment is not supported in cudasim")
    from numba.cuda.simulator import kernelapi  # its own types and numpy_support, whichever numba it is

    if isinstance(dtype, kernelapi.types.Type):
        dtype = kernelapi.numpy_support.as_dtype(dtype)
    if shape == 0:  # dynamic shared memory: one buffer, as many whole elements as fit
        return np.frombuffer(self._dynshared.data, dtype=dtype, count=self._dynshared_size // dtype.itemsize)
    caller = sys._getframe(1)
    key = (caller.f_code.co_filename, caller.f_lineno)
    found = self._allocations.get(key)
    if found is None:
        found = self._allocations[key] = np.empty(shape, dtype)
    return found


def install():
    from numba.cuda.simulator.kernel import BlockManager
    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    BlockManager.run = _run
    FakeCUDAShared.array = _shared_array
