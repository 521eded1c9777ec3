"""The pointwise math of the DNC controller's LSTM cell (fp32), forward and backward. The gate
pre-activations (B, 4H), already summed (x W_ih^T + h W_hh^T + b), in torch gate order i, f, g, o:

    lstm_cell(gates, c_prev)                      -> h, c      c = sigmoid(f) c_prev + sigmoid(i) tanh(g)
                                                               h = sigmoid(o) tanh(c)
    lstm_cell_backward(dh, dc, gates, c_prev, c)  -> dgates, dc_prev   (dh, dc: gradients of h and c)

One thread per unit (b, j) on the GPU, the per-unit bodies written once for the twin and the kernel.
Not the multi-head LSTM of kernels/rnn/lstm.py (whose activations this reuses). The reference is
float64; its backward matches central finite differences (tests/test_dnc.py).
"""

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Float64Array, FloatArray
from eggnog.kernels.core.cpu_jit import parallel_jit
from eggnog.kernels.core.cuda_api import F32_2D, blocks, cuda, device_function, f64, kernel
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import op, registered
from eggnog.kernels.rnn.lstm import cpu_sigmoid, cpu_tanh, gpu_sigmoid, gpu_tanh

THREADS = 128
TOLERANCE = (1e-6, 1e-6)


def _cases(rng, backward):
    """Units (B H): a few, one full block of 128, two blocks (150)."""
    for batch, hidden in ((2, 3), (1, 128), (3, 50)):
        gates = (2.0 * rng.normal(size=(batch, 4 * hidden))).astype(np.float32)
        c_prev = rng.normal(size=(batch, hidden)).astype(np.float32)
        if not backward:
            yield gates, c_prev
            continue
        dh, dc = (rng.normal(size=(batch, hidden)).astype(np.float32) for _ in range(2))
        yield dh, dc, gates, c_prev, reference_lstm_cell(gates, c_prev)[1].astype(np.float32)


def _forward_cases(rng):
    yield from _cases(rng, False)


def _backward_cases(rng):
    yield from _cases(rng, True)


def _sigmoid64(x):
    return 1.0 / (1.0 + np.exp(-x))


def _lstm_gates64(gates):
    g = f64(gates)
    h = g.shape[1] // 4
    return (_sigmoid64(g[:, :h]), _sigmoid64(g[:, h:2 * h]), np.tanh(g[:, 2 * h:3 * h]),
            _sigmoid64(g[:, 3 * h:]))


GATES = "float[batch, 4 * hidden]"
STATE = "float[batch, hidden]"


@op(cases=_forward_cases, tolerance=TOLERANCE, args={"gates": GATES, "c_prev": STATE})
def reference_lstm_cell(gates: FloatArray, c_prev: FloatArray) -> tuple[Float64Array, Float64Array]:
    """(h, c), each (batch, hidden): one step of the DNC controller's LSTM cell from its summed gate
    pre-activations, c = sigmoid(f) c_prev + sigmoid(i) tanh(g), h = sigmoid(o) tanh(c).

    gates: x W_ih^T + h_prev W_hh^T + b, its columns the four gates i, f, g, o (torch's order) of hidden
    units each. c_prev: the cell state before the step (zeros at the first)."""
    i, f, g, o = _lstm_gates64(gates)
    c = f * f64(c_prev) + i * g
    return o * np.tanh(c), c


@op(cases=_backward_cases, tolerance=TOLERANCE,
    args={"dh": STATE, "dc": STATE, "gates": GATES, "c_prev": STATE, "c": STATE})
def reference_lstm_cell_backward(dh: FloatArray, dc: FloatArray, gates: FloatArray, c_prev: FloatArray,
                                 c: FloatArray) -> tuple[Float64Array, Float64Array]:
    """(dgates (batch, 4 hidden), dc_prev (batch, hidden)): lstm_cell's gradients with respect to its gate
    pre-activations (columns i, f, g, o) and to the cell state it was given.

    dh, dc: the loss's gradients with respect to the cell's outputs h and c (dc: what flows back from the
    next step, zeros at the last). gates, c_prev: the forward's arguments; c: the forward's cell state."""
    i, f, g, o = _lstm_gates64(gates)
    dh, dc, c_prev, c = f64(dh), f64(dc), f64(c_prev), f64(c)
    tc = np.tanh(c)
    dct = dc + dh * o * (1.0 - tc * tc)
    dgates = np.concatenate([dct * g * i * (1.0 - i), dct * c_prev * f * (1.0 - f), dct * i * (1.0 - g * g),
                             dh * tc * o * (1.0 - o)], axis=1)
    return dgates, dct * f


