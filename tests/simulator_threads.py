"""A gentler block runner for numba's CUDA simulator, installed by the suite's conftest.

The simulator runs a block as one Python thread per CUDA thread, watched by the launching thread, which
sweeps over them without pause to see who waits at syncthreads. That sweep holds the interpreter lock
most of the time: a 256-thread block of the fused EGG kernel took over 10 minutes in the suite and 2 with
the sweep paused. Two changes, same semantics:
- the watcher sleeps between sweeps (a syncthreads is released a few milliseconds later, not at once);
- during a launch the interpreter switches threads every 50 ms instead of 5: a thread preempted while it
  holds one of the simulator's per-module locks makes every other thread block on that lock in turn.
Measured on one 1-layer, 1-byte fused EGG case: 10+ min -> 35 s, same result bit for bit.
"""

import sys
import time

import numpy as np

SWEEP_PAUSE_S = 0.005
SWITCH_INTERVAL_S = 0.05


def _run(self, grid_point, *args):
    from numba.cuda.simulator.kernel import BlockThread

    def target():
        self._f(*args)

    threads = [BlockThread(target, self, grid_point, point, self._debug) for point in np.ndindex(*self._block_dim)]
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        for t in threads:
            t.start()
        live = set(threads)
        while live:
            blocked = set()
            for t in live:
                if t.exception:
                    for other in threads:  # as numba does: abort the others, raise this thread's error
                        other.abort = True
                        other.syncthreads_blocked = False
                        other.syncthreads_event.set()
                    raise t.exception[0].with_traceback(t.exception[1])
                if t.syncthreads_blocked:
                    blocked.add(t)
            live = {t for t in live if t in blocked or t.is_alive()}
            if live and live == blocked:
                for t in blocked:
                    t.syncthreads_blocked = False
                    t.syncthreads_event.set()
            else:
                time.sleep(SWEEP_PAUSE_S)
        for t in threads:
            if t.exception:
                raise t.exception[0].with_traceback(t.exception[1])
    finally:
        sys.setswitchinterval(previous)


def install():
    from numba.cuda.simulator.kernel import BlockManager

    BlockManager.run = _run
