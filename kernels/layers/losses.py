"""Cross-entropy in bits (fp32) with its gradient, fused:

    cross_entropy(logits (rows, vocab), targets (rows,) uint8) -> loss (rows,), grad (rows, vocab)

loss[i] = -log2 softmax(logits[i])[targets[i]], and grad is the gradient of the mean loss over the
rows (in bits) with respect to the logits. On the GPU one block of ROW_THREADS threads per row shares
one max / exp-sum reduction (`reductions.row_max_and_exp_sum`). The reference computes in float64;
twins agree to 1e-5 relative + 1e-6 absolute.
"""

import math

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Float64Array, FloatArray, UInt8Array
from eggnog.kernels.core.cpu_jit import parallel_jit
from eggnog.kernels.core.cpu_vector_math import exp32
from eggnog.kernels.core.cuda_api import F32_1D, F32_2D, U8_1D, cuda, f64, kernel, require
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.reductions import row_max_and_exp_sum
from eggnog.kernels.core.registry import op, registered

LN2 = math.log(2.0)
ROW_THREADS = 128  # one block per row; a power of two for the tree reductions


def _cases(rng):
    """Several rows (blocks); vocabularies of one entry, below, at and across the block's threads."""
    for rows, vocab in ((2, 1), (3, 127), (2, 128), (4, 300)):
        logits = (rng.normal(size=(rows, vocab)) * 4.0).astype(np.float32)
        yield logits, rng.integers(0, min(vocab, 256), rows).astype(np.uint8)


def _check(logits, targets):
    require(len(logits.shape) == 2 and tuple(targets.shape) == (logits.shape[0],),
            f"cross-entropy takes logits (rows, vocab) and one target per row, "
            f"got logits {tuple(logits.shape)} and targets {tuple(targets.shape)}")


@op(cases=_cases, tolerance=(1e-5, 1e-6), args={"logits": "float[rows, vocab]", "targets": "uint8[rows]"})
def reference_cross_entropy(logits: FloatArray, targets: UInt8Array) -> tuple[Float64Array, Float64Array]:
    """Each row's cross-entropy in bits and its gradient: (loss (rows,), grad (rows, vocab)), float32
    (float64 here). loss[i] = -log2 softmax(logits[i])[targets[i]]; grad is the gradient of the mean of
    loss over the rows with respect to logits.

    logits: one row of unnormalised scores per predicted byte; targets: the byte each row should predict
    (below vocab)."""
    _check(logits, targets)
    z = f64(logits)
    z = z - z.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    rows, targets = np.arange(z.shape[0]), np.asarray(targets, np.int64)
    loss = -log_p[rows, targets] / LN2
    grad = np.exp(log_p)
    grad[rows, targets] -= 1.0
    return loss, grad / (z.shape[0] * LN2)


@parallel_jit(error_model="numpy")
def _cpu_cross_entropy(logits, targets, loss, grad):
    """One exponential per logit (the vectorisable exp32), kept in grad and scaled by 1 / sum."""
    n, v = logits.shape
    scale = np.float32(1.0 / (n * LN2))
    for i in numba.prange(n):
        row, out = logits[i], grad[i]
        top = row[0]
        for j in range(v):
            top = row[j] if row[j] > top else top
        for j in range(v):
            out[j] = exp32(row[j] - top)
        total = np.float32(0.0)
        for j in range(v):
            total += out[j]
        t = targets[i]
        loss[i] = (math.log(total) - (row[t] - top)) / np.float32(LN2)
        factor = scale / total
        for j in range(v):
            out[j] *= factor
        out[t] -= scale


@op
def cpu_cross_entropy(logits: Float32Array, targets: UInt8Array) -> tuple[Float32Array, Float32Array]:
    _check(logits, targets)
    loss, grad = np.empty(logits.shape[0], np.float32), np.empty(logits.shape, np.float32)
    _cpu_cross_entropy(logits, targets, loss, grad)
    return loss, grad


@kernel((F32_2D, U8_1D, F32_1D, F32_2D), block=ROW_THREADS)
def cross_entropy_cuda(logits, targets, loss, grad):
    """One block per row: a max, a sum of exponentials, then the softmax gradient."""
    i, t = cuda.blockIdx.x, cuda.threadIdx.x
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


@op
def cuda_cross_entropy(logits: BackendArray, targets: BackendArray) -> tuple[BackendArray, BackendArray]:
    _check(logits, targets)
    loss = cuda.device_array(logits.shape[0], np.float32)
    grad = cuda.device_array(logits.shape, np.float32)
    cross_entropy_cuda[logits.shape[0], ROW_THREADS](logits, targets, loss, grad)
    return loss, grad

# the ops of this module by name, for callers: cross_entropy(kernels, ...)
cross_entropy = registered(reference_cross_entropy)
