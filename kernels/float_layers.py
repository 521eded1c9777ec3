"""fp32 layer kernels of the MinGRU language model, forward and backward: RMSNorm, GELU (exact,
erf), cross-entropy in bits per byte, embedding gather and scatter-add. Rows are the leading axis,
features the contiguous one. NumPy references compute in float64; twins agree to the tolerances
stated in tests/test_float_layers.py.
"""

import math

import numba
import numpy as np

from eggnog.kernels.cuda_api import cuda, kernel
from eggnog.kernels.reductions import block_sum, row_max_and_exp_sum

LN2 = math.log(2.0)
INV_SQRT2 = 1.0 / math.sqrt(2.0)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
RMS_EPS = float(np.finfo(np.float32).eps)  # torch's RMSNorm default for float32
ROW_THREADS = 128

F32_2D = numba.float32[:, ::1]
F32_1D = numba.float32[::1]


@kernel((F32_2D, F32_1D))
def column_sum_cuda(rows, out):
    j = cuda.grid(1)
    if j < rows.shape[1]:
        acc = np.float32(0.0)
        for i in range(rows.shape[0]):
            acc += rows[i, j]
        out[j] = acc


# ---- GELU (exact) ------------------------------------------------------------------------------------

def _erf64(x):
    return np.vectorize(math.erf, otypes=[np.float64])(np.asarray(x, np.float64))


def reference_gelu(x):
    x = np.asarray(x, np.float64)
    return 0.5 * x * (1.0 + _erf64(x * INV_SQRT2))


def reference_gelu_backward(dy, x):
    x = np.asarray(x, np.float64)
    return np.asarray(dy, np.float64) * (0.5 * (1.0 + _erf64(x * INV_SQRT2)) + x * INV_SQRT_2PI * np.exp(-0.5 * x * x))


def _gelu_build(jit):
    @jit
    def gelu(x):
        return np.float32(0.5) * x * (np.float32(1.0) + math.erf(x * np.float32(INV_SQRT2)))

    @jit
    def gelu_slope(x):
        cdf = np.float32(0.5) * (np.float32(1.0) + math.erf(x * np.float32(INV_SQRT2)))
        return cdf + x * np.float32(INV_SQRT_2PI) * math.exp(np.float32(-0.5) * x * x)

    return gelu, gelu_slope


cpu_gelu_scalar, cpu_gelu_slope = _gelu_build(numba.njit)
gpu_gelu_scalar, gpu_gelu_slope = _gelu_build(cuda.jit(device=True))


@numba.njit(parallel=True)
def _cpu_gelu(x, y):
    flat_x, flat_y = x.reshape(-1), y.reshape(-1)
    for i in numba.prange(flat_x.size):
        flat_y[i] = cpu_gelu_scalar(flat_x[i])


@numba.njit(parallel=True)
def _cpu_gelu_backward(dy, x, dx):
    flat_dy, flat_x, flat_dx = dy.reshape(-1), x.reshape(-1), dx.reshape(-1)
    for i in numba.prange(flat_x.size):
        flat_dx[i] = flat_dy[i] * cpu_gelu_slope(flat_x[i])


def cpu_gelu(x):
    y = np.empty_like(x)
    _cpu_gelu(x, y)
    return y


def cpu_gelu_backward(dy, x):
    dx = np.empty_like(x)
    _cpu_gelu_backward(dy, x, dx)
    return dx


@kernel((F32_2D, F32_2D))
def gelu_cuda(x, y):
    i, j = cuda.grid(2)
    if i < x.shape[0] and j < x.shape[1]:
        y[i, j] = gpu_gelu_scalar(x[i, j])


@kernel((F32_2D, F32_2D, F32_2D))
def gelu_backward_cuda(dy, x, dx):
    i, j = cuda.grid(2)
    if i < x.shape[0] and j < x.shape[1]:
        dx[i, j] = dy[i, j] * gpu_gelu_slope(x[i, j])


