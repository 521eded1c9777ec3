"""The CPU threads of the kernels (numba's pool) per process. By default the cores this process may
use are shared out over the ranks of its node, so `mpiexec -n 4` on 4 cores runs 4 × 1 threads, not
4 × 4 fighting over the same cores; `--threads N` sets it; NUMBA_NUM_THREADS caps both."""

import os

from eggnog.runtime.errors import BadInput


def usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def thread_count(requested, local_size, limit):
    """`requested` (None: this rank's share of the node's cores), within numba's pool of `limit`."""
    if requested is None:
        return max(1, min(limit, usable_cores() // max(local_size, 1)))
    if not 1 <= requested <= limit:
        raise BadInput(f"--threads must lie in [1, {limit}] (numba's pool: NUMBA_NUM_THREADS or the cores), "
                       f"got {requested}")
    return requested


def set_threads(requested, world):
    """Size numba's pool for this rank; returns the count."""
    import numba

    count = thread_count(requested, world.local_size, numba.config.NUMBA_NUM_THREADS)
    numba.set_num_threads(count)
    return count
