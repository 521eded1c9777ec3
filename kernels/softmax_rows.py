"""Softmax along each row (fp32), forward and backward, as a float64 NumPy reference
(`reference_*`), a numba CPU twin (`cpu_*`) and a CUDA kernel (`cuda_*`):

    p = softmax(x) along each row              (the row maximum is subtracted first)
    dx = p * (dp - sum_j dp p)                 the backward, from the output p

Twins agree with the reference to 1e-5 of the largest entry + 1e-6 relative, and the reference
backward matches central finite differences (tests/test_dnc.py).
"""

import math

import numba
import numpy as np

from eggnog.kernels.cuda_api import SIMULATED, cuda, kernel
from eggnog.kernels.reductions import block_sum, row_max_and_exp_sum

# Threads per block (one block per row, a power of two for the tree reductions). The simulator runs
# every thread as a Python thread, so it gets narrower blocks; the code path is the same for any power of two.
ROW_THREADS = 32 if SIMULATED else 128

F32_2D = numba.float32[:, ::1]


def _f64(a):
    return np.asarray(a, np.float64)


def reference_softmax_rows(x):
    z = _f64(x)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def reference_softmax_rows_backward(dp, p):
    dp, p = _f64(dp), _f64(p)
    return p * (dp - (dp * p).sum(axis=1, keepdims=True))


@numba.njit(parallel=True)
def _cpu_softmax_rows(x, p):
    n, d = x.shape
    for i in numba.prange(n):
        top = x[i, 0]
        for j in range(d):
            top = max(top, x[i, j])
        total = np.float32(0.0)
        for j in range(d):
            p[i, j] = math.exp(x[i, j] - top)
            total += p[i, j]
        inv = np.float32(1.0) / total
        for j in range(d):
            p[i, j] *= inv


@numba.njit(parallel=True)
def _cpu_softmax_rows_backward(dp, p, dx):
    n, d = p.shape
    for i in numba.prange(n):
        dot = np.float32(0.0)
        for j in range(d):
            dot += dp[i, j] * p[i, j]
        for j in range(d):
            dx[i, j] = p[i, j] * (dp[i, j] - dot)


def cpu_softmax_rows(x):
    p = np.empty_like(x)
    _cpu_softmax_rows(x, p)
    return p


def cpu_softmax_rows_backward(dp, p):
    dx = np.empty_like(p)
    _cpu_softmax_rows_backward(dp, p, dx)
    return dx


@kernel((F32_2D, F32_2D))
def softmax_rows_cuda(x, p):
    """One block per row: a max, a sum of exponentials, then the normalised values."""
    i = cuda.blockIdx.x
    t = cuda.threadIdx.x
    d = x.shape[1]
    partial = cuda.shared.array(ROW_THREADS, numba.float32)
    top, total = row_max_and_exp_sum(x, i, partial, t)
    inv = np.float32(1.0) / total
    for j in range(t, d, ROW_THREADS):
        p[i, j] = math.exp(x[i, j] - top) * inv


@kernel((F32_2D, F32_2D, F32_2D))
def softmax_rows_backward_cuda(dp, p, dx):
    i = cuda.blockIdx.x
    t = cuda.threadIdx.x
    d = p.shape[1]
    partial = cuda.shared.array(ROW_THREADS, numba.float32)
    acc = np.float32(0.0)
    for j in range(t, d, ROW_THREADS):
        acc += dp[i, j] * p[i, j]
    partial[t] = acc
    dot = block_sum(partial, t)
    for j in range(t, d, ROW_THREADS):
        dx[i, j] = p[i, j] * (dp[i, j] - dot)


def cuda_softmax_rows(x):
    p = cuda.device_array(x.shape, np.float32)
    softmax_rows_cuda[x.shape[0], ROW_THREADS](x, p)
    return p


def cuda_softmax_rows_backward(dp, p):
    dx = cuda.device_array(p.shape, np.float32)
    softmax_rows_backward_cuda[p.shape[0], ROW_THREADS](dp, p, dx)
    return dx
