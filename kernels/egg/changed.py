"""How many int8 parameters an update moved, counted where they live:

    count_changed(before int8[n], after int8[n]) -> int, the number of i with before[i] != after[i].

EGGROLL reports the fraction of parameters each step moved; counting on the device reads 8 bytes back
instead of copying the whole vector to the host twice a step.
"""

import numba
import numpy as np

from eggnog.kernels.core.array_types import Int8Array
from eggnog.kernels.core.cpu_jit import parallel_jit
from eggnog.kernels.core.cuda_api import I8_1D, I64_1D, cuda, device_zeros, kernel
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.reductions import block_sum
from eggnog.kernels.core.registry import op, registered

THREADS = 256  # a power of two for the tree sum
# grid-stride beyond: a few loads per thread even at an EGG's millions of parameters, the same launch
# on the simulator (its tests stride too, within its thread budget)
MAX_BLOCKS = 8


def _cases(rng):
    """One element; no change; a few (longer than one grid-stride); most."""
    for n, moved in ((1, 1.0), (300, 0.0), (5000, 0.01), (777, 0.9)):
        before = rng.integers(-127, 128, n, dtype=np.int8)
        after = np.where(rng.random(n) < moved, np.clip(before.astype(np.int16) + 1, -127, 127), before)
        yield before, after.astype(np.int8)


@op(cases=_cases, args={"before": "int8[n]", "after": "int8[n]"})
def reference_count_changed(before: Int8Array, after: Int8Array) -> int:
    """int: how many of the n parameters differ between `before` (a copy of the flat int8 buffer taken
    before an update) and `after` (the buffer after it)."""
    return int(np.count_nonzero(np.asarray(before) != np.asarray(after)))


@parallel_jit
def _cpu_count(before, after):
    total = 0
    for i in numba.prange(before.shape[0]):
        total += before[i] != after[i]
    return total


@op
def cpu_count_changed(before: Int8Array, after: Int8Array) -> int:
    return int(_cpu_count(np.ascontiguousarray(before, np.int8), np.ascontiguousarray(after, np.int8)))


@kernel((I8_1D, I8_1D, I64_1D), float64_free=True, block=THREADS)
def count_changed_cuda(before, after, out):
    """Each thread counts a grid-stride slice, the block sums its counts, one atomic add per block."""
    t = cuda.threadIdx.x
    partial = cuda.shared.array(THREADS, numba.int64)
    count = 0
    for i in range(cuda.grid(1), before.shape[0], cuda.gridsize(1)):
        if before[i] != after[i]:
            count += 1
    partial[t] = count
    total = block_sum(partial, t)
    if t == 0:
        cuda.atomic.add(out, 0, total)


@op
def cuda_count_changed(before: BackendArray, after: BackendArray) -> int:
    """before and after on the device; one int64 comes back."""
    out = device_zeros(1, np.int64)
    grid = max(1, min(MAX_BLOCKS, (before.shape[0] + THREADS - 1) // THREADS))
    count_changed_cuda[grid, THREADS](before, after, out)
    return int(out.copy_to_host()[0])

# the ops of this module by name, for callers: count_changed(kernels, ...)
count_changed = registered(reference_count_changed)