def _grid2(rows, cols):
    return ((rows + 7) // 8, (cols + 31) // 32), (8, 32)


def cuda_gelu(x):
    y = cuda.device_array(x.shape, np.float32)
    gelu_cuda[_grid2(*x.shape)](x, y)
    return y


def cuda_gelu_backward(dy, x):
    dx = cuda.device_array(x.shape, np.float32)
    gelu_backward_cuda[_grid2(*x.shape)](dy, x, dx)
    return dx


# ---- cross-entropy in bits, with its gradient ----------------------------------------------------------

def reference_cross_entropy(logits, targets):
    """Per-row loss in bits and the gradient of the mean loss (bits) with respect to the logits."""
    z = np.asarray(logits, np.float64)
    z = z - z.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    rows = np.arange(z.shape[0])
    loss = -log_p[rows, targets] / LN2
    grad = np.exp(log_p)
    grad[rows, targets] -= 1.0
    return loss, grad / (z.shape[0] * LN2)


@numba.njit(parallel=True)
def _cpu_cross_entropy(logits, targets, loss, grad):
    n, v = logits.shape
    scale = np.float32(1.0 / (n * LN2))
    for i in numba.prange(n):
        top = logits[i, 0]
        for j in range(v):
            top = max(top, logits[i, j])
        total = np.float32(0.0)
        for j in range(v):
            total += math.exp(logits[i, j] - top)
        log_total = math.log(total)
        t = targets[i]
        loss[i] = (log_total - (logits[i, t] - top)) / np.float32(LN2)
        for j in range(v):
            grad[i, j] = math.exp(logits[i, j] - top - log_total) * scale
        grad[i, t] -= scale


def cpu_cross_entropy(logits, targets):
    loss, grad = np.empty(logits.shape[0], np.float32), np.empty_like(logits)
    _cpu_cross_entropy(logits, targets, loss, grad)
    return loss, grad


@kernel((F32_2D, numba.uint8[::1], F32_1D, F32_2D))
def cross_entropy_cuda(logits, targets, loss, grad):
    """One block per row: a max, a sum of exponentials, then the softmax gradient."""
    i = cuda.blockIdx.x
    t = cuda.threadIdx.x
    n, v = logits.shape
    partial = cuda.shared.array(ROW_THREADS, numba.float32)
    top, total = row_max_and_exp_sum(logits, i, partial, t)
    log_total = math.log(total)
    scale = np.float32(1.0) / (np.float32(n) * np.float32(LN2))
    target = targets[i]
    for j in range(t, v, ROW_THREADS):
        g = math.exp(logits[i, j] - top - log_total) * scale
        grad[i, j] = g - scale if j == target else g
    if t == 0:
        loss[i] = (log_total - (logits[i, target] - top)) / np.float32(LN2)


def cuda_cross_entropy(logits, targets):
    loss = cuda.device_array(logits.shape[0], np.float32)
    grad = cuda.device_array(logits.shape, np.float32)
    cross_entropy_cuda[logits.shape[0], ROW_THREADS](logits, targets, loss, grad)
    return loss, grad


# ---- embedding gather / scatter-add -------------------------------------------------------------------

def reference_embedding(table, tokens):
    return np.asarray(table, np.float64)[np.asarray(tokens, np.int64)]


def reference_embedding_backward(dout, tokens, vocab):
    grad = np.zeros((vocab, dout.shape[1]))
    np.add.at(grad, np.asarray(tokens, np.int64), np.asarray(dout, np.float64))
    return grad


def cpu_embedding(table, tokens):
    return table[tokens.astype(np.int64)]


@numba.njit(parallel=True)
def _cpu_embedding_backward(dout, tokens, grad):
    # parallel over columns: each thread owns a column, so no two threads add to one element
    for j in numba.prange(dout.shape[1]):
        for i in range(dout.shape[0]):
            grad[tokens[i], j] += dout[i, j]


def cpu_embedding_backward(dout, tokens, vocab):
    grad = np.zeros((vocab, dout.shape[1]), np.float32)
    _cpu_embedding_backward(dout, tokens, grad)
    return grad


@kernel((F32_2D, numba.uint8[::1], F32_2D))
def embedding_cuda(table, tokens, out):
    i, j = cuda.grid(2)
    if i < tokens.size and j < table.shape[1]:
        out[i, j] = table[tokens[i], j]


@kernel((F32_2D, numba.uint8[::1], F32_2D))
def embedding_backward_cuda(dout, tokens, grad):
    i, j = cuda.grid(2)
    if i < tokens.size and j < dout.shape[1]:
        cuda.atomic.add(grad, (tokens[i], j), dout[i, j])


def cuda_embedding(table, tokens):
    out = cuda.device_array((tokens.shape[0], table.shape[1]), np.float32)
    embedding_cuda[_grid2(tokens.shape[0], table.shape[1])](table, tokens, out)
    return out


def cuda_embedding_backward(dout, tokens, vocab):
    grad = cuda.to_device(np.zeros((vocab, dout.shape[1]), np.float32))
    embedding_backward_cuda[_grid2(tokens.shape[0], dout.shape[1])](dout, tokens, grad)
    return grad
