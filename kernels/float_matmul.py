"""fp32 matmuls of a linear layer y = x W^T and its two backward products, tiled through shared
memory on the GPU:

    forward:  y  = x  W^T      (rows, out) = (rows, in)  (out, in)^T
    backward: dx = dy W        (rows, in)  = (rows, out) (out, in)
              dW = dy^T x      (out, in)   = (rows, out)^T (rows, in)

One kernel computes C = op(A) op(B) with either operand transposed, so the three products share it.
The CPU twin uses NumPy's BLAS on float32 (the fastest CPU path); the reference is float64.
"""

import numba
import numpy as np

from eggnog.kernels.cuda_api import cuda, kernel

TILE = 16


def reference_forward(x, w):
    return np.asarray(x, np.float64) @ np.asarray(w, np.float64).T


def reference_backward(dy, x, w):
    dy64 = np.asarray(dy, np.float64)
    return dy64 @ np.asarray(w, np.float64), dy64.T @ np.asarray(x, np.float64)


def cpu_forward(x, w):
    return np.ascontiguousarray(x @ w.T)


def cpu_backward(dy, x, w):
    return np.ascontiguousarray(dy @ w), np.ascontiguousarray(dy.T @ x)


@kernel((numba.float32[:, ::1], numba.float32[:, ::1], numba.float32[:, ::1], numba.boolean, numba.boolean))
def matmul_cuda(a, b, c, transpose_a, transpose_b):
    """c = op(a) op(b); op transposes when asked. One thread per output element of a 16 x 16 tile."""
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    inner = a.shape[0] if transpose_a else a.shape[1]
    a_tile = cuda.shared.array((TILE, TILE), numba.float32)
    b_tile = cuda.shared.array((TILE, TILE), numba.float32)
    acc = np.float32(0.0)
    for k0 in range(0, inner, TILE):
        ka = k0 + tx
        if row < c.shape[0] and ka < inner:
            a_tile[ty, tx] = a[ka, row] if transpose_a else a[row, ka]
        else:
            a_tile[ty, tx] = np.float32(0.0)
        kb = k0 + ty
        if col < c.shape[1] and kb < inner:
            b_tile[ty, tx] = b[col, kb] if transpose_b else b[kb, col]
        else:
            b_tile[ty, tx] = np.float32(0.0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc


def _matmul(a, b, rows, cols, transpose_a, transpose_b):
    c = cuda.device_array((rows, cols), np.float32)
    grid = ((cols + TILE - 1) // TILE, (rows + TILE - 1) // TILE)
    matmul_cuda[grid, (TILE, TILE)](a, b, c, transpose_a, transpose_b)
    return c


def cuda_forward(x, w):
    return _matmul(x, w, x.shape[0], w.shape[0], False, True)


def cuda_backward(dy, x, w):
    return (_matmul(dy, w, dy.shape[0], w.shape[1], False, False),
            _matmul(dy, x, dy.shape[1], x.shape[1], True, False))
