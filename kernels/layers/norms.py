"""Row normalisations (fp32), forward and backward: RMSNorm (the MinGRU LM) and LayerNorm (the DNC).
Rows are the leading axis, features the contiguous one; one CUDA block per row, its threads sharing
one block reduction (`reductions.block_total`).

    rmsnorm:    y = x * rstd * w,              rstd = 1/sqrt(mean(x^2) + RMS_EPS); returns y, rstd
    layernorm:  y = (x - mean) * rstd * w + b, biased variance, eps LN_EPS;     returns y, mean, rstd

The backwards return dx and the column sums of the per-row weight (and bias) gradients. References
compute in float64; the twins agree to the registered tolerances.
"""

import math

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Float64Array, FloatArray
from eggnog.kernels.core.cpu_jit import parallel_jit
from eggnog.kernels.core.cuda_api import F32_1D, F32_2D, cuda, f64, kernel
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.reductions import block_total
from eggnog.kernels.core.registry import op, registered
from eggnog.kernels.layers.elementwise import cpu_column_sum, cuda_column_sum

RMS_EPS = float(np.finfo(np.float32).eps)  # torch's RMSNorm default for float32
LN_EPS = 1e-5  # torch.nn.LayerNorm default
ROW_THREADS = 128  # one block per row; a power of two for the tree sums
TOLERANCE = (2e-5, 2e-5)


def _cases(rng, backward, vectors):
    """Rows over several blocks; widths below, at and across the block's 128 threads."""
    for rows, width in ((3, 1), (2, 127), (5, 128), (3, 300)):
        x = rng.normal(size=(rows, width)).astype(np.float32)
        params = [(1.0 + 0.5 * rng.normal(size=width)).astype(np.float32) for _ in range(vectors)]
        if not backward:
            yield (x, *params)
        else:
            yield rng.normal(size=(rows, width)).astype(np.float32), x, params[0]


def _rmsnorm_cases(rng):
    yield from _cases(rng, False, 1)


def _rmsnorm_backward_cases(rng):
    for dy, x, w in _cases(rng, True, 1):
        yield dy, x, w, reference_rmsnorm(x, w)[1].astype(np.float32)


def _layernorm_cases(rng):
    yield from _cases(rng, False, 2)


def _layernorm_backward_cases(rng):
    for dy, x, w in _cases(rng, True, 1):
        _, mean, rstd = reference_layernorm(x, w, np.zeros_like(w))
        yield dy, x, w, mean.astype(np.float32), rstd.astype(np.float32)


# ---- RMSNorm -------------------------------------------------------------------------------------------

@op(cases=_rmsnorm_cases, tolerance=TOLERANCE, args={"x": "float[rows, d]", "w": "float[d]"})
def reference_rmsnorm(x: FloatArray, w: FloatArray) -> tuple[Float64Array, Float64Array]:
    """RMSNorm of each row: (y (rows, d), rstd (rows,)), float32 (float64 here), y = x * rstd * w with
    rstd = 1 / sqrt(mean(x^2) + RMS_EPS) over the row; rstd is what rmsnorm_backward needs.

    x: rows of features; w: the norm's weight, one per feature."""
    x64 = f64(x)
    rstd = 1.0 / np.sqrt((x64 * x64).mean(axis=1) + RMS_EPS)
    return x64 * rstd[:, None] * f64(w), rstd


@op(cases=_rmsnorm_backward_cases, tolerance=TOLERANCE,
    args={"dy": "float[rows, d]", "x": "float[rows, d]", "w": "float[d]", "rstd": "float[rows]"})
def reference_rmsnorm_backward(dy: FloatArray, x: FloatArray, w: FloatArray,
                               rstd: FloatArray) -> tuple[Float64Array, Float64Array]:
    """The gradients of rmsnorm: (dx (rows, d), dw (d,)), float32 (float64 here).

    dy: the loss's gradient with respect to y; x, w: the forward's input and weight; rstd: the forward's
    second result."""
    dy, x, w, rstd = (f64(a) for a in (dy, x, w, rstd))
    dyw = dy * w
    dx = rstd[:, None] * dyw - x * rstd[:, None] ** 3 * (dyw * x).mean(axis=1, keepdims=True)
    return dx, (dy * x * rstd[:, None]).sum(axis=0)


