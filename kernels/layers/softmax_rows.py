"""Softmax along each row (fp32), forward and backward:

    softmax_rows(x (rows, d))                 p = softmax(x) along each row (row maximum subtracted first)
    softmax_rows_backward(dp, p)              dx = p * (dp - sum_j dp p), from the output p

On the GPU one block of ROW_THREADS threads per row shares the block reductions of
`reductions`. References compute in float64; twins agree to 1e-5 relative + 1e-6 absolute, and the
reference backward matches central finite differences (tests/test_float_layers.py).

Shared memory: only the block reductions' array of one float per thread, each thread writing its own
slot and the tree reading slots t and t + step in one phase (consecutive words): conflict-free.
"""

import math

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Float64Array, FloatArray
from eggnog.kernels.core.cpu_jit import parallel_jit
from eggnog.kernels.core.cuda_api import F32_2D, cuda, device_function, f64, kernel
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.reductions import block_total, row_max_and_exp_sum
from eggnog.kernels.core.registry import op, registered

ROW_THREADS = 128  # one block per row; a power of two for the tree reductions
TOLERANCE = (1e-5, 1e-6)


def _softmax_rows_cases(rng):
    """Several rows (blocks); widths of one entry, below, at and across the block's threads."""
    for rows, width in ((2, 1), (3, 127), (2, 128), (4, 300)):
        yield ((rng.normal(size=(rows, width)) * 3.0).astype(np.float32),)


def _softmax_rows_backward_cases(rng):
    for (x,) in _softmax_rows_cases(rng):
        yield rng.normal(size=x.shape).astype(np.float32), reference_softmax_rows(x).astype(np.float32)


@op(cases=_softmax_rows_cases, tolerance=TOLERANCE, args={"x": "float[rows, d]"})
def reference_softmax_rows(x: FloatArray) -> Float64Array:
    """softmax along each row of x (its maximum subtracted first), (rows, d) float32 (float64 here): each
    row of the result is positive and sums to one."""
    z = f64(x)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@op(cases=_softmax_rows_backward_cases, tolerance=TOLERANCE, args={"dp": "float[rows, d]", "p": "float[rows, d]"})
def reference_softmax_rows_backward(dp: FloatArray, p: FloatArray) -> Float64Array:
    """The gradient through softmax_rows from its output: dx = p * (dp - sum_j dp p) per row, (rows, d)
    float32 (float64 here).

    dp: the loss's gradient with respect to p; p: softmax_rows' output (not its input)."""
    dp, p = f64(dp), f64(p)
    return p * (dp - (dp * p).sum(axis=1, keepdims=True))


@parallel_jit
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


@parallel_jit
def _cpu_softmax_rows_backward(dp, p, dx):
    n, d = p.shape
    for i in numba.prange(n):
        dot = np.float32(0.0)
        for j in range(d):
            dot += dp[i, j] * p[i, j]
        for j in range(d):
            dx[i, j] = p[i, j] * (dp[i, j] - dot)


@op
def cpu_softmax_rows(x: Float32Array) -> Float32Array:
    p = np.empty(x.shape, np.float32)
    _cpu_softmax_rows(x, p)
    return p


@op
def cpu_softmax_rows_backward(dp: Float32Array, p: Float32Array) -> Float32Array:
    dx = np.empty(p.shape, np.float32)
    _cpu_softmax_rows_backward(dp, p, dx)
    return dx


@kernel((F32_2D, F32_2D), block=ROW_THREADS)
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


@device_function
def softmax_backward_row(dp, p, dx, i, partial, t):
    """dx[i] = p[i] * (dp[i] - sum_j dp[i, j] p[i, j]) by the threads of one block sharing `partial`."""
    threads = partial.shape[0]
    acc = np.float32(0.0)
    for j in range(t, p.shape[1], threads):
        acc += dp[i, j] * p[i, j]
    dot = block_total(acc, partial, t)
    for j in range(t, p.shape[1], threads):
        dx[i, j] = p[i, j] * (dp[i, j] - dot)


@kernel((F32_2D, F32_2D, F32_2D), block=ROW_THREADS)
def softmax_rows_backward_cuda(dp, p, dx):
    partial = cuda.shared.array(ROW_THREADS, numba.float32)
    softmax_backward_row(dp, p, dx, cuda.blockIdx.x, partial, cuda.threadIdx.x)


@op
def cuda_softmax_rows(x: BackendArray) -> BackendArray:
    p = cuda.device_array(x.shape, np.float32)
    softmax_rows_cuda[x.shape[0], ROW_THREADS](x, p)
    return p


@op
def cuda_softmax_rows_backward(dp: BackendArray, p: BackendArray) -> BackendArray:
    dx = cuda.device_array(p.shape, np.float32)
    softmax_rows_backward_cuda[p.shape[0], ROW_THREADS](dp, p, dx)
    return dx

# the ops of this module by name, for callers: softmax_rows(kernels, ...)
softmax_rows = registered(reference_softmax_rows)
softmax_rows_backward = registered(reference_softmax_rows_backward)
