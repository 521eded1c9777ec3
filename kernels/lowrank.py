"""The member-specific part of a low-rank perturbed linear layer over a population (EGGROLL):

    y[m] += coef[m] * (x[m] B[m]) A[m]^T     x (M, T, in), B (M, in, r), A (M, out, r), coef (M,)

so the shared product x W^T is one ordinary matmul for the whole population and no member's
perturbed matrix is ever formed. `project` gives xb = x[m] B[m] (M, T, r); for an embedding the
one-hot input makes that a row gather, `project_rows`: xb[m, t] = B[m, tokens[m, t]]. `expand`
adds coef[m] xb[m] A[m]^T. Reference (float64), CPU twin (batched BLAS for the projection, a
parallel loop for the rank-r expansion, where BLAS calls are too small to pay), CUDA (thread per output).
"""

import numba
import numpy as np

from eggnog.kernels.cuda_api import cuda, kernel

F32_1D = numba.float32[::1]
F32_3D = numba.float32[:, :, ::1]
THREADS = 256


def reference_project(x, b):
    return np.matmul(np.asarray(x, np.float64), np.asarray(b, np.float64))


def reference_project_rows(tokens, b):
    return np.asarray(b, np.float64)[np.arange(b.shape[0])[:, None], np.asarray(tokens, np.int64)]


def reference_expand(y, xb, a, coef):
    delta = np.matmul(np.asarray(xb, np.float64), np.transpose(np.asarray(a, np.float64), (0, 2, 1)))
    return np.asarray(y, np.float64) + np.asarray(coef, np.float64)[:, None, None] * delta


def cpu_project(x, b):
    return np.matmul(x, b)


def cpu_project_rows(tokens, b):
    return np.ascontiguousarray(b[np.arange(b.shape[0])[:, None], tokens.astype(np.int64)])


@numba.njit(parallel=True)
def _cpu_expand(y, xb, a, coef, out):
    members, steps, width = y.shape
    for mt in numba.prange(members * steps):
        m, t = mt // steps, mt % steps
        for o in range(width):
            acc = np.float32(0.0)
            for r in range(xb.shape[2]):
                acc += xb[m, t, r] * a[m, o, r]
            out[m, t, o] = y[m, t, o] + coef[m] * acc


def cpu_expand(y, xb, a, coef):
    out = np.empty_like(y)
    _cpu_expand(y, xb, a, coef, out)
    return out


@kernel((F32_3D, F32_3D, F32_3D))
def project_cuda(x, b, xb):
    i = cuda.grid(1)
    if i < xb.size:
        steps, rank = xb.shape[1], xb.shape[2]
        m, t, r = i // (steps * rank), (i // rank) % steps, i % rank
        acc = np.float32(0.0)
        for j in range(x.shape[2]):
            acc += x[m, t, j] * b[m, j, r]
        xb[m, t, r] = acc


@kernel((numba.uint8[:, ::1], F32_3D, F32_3D))
def project_rows_cuda(tokens, b, xb):
    i = cuda.grid(1)
    if i < xb.size:
        steps, rank = xb.shape[1], xb.shape[2]
        m, t, r = i // (steps * rank), (i // rank) % steps, i % rank
        xb[m, t, r] = b[m, tokens[m, t], r]


@kernel((F32_3D, F32_3D, F32_3D, F32_1D, F32_3D))
def expand_cuda(y, xb, a, coef, out):
    i = cuda.grid(1)
    if i < out.size:
        steps, width = out.shape[1], out.shape[2]
        m, t, o = i // (steps * width), (i // width) % steps, i % width
        acc = np.float32(0.0)
        for r in range(xb.shape[2]):
            acc += xb[m, t, r] * a[m, o, r]
        out[m, t, o] = y[m, t, o] + coef[m] * acc


def _blocks(n):
    return max(1, (n + THREADS - 1) // THREADS), THREADS


def _require(condition, what):
    """CUDA kernels do not bounds-check: a shape mismatch would read past an array on a GPU."""
    if not condition:
        raise ValueError(f"shape mismatch: {what}")


def cuda_project(x, b):
    _require(b.shape[:2] == (x.shape[0], x.shape[2]), f"B {b.shape} for x {x.shape}")
    xb = cuda.device_array((x.shape[0], x.shape[1], b.shape[2]), np.float32)
    project_cuda[_blocks(xb.size)](x, b, xb)
    return xb


def cuda_project_rows(tokens, b):
    _require(b.shape[0] == tokens.shape[0] and b.shape[1] >= 256, f"B {b.shape} for uint8 tokens {tokens.shape}")
    xb = cuda.device_array((tokens.shape[0], tokens.shape[1], b.shape[2]), np.float32)
    project_rows_cuda[_blocks(xb.size)](tokens, b, xb)
    return xb


def cuda_expand(y, xb, a, coef):
    _require(xb.shape[:2] == y.shape[:2] and a.shape == (y.shape[0], y.shape[2], xb.shape[2])
             and coef.shape == (y.shape[0],), f"y {y.shape}, xb {xb.shape}, A {a.shape}, coef {coef.shape}")
    out = cuda.device_array(y.shape, np.float32)
    expand_cuda[_blocks(out.size)](y, xb, a, coef, out)
    return out