@parallel_jit
def _cpu_rmsnorm(x, w, y, rstd):
    n, d = x.shape
    for i in numba.prange(n):
        acc = np.float32(0.0)
        for j in range(d):
            acc += x[i, j] * x[i, j]
        r = np.float32(1.0) / math.sqrt(acc / np.float32(d) + np.float32(RMS_EPS))
        rstd[i] = r
        for j in range(d):
            y[i, j] = x[i, j] * r * w[j]


@op
def cpu_rmsnorm(x: Float32Array, w: Float32Array) -> tuple[Float32Array, Float32Array]:
    y, rstd = np.empty_like(x), np.empty(x.shape[0], np.float32)
    _cpu_rmsnorm(x, w, y, rstd)
    return y, rstd


@parallel_jit
def _cpu_rmsnorm_backward(dy, x, w, rstd, dx, dw_rows):
    n, d = x.shape
    for i in numba.prange(n):
        dot = np.float32(0.0)
        for j in range(d):
            dot += dy[i, j] * w[j] * x[i, j]
        r = rstd[i]
        scale = r * r * r * dot / np.float32(d)
        for j in range(d):
            dx[i, j] = r * dy[i, j] * w[j] - x[i, j] * scale
            dw_rows[i, j] = dy[i, j] * x[i, j] * r


@op
def cpu_rmsnorm_backward(dy: Float32Array, x: Float32Array, w: Float32Array,
                         rstd: Float32Array) -> tuple[Float32Array, Float32Array]:
    dx, dw_rows = np.empty_like(x), np.empty_like(x)
    _cpu_rmsnorm_backward(dy, x, w, rstd, dx, dw_rows)
    return dx, cpu_column_sum(dw_rows)


@kernel((F32_2D, F32_1D, F32_2D, F32_1D), block=ROW_THREADS)
def rmsnorm_cuda(x, w, y, rstd):
    i, t, d = cuda.blockIdx.x, cuda.threadIdx.x, x.shape[1]
    partial = cuda.shared.array(ROW_THREADS, numba.float32)
    acc = np.float32(0.0)
    for j in range(t, d, ROW_THREADS):
        acc += x[i, j] * x[i, j]
    r = np.float32(1.0) / math.sqrt(block_total(acc, partial, t) / np.float32(d) + np.float32(RMS_EPS))
    if t == 0:
        rstd[i] = r
    for j in range(t, d, ROW_THREADS):
        y[i, j] = x[i, j] * r * w[j]


@kernel((F32_2D, F32_2D, F32_1D, F32_1D, F32_2D, F32_2D), block=ROW_THREADS)
def rmsnorm_backward_cuda(dy, x, w, rstd, dx, dw_rows):
    i, t, d = cuda.blockIdx.x, cuda.threadIdx.x, x.shape[1]
    partial = cuda.shared.array(ROW_THREADS, numba.float32)
    acc = np.float32(0.0)
    for j in range(t, d, ROW_THREADS):
        acc += dy[i, j] * w[j] * x[i, j]
    r = rstd[i]
    scale = r * r * r * block_total(acc, partial, t) / np.float32(d)
    for j in range(t, d, ROW_THREADS):
        dx[i, j] = r * dy[i, j] * w[j] - x[i, j] * scale
        dw_rows[i, j] = dy[i, j] * x[i, j] * r


@op
def cuda_rmsnorm(x: BackendArray, w: BackendArray) -> tuple[BackendArray, BackendArray]:
    y, rstd = cuda.device_array(x.shape, np.float32), cuda.device_array(x.shape[0], np.float32)
    rmsnorm_cuda[x.shape[0], ROW_THREADS](x, w, y, rstd)
    return y, rstd


