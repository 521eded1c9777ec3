"""Batched matrix product (fp32) over 3-D arrays, batch leading, either operand transposed:

    c[n] = op(a[n]) op(b[n]),   op(m) = m or m^T per `transpose_a` / `transpose_b`

as a float64 NumPy reference (`reference_bmm`), a CPU twin (NumPy's fp32 matmul, `cpu_bmm`) and a
CUDA kernel (`cuda_bmm`, one thread per output element: the DNC's products are thin). Twins agree
with the reference to 1e-5 of the largest entry + 1e-6 relative (tests/test_dnc.py).
"""

import numba
import numpy as np

from eggnog.kernels.cuda_api import cuda, kernel

THREADS = 128
F32_3D = numba.float32[:, :, ::1]


def _f64(a):
    return np.asarray(a, np.float64)


def _blocks(n):
    return max(1, (n + THREADS - 1) // THREADS), THREADS


def _op(a, transpose):
    return np.swapaxes(a, 1, 2) if transpose else a


def reference_bmm(a, b, transpose_a=False, transpose_b=False):
    return np.matmul(_op(_f64(a), transpose_a), _op(_f64(b), transpose_b))


def cpu_bmm(a, b, transpose_a=False, transpose_b=False):
    return np.ascontiguousarray(np.matmul(_op(a, transpose_a), _op(b, transpose_b)), np.float32)


@kernel((F32_3D, F32_3D, F32_3D, numba.boolean, numba.boolean))
def bmm_cuda(a, b, c, transpose_a, transpose_b):
    """One thread per output element (the DNC's products are thin: one side is R or 1 wide)."""
    i = cuda.grid(1)
    if i < c.size:
        rows, cols = c.shape[1], c.shape[2]
        n, r, col = i // (rows * cols), (i // cols) % rows, i % cols
        inner = a.shape[1] if transpose_a else a.shape[2]
        acc = np.float32(0.0)
        for k in range(inner):
            av = a[n, k, r] if transpose_a else a[n, r, k]
            bv = b[n, col, k] if transpose_b else b[n, k, col]
            acc += av * bv
        c[n, r, col] = acc


def cuda_bmm(a, b, transpose_a=False, transpose_b=False):
    rows = a.shape[2] if transpose_a else a.shape[1]
    cols = b.shape[1] if transpose_b else b.shape[2]
    c = cuda.device_array((a.shape[0], rows, cols), np.float32)
    bmm_cuda[_blocks(c.size)](a, b, c, transpose_a, transpose_b)
    return c
