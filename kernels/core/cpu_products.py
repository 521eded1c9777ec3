"""fp32 matrix products of the CPU twins, split over the cores by hand.

BLAS runs on one thread in this process (backend.py: OpenBLAS's own pool spins after each product and
starves numba's loops). A large product is therefore cut into row blocks of its output, and each block
is one single-threaded BLAS call, the first on the calling thread, the others on a small pool: NumPy
releases the interpreter lock inside the call, the threads sleep between products, and the result is
the same as one call's up to the summation order BLAS picks per block (each output element is still
one dot product over the full inner axis).

    product(a, b)          a @ b for 2-D fp32 arrays (any strides, e.g. transposed views), C-ordered
    batched_product(a, b)  np.matmul(a, b) for 3-D ones, cut along the batch axis the same way

The split is used only while BLAS is at one thread (a count the user chose for BLAS is left alone) and
only for products of at least SPLIT_MACS multiply-adds (below that the hand-off costs more than it saves).
"""

import os
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

SPLIT_MACS = 1 << 20
_pool = None
_parts = None


def parts():
    """How many blocks a large product is cut into: numba's thread count while BLAS is at one thread,
    else 1 (BLAS threads itself)."""
    global _parts
    if _parts is None:
        from eggnog.kernels.core.backend import blas_thread_limit

        _parts = max(1, int(numba.config.NUMBA_NUM_THREADS)) if blas_thread_limit(os.environ) == 1 else 1
    return _parts


def _workers(n):
    global _pool
    if _pool is None or _pool._max_workers < n:
        _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="eggnog-product")
    return _pool


def _split(count, n, block):
    """block(lo, hi) for n ranges covering [0, count): the first on this thread, the rest on the pool."""
    edges = np.linspace(0, count, n + 1).astype(np.int64)
    jobs = [_workers(n - 1).submit(block, lo, hi) for lo, hi in zip(edges[1:-1], edges[2:])]
    block(0, edges[1])
    for job in jobs:
        job.result()


def product(a, b):
    rows, inner = a.shape
    out = np.empty((rows, b.shape[1]), np.float32)
    n = parts()
    if n == 1 or rows < 2 * n or rows * inner * b.shape[1] < SPLIT_MACS:
        np.matmul(a, b, out=out)
    else:
        _split(rows, n, lambda lo, hi: np.matmul(a[lo:hi], b, out=out[lo:hi]))
    return out


def batched_product(a, b):
    batch, rows, inner = a.shape
    out = np.empty((batch, rows, b.shape[2]), np.float32)
    n = min(parts(), batch)
    if n == 1 or batch * rows * inner * b.shape[2] < SPLIT_MACS:
        np.matmul(a, b, out=out)
    else:
        _split(batch, n, lambda lo, hi: np.matmul(a[lo:hi], b[lo:hi], out=out[lo:hi]))
    return out