@op
def cuda_rmsnorm_backward(dy: BackendArray, x: BackendArray, w: BackendArray,
                          rstd: BackendArray) -> tuple[BackendArray, BackendArray]:
    dx, dw_rows = cuda.device_array(x.shape, np.float32), cuda.device_array(x.shape, np.float32)
    rmsnorm_backward_cuda[x.shape[0], ROW_THREADS](dy, x, w, rstd, dx, dw_rows)
    return dx, cuda_column_sum(dw_rows)


# ---- LayerNorm -----------------------------------------------------------------------------------------

@op(cases=_layernorm_cases, tolerance=TOLERANCE, args={"x": "float[rows, d]", "w": "float[d]", "b": "float[d]"})
def reference_layernorm(x: FloatArray, w: FloatArray, b: FloatArray) -> tuple[Float64Array, Float64Array, Float64Array]:
    """LayerNorm of each row: (y (rows, d), mean (rows,), rstd (rows,)), float32 (float64 here),
    y = (x - mean) * rstd * w + b with rstd = 1 / sqrt(biased variance + LN_EPS); mean and rstd are what
    layernorm_backward needs.

    x: rows of features; w, b: the norm's weight and bias, one per feature."""
    x = f64(x)
    mean = x.mean(axis=1)
    xc = x - mean[:, None]
    rstd = 1.0 / np.sqrt((xc * xc).mean(axis=1) + LN_EPS)
    return xc * rstd[:, None] * f64(w) + f64(b), mean, rstd


@op(cases=_layernorm_backward_cases, tolerance=TOLERANCE,
    args={"dy": "float[rows, d]", "x": "float[rows, d]", "w": "float[d]", "mean": "float[rows]",
          "rstd": "float[rows]"})
def reference_layernorm_backward(dy: FloatArray, x: FloatArray, w: FloatArray, mean: FloatArray,
                                 rstd: FloatArray) -> tuple[Float64Array, Float64Array, Float64Array]:
    """The gradients of layernorm: (dx (rows, d), dw (d,), db (d,)), float32 (float64 here).

    dy: the loss's gradient with respect to y; x, w: the forward's input and weight (the bias is not
    needed); mean, rstd: the forward's second and third results."""
    dy, x, w, mean, rstd = (f64(a) for a in (dy, x, w, mean, rstd))
    xhat = (x - mean[:, None]) * rstd[:, None]
    g = dy * w
    dx = rstd[:, None] * (g - g.mean(axis=1, keepdims=True) - xhat * (g * xhat).mean(axis=1, keepdims=True))
    return dx, (dy * xhat).sum(axis=0), dy.sum(axis=0)


@parallel_jit
def _cpu_layernorm(x, w, b, y, mean, rstd):
    n, d = x.shape
    for i in numba.prange(n):
        acc = np.float32(0.0)
        for j in range(d):
            acc += x[i, j]
        m = acc / np.float32(d)
        var = np.float32(0.0)
        for j in range(d):
            c = x[i, j] - m
            var += c * c
        r = np.float32(1.0) / math.sqrt(var / np.float32(d) + np.float32(LN_EPS))
        mean[i] = m
        rstd[i] = r
        for j in range(d):
            y[i, j] = (x[i, j] - m) * r * w[j] + b[j]


@parallel_jit
def _cpu_layernorm_backward(dy, x, w, mean, rstd, dx, dw_rows):
    n, d = x.shape
    for i in numba.prange(n):
        m, r = mean[i], rstd[i]
        sg = np.float32(0.0)
        sgx = np.float32(0.0)
        for j in range(d):
            g = dy[i, j] * w[j]
            xh = (x[i, j] - m) * r
            sg += g
            sgx += g * xh
        sg /= np.float32(d)
        sgx /= np.float32(d)
        for j in range(d):
            xh = (x[i, j] - m) * r
            dx[i, j] = r * (dy[i, j] * w[j] - sg - xh * sgx)
            dw_rows[i, j] = dy[i, j] * xh


@op
def cpu_layernorm(x: Float32Array, w: Float32Array, b: Float32Array) -> tuple[Float32Array, Float32Array, Float32Array]:
    y, mean, rstd = np.empty_like(x), np.empty(x.shape[0], np.float32), np.empty(x.shape[0], np.float32)
    _cpu_layernorm(x, w, b, y, mean, rstd)
    return y, mean, rstd


