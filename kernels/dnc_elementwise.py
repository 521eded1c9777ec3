"""Element-wise fp32 pieces of the DNC, each as a float64 NumPy reference (`reference_*`), a CPU
twin (`cpu_*`) and a CUDA kernel (`cuda_*`):

    activation           sigmoid (SIGMOID) or tanh (TANH), element-wise; backward from the output
    copy_window          copy a rows x cols window of one matrix into another, in place (concatenation
                         and splitting of columns, stacking of time steps)
    accumulate           dst += src in place (gradient sums without new arrays)

Twins agree with the reference to 1e-5 of the largest entry + 1e-6 relative (copies are exact),
and the activation's reference backward matches central finite differences (tests/test_dnc.py).
"""

import math

import numba
import numpy as np

from eggnog.kernels.cuda_api import cuda, device_function, kernel

THREADS = 128
SIGMOID, TANH = 0, 1

F32_1D = numba.float32[::1]
F32_2D = numba.float32[:, ::1]


def _f64(a):
    return np.asarray(a, np.float64)


def _blocks(n):
    return max(1, (n + THREADS - 1) // THREADS), THREADS


# ---- sigmoid / tanh ------------------------------------------------------------------------------------

def _build(jit):
    @jit
    def activate(x, kind):
        if kind == 0:
            return np.float32(1.0) / (np.float32(1.0) + math.exp(-x))
        return math.tanh(x)

    @jit
    def activate_slope(y, kind):
        if kind == 0:
            return y * (np.float32(1.0) - y)
        return np.float32(1.0) - y * y

    return activate, activate_slope


cpu_activate, cpu_activate_slope = _build(numba.njit)
gpu_activate, gpu_activate_slope = _build(device_function)


def reference_activation(x, kind):
    x = _f64(x)
    return 1.0 / (1.0 + np.exp(-x)) if kind == SIGMOID else np.tanh(x)


def reference_activation_backward(dy, y, kind):
    y = _f64(y)
    return _f64(dy) * (y * (1.0 - y) if kind == SIGMOID else 1.0 - y * y)


@numba.njit(parallel=True)
def _cpu_activation(x, y, kind):
    fx, fy = x.reshape(-1), y.reshape(-1)
    for i in numba.prange(fx.size):
        fy[i] = cpu_activate(fx[i], kind)


@numba.njit(parallel=True)
def _cpu_activation_backward(dy, y, dx, kind):
    fdy, fy, fdx = dy.reshape(-1), y.reshape(-1), dx.reshape(-1)
    for i in numba.prange(fy.size):
        fdx[i] = fdy[i] * cpu_activate_slope(fy[i], kind)


def cpu_activation(x, kind):
    y = np.empty_like(x)
    _cpu_activation(x, y, kind)
    return y


def cpu_activation_backward(dy, y, kind):
    dx = np.empty_like(y)
    _cpu_activation_backward(dy, y, dx, kind)
    return dx


@kernel((F32_1D, F32_1D, numba.int32))
def activation_cuda(x, y, kind):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = gpu_activate(x[i], kind)


@kernel((F32_1D, F32_1D, F32_1D, numba.int32))
def activation_backward_cuda(dy, y, dx, kind):
    i = cuda.grid(1)
    if i < y.size:
        dx[i] = dy[i] * gpu_activate_slope(y[i], kind)


def cuda_activation(x, kind):
    y = cuda.device_array(x.shape, np.float32)
    activation_cuda[_blocks(x.size)](x.reshape(x.size), y.reshape(y.size), np.int32(kind))
    return y


def cuda_activation_backward(dy, y, kind):
    dx = cuda.device_array(y.shape, np.float32)
    activation_backward_cuda[_blocks(y.size)](dy.reshape(dy.size), y.reshape(y.size), dx.reshape(dx.size),
                                              np.int32(kind))
    return dx


# ---- window copy, in-place accumulation ------------------------------------------------------------

def reference_copy_window(src, dst, src_row, src_col, dst_row, dst_col, rows, cols):
    dst[dst_row:dst_row + rows, dst_col:dst_col + cols] = src[src_row:src_row + rows, src_col:src_col + cols]


cpu_copy_window = reference_copy_window  # NumPy slicing is the CPU path; in-place on dst


@kernel((F32_2D, F32_2D, numba.int64, numba.int64, numba.int64, numba.int64, numba.int64, numba.int64))
def copy_window_cuda(src, dst, src_row, src_col, dst_row, dst_col, rows, cols):
    i = cuda.grid(1)
    if i < rows * cols:
        r, c = i // cols, i % cols
        dst[dst_row + r, dst_col + c] = src[src_row + r, src_col + c]


def cuda_copy_window(src, dst, src_row, src_col, dst_row, dst_col, rows, cols):
    if rows * cols:
        copy_window_cuda[_blocks(rows * cols)](src, dst, src_row, src_col, dst_row, dst_col, rows, cols)


def reference_accumulate(dst, src):
    dst += _f64(src)


def cpu_accumulate(dst, src):
    dst += src


@kernel((F32_1D, F32_1D))
def accumulate_cuda(dst, src):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] += src[i]


def cuda_accumulate(dst, src):
    accumulate_cuda[_blocks(dst.size)](dst.reshape(dst.size), src.reshape(src.size))
