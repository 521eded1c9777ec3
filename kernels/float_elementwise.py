"""Element-wise fp32 pieces of the MinGRU LM that the layer kernels do not cover: residual add,
bias add over rows, and the per-member affine map of a population (x * scale_m + shift_m) that
applies perturbed norm weights and biases, and the last step of a scan as a contiguous carried
state. Reference (float64 NumPy), CPU twin, CUDA kernel each; the bias gradient (a column sum)
reuses float_layers.column_sum_cuda.
"""

import numba
import numpy as np

from eggnog.kernels.cuda_api import cuda, kernel
from eggnog.kernels.float_layers import column_sum_cuda

F32_1D = numba.float32[::1]
F32_2D = numba.float32[:, ::1]
F32_3D = numba.float32[:, :, ::1]
THREADS = 256


def _f64(a):
    return np.asarray(a, np.float64)


def reference_add(a, b):
    return _f64(a) + _f64(b)


def reference_add_bias(x, bias):
    return _f64(x) + _f64(bias)[None, :]


def reference_column_sum(x):
    return _f64(x).sum(axis=0)


def reference_member_affine(x, scale, shift):
    return _f64(x) * _f64(scale)[:, None, :] + _f64(shift)[:, None, :]


@numba.njit(parallel=True)
def _cpu_member_affine(x, scale, shift, out):
    members, steps, d = x.shape
    for mt in numba.prange(members * steps):
        m, t = mt // steps, mt % steps
        for j in range(d):
            out[m, t, j] = x[m, t, j] * scale[m, j] + shift[m, j]


def cpu_add(a, b):
    return a + b


def cpu_add_bias(x, bias):
    return x + bias[None, :]


def cpu_column_sum(x):
    return x.sum(axis=0, dtype=np.float64).astype(np.float32)


def cpu_member_affine(x, scale, shift):
    out = np.empty_like(x)
    _cpu_member_affine(x, scale, shift, out)
    return out


@kernel((F32_1D, F32_1D, F32_1D))
def add_cuda(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]


@kernel((F32_2D, F32_1D, F32_2D))
def add_bias_cuda(x, bias, out):
    i = cuda.grid(1)
    if i < out.size:
        row, col = i // x.shape[1], i % x.shape[1]
        out[row, col] = x[row, col] + bias[col]


@kernel((F32_3D, F32_2D, F32_2D, F32_3D))
def member_affine_cuda(x, scale, shift, out):
    i = cuda.grid(1)
    if i < out.size:
        d, steps = x.shape[2], x.shape[1]
        m, t, j = i // (steps * d), (i // d) % steps, i % d
        out[m, t, j] = x[m, t, j] * scale[m, j] + shift[m, j]


def _require(condition, what):
    """CUDA kernels do not bounds-check: a shape mismatch would read past an array on a GPU."""
    if not condition:
        raise ValueError(f"shape mismatch: {what}")


def _blocks(n):
    return max(1, (n + THREADS - 1) // THREADS), THREADS


def cuda_add(a, b):
    _require(a.shape == b.shape, f"add of {a.shape} and {b.shape}")
    out = cuda.device_array(a.shape, np.float32)
    add_cuda[_blocks(a.size)](a.reshape(a.size), b.reshape(b.size), out.reshape(out.size))
    return out


def cuda_add_bias(x, bias):
    _require(bias.shape == (x.shape[1],), f"bias {bias.shape} for rows of width {x.shape[1]}")
    out = cuda.device_array(x.shape, np.float32)
    add_bias_cuda[_blocks(x.size)](x, bias, out)
    return out


def cuda_column_sum(x):
    out = cuda.device_array(x.shape[1], np.float32)
    column_sum_cuda[_blocks(x.shape[1])](x, out)
    return out


def cuda_member_affine(x, scale, shift):
    _require(scale.shape == shift.shape == (x.shape[0], x.shape[2]),
             f"scale {scale.shape} and shift {shift.shape} for members x width {(x.shape[0], x.shape[2])}")
    out = cuda.device_array(x.shape, np.float32)
    member_affine_cuda[_blocks(x.size)](x, scale, shift, out)
    return out


# ---- the last time step of a scan output, as a contiguous carried state ------------------------------

def reference_last_step(h):
    return _f64(h)[:, -1]


def cpu_last_step(h):
    return np.ascontiguousarray(h[:, -1])


@kernel((F32_3D, F32_2D))
def last_step_cuda(h, out):
    i = cuda.grid(1)
    if i < out.size:
        b, c = i // out.shape[1], i % out.shape[1]
        out[b, c] = h[b, h.shape[1] - 1, c]


def cuda_last_step(h):
    _require(h.shape[1] > 0, "last step of an empty sequence")
    out = cuda.device_array((h.shape[0], h.shape[2]), np.float32)
    last_step_cuda[_blocks(out.size)](h, out)
    return out