@op
def cpu_layernorm_backward(dy: Float32Array, x: Float32Array, w: Float32Array, mean: Float32Array,
                           rstd: Float32Array) -> tuple[Float32Array, Float32Array, Float32Array]:
    dx, dw_rows = np.empty_like(x), np.empty_like(x)
    _cpu_layernorm_backward(dy, x, w, mean, rstd, dx, dw_rows)
    return dx, cpu_column_sum(dw_rows), cpu_column_sum(dy)


@kernel((F32_2D, F32_1D, F32_1D, F32_2D, F32_1D, F32_1D), block=ROW_THREADS)
def layernorm_cuda(x, w, b, y, mean, rstd):
    """One block per row: the mean, then the centred sum of squares."""
    i, t, d = cuda.blockIdx.x, cuda.threadIdx.x, x.shape[1]
    partial = cuda.shared.array(ROW_THREADS, numba.float32)
    acc = np.float32(0.0)
    for j in range(t, d, ROW_THREADS):
        acc += x[i, j]
    m = block_total(acc, partial, t) / np.float32(d)
    acc = np.float32(0.0)
    for j in range(t, d, ROW_THREADS):
        c = x[i, j] - m
        acc += c * c
    r = np.float32(1.0) / math.sqrt(block_total(acc, partial, t) / np.float32(d) + np.float32(LN_EPS))
    if t == 0:
        mean[i] = m
        rstd[i] = r
    for j in range(t, d, ROW_THREADS):
        y[i, j] = (x[i, j] - m) * r * w[j] + b[j]


@kernel((F32_2D, F32_2D, F32_1D, F32_1D, F32_1D, F32_2D, F32_2D), block=ROW_THREADS)
def layernorm_backward_cuda(dy, x, w, mean, rstd, dx, dw_rows):
    i, t, d = cuda.blockIdx.x, cuda.threadIdx.x, x.shape[1]
    partial = cuda.shared.array(ROW_THREADS, numba.float32)
    m, r = mean[i], rstd[i]
    acc = np.float32(0.0)
    for j in range(t, d, ROW_THREADS):
        acc += dy[i, j] * w[j]
    sg = block_total(acc, partial, t) / np.float32(d)
    acc = np.float32(0.0)
    for j in range(t, d, ROW_THREADS):
        acc += dy[i, j] * w[j] * (x[i, j] - m) * r
    sgx = block_total(acc, partial, t) / np.float32(d)
    for j in range(t, d, ROW_THREADS):
        xh = (x[i, j] - m) * r
        dx[i, j] = r * (dy[i, j] * w[j] - sg - xh * sgx)
        dw_rows[i, j] = dy[i, j] * xh


@op
def cuda_layernorm(x: BackendArray, w: BackendArray,
                   b: BackendArray) -> tuple[BackendArray, BackendArray, BackendArray]:
    y = cuda.device_array(x.shape, np.float32)
    mean, rstd = cuda.device_array(x.shape[0], np.float32), cuda.device_array(x.shape[0], np.float32)
    layernorm_cuda[x.shape[0], ROW_THREADS](x, w, b, y, mean, rstd)
    return y, mean, rstd


@op
def cuda_layernorm_backward(dy: BackendArray, x: BackendArray, w: BackendArray, mean: BackendArray,
                            rstd: BackendArray) -> tuple[BackendArray, BackendArray, BackendArray]:
    dx, dw_rows = cuda.device_array(x.shape, np.float32), cuda.device_array(x.shape, np.float32)
    layernorm_backward_cuda[x.shape[0], ROW_THREADS](dy, x, w, mean, rstd, dx, dw_rows)
    return dx, cuda_column_sum(dw_rows), cuda_column_sum(dy)

# the ops of this module by name, for callers: layernorm(kernels, ...)
layernorm = registered(reference_layernorm)
layernorm_backward = registered(reference_layernorm_backward)
rmsnorm = registered(reference_rmsnorm)
rmsnorm_backward = registered(reference_rmsnorm_backward)
