"""The pointwise math of the DNC controller's LSTM cell (fp32), forward and backward, as a float64
NumPy reference (`reference_*`), a numba CPU twin (`cpu_*`) and a CUDA kernel (`cuda_*`). The gate
pre-activations (B, 4H), already summed (x W_ih^T + h W_hh^T + b), in torch gate order i, f, g, o:

    c = sigmoid(f) c_prev + sigmoid(i) tanh(g),    h = sigmoid(o) tanh(c)

The backward takes dh, dc (gradients of h and c) and returns (dgates, dc_prev). Not the multi-head
LSTM of kernels/lstm_cell.py (whose scalar sigmoid this reuses). Twins agree with the reference to
1e-5 of the largest entry + 1e-6 relative, and the reference backward matches central finite
differences (tests/test_dnc.py).
"""

import math

import numba
import numpy as np

from eggnog.kernels.cuda_api import cuda, device_function, kernel
from eggnog.kernels.lstm_cell import cpu_sigmoid, gpu_sigmoid

THREADS = 128
F32_2D = numba.float32[:, ::1]


def _f64(a):
    return np.asarray(a, np.float64)


def _blocks(n):
    return max(1, (n + THREADS - 1) // THREADS), THREADS


def _sigmoid64(x):
    return 1.0 / (1.0 + np.exp(-x))


def _lstm_gates64(gates):
    g = _f64(gates)
    h = g.shape[1] // 4
    return (_sigmoid64(g[:, :h]), _sigmoid64(g[:, h:2 * h]), np.tanh(g[:, 2 * h:3 * h]),
            _sigmoid64(g[:, 3 * h:]))


def reference_lstm_cell(gates, c_prev):
    i, f, g, o = _lstm_gates64(gates)
    c = f * _f64(c_prev) + i * g
    return o * np.tanh(c), c


def reference_lstm_cell_backward(dh, dc, gates, c_prev, c):
    i, f, g, o = _lstm_gates64(gates)
    dh, dc, c_prev, c = _f64(dh), _f64(dc), _f64(c_prev), _f64(c)
    tc = np.tanh(c)
    dct = dc + dh * o * (1.0 - tc * tc)
    dgates = np.concatenate([dct * g * i * (1.0 - i), dct * c_prev * f * (1.0 - f), dct * i * (1.0 - g * g),
                             dh * tc * o * (1.0 - o)], axis=1)
    return dgates, dct * f


def _lstm_build(jit, sigmoid):
    @jit
    def forward_at(gates, c_prev, h, c, b, j):
        hid = c_prev.shape[1]
        ig = sigmoid(gates[b, j])
        fg = sigmoid(gates[b, hid + j])
        gg = math.tanh(gates[b, 2 * hid + j])
        og = sigmoid(gates[b, 3 * hid + j])
        cv = fg * c_prev[b, j] + ig * gg
        c[b, j] = cv
        h[b, j] = og * math.tanh(cv)

    @jit
    def backward_at(dh, dc, gates, c_prev, c, dgates, dc_prev, b, j):
        hid = c_prev.shape[1]
        one = np.float32(1.0)
        ig = sigmoid(gates[b, j])
        fg = sigmoid(gates[b, hid + j])
        gg = math.tanh(gates[b, 2 * hid + j])
        og = sigmoid(gates[b, 3 * hid + j])
        tc = math.tanh(c[b, j])
        dct = dc[b, j] + dh[b, j] * og * (one - tc * tc)
        dgates[b, j] = dct * gg * ig * (one - ig)
        dgates[b, hid + j] = dct * c_prev[b, j] * fg * (one - fg)
        dgates[b, 2 * hid + j] = dct * ig * (one - gg * gg)
        dgates[b, 3 * hid + j] = dh[b, j] * tc * og * (one - og)
        dc_prev[b, j] = dct * fg

    return forward_at, backward_at


_cpu_lstm_at, _cpu_lstm_back_at = _lstm_build(numba.njit, cpu_sigmoid)
_gpu_lstm_at, _gpu_lstm_back_at = _lstm_build(device_function, gpu_sigmoid)


@numba.njit(parallel=True)
def _cpu_lstm_cell(gates, c_prev, h, c):
    n, hid = c_prev.shape
    for k in numba.prange(n * hid):
        _cpu_lstm_at(gates, c_prev, h, c, k // hid, k % hid)


@numba.njit(parallel=True)
def _cpu_lstm_cell_backward(dh, dc, gates, c_prev, c, dgates, dc_prev):
    n, hid = c_prev.shape
    for k in numba.prange(n * hid):
        _cpu_lstm_back_at(dh, dc, gates, c_prev, c, dgates, dc_prev, k // hid, k % hid)


def cpu_lstm_cell(gates, c_prev):
    h, c = np.empty_like(c_prev), np.empty_like(c_prev)
    _cpu_lstm_cell(gates, c_prev, h, c)
    return h, c


def cpu_lstm_cell_backward(dh, dc, gates, c_prev, c):
    dgates, dc_prev = np.empty_like(gates), np.empty_like(c_prev)
    _cpu_lstm_cell_backward(dh, dc, gates, c_prev, c, dgates, dc_prev)
    return dgates, dc_prev


@kernel((F32_2D, F32_2D, F32_2D, F32_2D))
def lstm_cell_cuda(gates, c_prev, h, c):
    k = cuda.grid(1)
    if k < c_prev.size:
        _gpu_lstm_at(gates, c_prev, h, c, k // c_prev.shape[1], k % c_prev.shape[1])


@kernel((F32_2D, F32_2D, F32_2D, F32_2D, F32_2D, F32_2D, F32_2D))
def lstm_cell_backward_cuda(dh, dc, gates, c_prev, c, dgates, dc_prev):
    k = cuda.grid(1)
    if k < c_prev.size:
        _gpu_lstm_back_at(dh, dc, gates, c_prev, c, dgates, dc_prev, k // c_prev.shape[1], k % c_prev.shape[1])


def cuda_lstm_cell(gates, c_prev):
    h, c = cuda.device_array(c_prev.shape, np.float32), cuda.device_array(c_prev.shape, np.float32)
    lstm_cell_cuda[_blocks(c_prev.size)](gates, c_prev, h, c)
    return h, c


def cuda_lstm_cell_backward(dh, dc, gates, c_prev, c):
    dgates, dc_prev = cuda.device_array(gates.shape, np.float32), cuda.device_array(c_prev.shape, np.float32)
    lstm_cell_backward_cuda[_blocks(c_prev.size)](dh, dc, gates, c_prev, c, dgates, dc_prev)
    return dgates, dc_prev