def _lstm_build(jit, sigmoid, tanh):
    @jit
    def forward_at(gates, c_prev, h, c, b, j):
        hid = c_prev.shape[1]
        ig = sigmoid(gates[b, j])
        fg = sigmoid(gates[b, hid + j])
        gg = tanh(gates[b, 2 * hid + j])
        og = sigmoid(gates[b, 3 * hid + j])
        cv = fg * c_prev[b, j] + ig * gg
        c[b, j] = cv
        h[b, j] = og * tanh(cv)

    @jit
    def backward_at(dh, dc, gates, c_prev, c, dgates, dc_prev, b, j):
        hid = c_prev.shape[1]
        one = np.float32(1.0)
        ig = sigmoid(gates[b, j])
        fg = sigmoid(gates[b, hid + j])
        gg = tanh(gates[b, 2 * hid + j])
        og = sigmoid(gates[b, 3 * hid + j])
        tc = tanh(c[b, j])
        dct = dc[b, j] + dh[b, j] * og * (one - tc * tc)
        dgates[b, j] = dct * gg * ig * (one - ig)
        dgates[b, hid + j] = dct * c_prev[b, j] * fg * (one - fg)
        dgates[b, 2 * hid + j] = dct * ig * (one - gg * gg)
        dgates[b, 3 * hid + j] = dh[b, j] * tc * og * (one - og)
        dc_prev[b, j] = dct * fg

    return forward_at, backward_at


_cpu_lstm_at, _cpu_lstm_back_at = _lstm_build(numba.njit(error_model="numpy"), cpu_sigmoid, cpu_tanh)
_gpu_lstm_at, _gpu_lstm_back_at = _lstm_build(device_function, gpu_sigmoid, gpu_tanh)


@parallel_jit(error_model="numpy")
def _cpu_lstm_cell(gates, c_prev, h, c):
    n, hid = c_prev.shape
    for k in numba.prange(n * hid):
        _cpu_lstm_at(gates, c_prev, h, c, k // hid, k % hid)


@parallel_jit(error_model="numpy")
def _cpu_lstm_cell_backward(dh, dc, gates, c_prev, c, dgates, dc_prev):
    n, hid = c_prev.shape
    for k in numba.prange(n * hid):
        _cpu_lstm_back_at(dh, dc, gates, c_prev, c, dgates, dc_prev, k // hid, k % hid)


@op
def cpu_lstm_cell(gates: Float32Array, c_prev: Float32Array) -> tuple[Float32Array, Float32Array]:
    h, c = np.empty_like(c_prev), np.empty_like(c_prev)
    _cpu_lstm_cell(gates, c_prev, h, c)
    return h, c


@op
def cpu_lstm_cell_backward(dh: Float32Array, dc: Float32Array, gates: Float32Array, c_prev: Float32Array,
                           c: Float32Array) -> tuple[Float32Array, Float32Array]:
    dgates, dc_prev = np.empty_like(gates), np.empty_like(c_prev)
    _cpu_lstm_cell_backward(dh, dc, gates, c_prev, c, dgates, dc_prev)
    return dgates, dc_prev


@kernel((F32_2D, F32_2D, F32_2D, F32_2D), block=THREADS)
def lstm_cell_cuda(gates, c_prev, h, c):
    k = cuda.grid(1)
    if k < c_prev.size:
        _gpu_lstm_at(gates, c_prev, h, c, k // c_prev.shape[1], k % c_prev.shape[1])


@kernel((F32_2D, F32_2D, F32_2D, F32_2D, F32_2D, F32_2D, F32_2D), block=THREADS)
def lstm_cell_backward_cuda(dh, dc, gates, c_prev, c, dgates, dc_prev):
    k = cuda.grid(1)
    if k < c_prev.size:
        _gpu_lstm_back_at(dh, dc, gates, c_prev, c, dgates, dc_prev, k // c_prev.shape[1], k % c_prev.shape[1])


@op
def cuda_lstm_cell(gates: BackendArray, c_prev: BackendArray) -> tuple[BackendArray, BackendArray]:
    h, c = cuda.device_array(c_prev.shape, np.float32), cuda.device_array(c_prev.shape, np.float32)
    lstm_cell_cuda[blocks(c_prev.size, THREADS)](gates, c_prev, h, c)
    return h, c


@op
def cuda_lstm_cell_backward(dh: BackendArray, dc: BackendArray, gates: BackendArray, c_prev: BackendArray,
                            c: BackendArray) -> tuple[BackendArray, BackendArray]:
    dgates, dc_prev = cuda.device_array(gates.shape, np.float32), cuda.device_array(c_prev.shape, np.float32)
    lstm_cell_backward_cuda[blocks(c_prev.size, THREADS)](dh, dc, gates, c_prev, c, dgates, dc_prev)
    return dgates, dc_prev

# the ops of this module by name, for callers: lstm_cell(kernels, ...)
lstm_cell = registered(reference_lstm_cell)
lstm_cell_backward = registered(reference_lstm_cell_backward)
