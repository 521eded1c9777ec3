"""The FlashRNN-style multi-head LSTM cell (fp32), forward and backward:

    raw_g = Wx_g + R[g, n] @ h_prev_n + b_g          gates g in order i, f, z, o; heads n block-diagonal
    c = sigmoid(f) c_prev + sigmoid(i) tanh(z),      h = sigmoid(o) tanh(c)

More in docs/internals.md (kernels/rnn/lstm.py)."""

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Float64Array, FloatArray, Int32Array
from eggnog.kernels.core.cpu_jit import parallel_jit
from eggnog.kernels.core.cpu_vector_math import sigmoid32, tanh32
from eggnog.kernels.core.cuda_api import (
    BOOL,
    F32_1D,
    F32_2D,
    F32_4D,
    I32_1D,
    blocks,
    cuda,
    device_function,
    device_zeros,
    f64,
    kernel,
    on_device,
)
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import normal32, op, registered
from eggnog.kernels.layers.matmul import tiled_product
from eggnog.kernels.rnn.lstm_backward_cuda import run_backward as run_tiled_backward
from eggnog.kernels.rnn.lstm_backward_cuda import run_weight_grad
from eggnog.kernels.rnn.lstm_sequence_cpu import forward_sequence
from eggnog.kernels.rnn.lstm_sequence_cuda import backward_fits, coresident_blocks, gpu_sigmoid, gpu_tanh
from eggnog.kernels.rnn.lstm_sequence_cuda import run as run_sequence
from eggnog.kernels.rnn.lstm_sequence_cuda import run_backward as run_sequence_backward
from eggnog.runtime.errors import BadInput

THREADS = 128
TOLERANCE = (2e-6, 2e-6)  # fp32 against float64 at the cases' sizes


# The CPU twins use the vectorisable activations (libm's are scalar calls); the GPU libdevice's exp and
# tanh, the sigmoid through the approximate reciprocal (kernels/rnn/lstm_sequence_cuda.py).
cpu_sigmoid, cpu_tanh = sigmoid32, tanh32
_cpu_jit = numba.njit(error_model="numpy")  # no ZeroDivisionError check, which blocks vectorisation


def build(jit, sigmoid, tanh):
    """The per-thread bodies of the four cell kernels, written once and compiled for the CPU twins
    (numba.njit, looped over by prange) and the GPU (device functions)."""

    @jit
    def forward_element(wx, rows, r, bias, h_prev, c_prev, h, c, gates, keep, i):
        """Unit i = (batch, head, d): four gate pre-activations (wx row rows[batch], then a loop over
        the head's D inputs), then c and h; the activated gates are stored when `keep`."""
        hidden = h.shape[1]
        size = r.shape[2]
        b, j = i // hidden, i % hidden
        n, d = j // size, j % size
        base = n * size
        row = rows[b]
        ri = wx[row, j] + bias[j]
        rf = wx[row, hidden + j] + bias[hidden + j]
        rz = wx[row, 2 * hidden + j] + bias[2 * hidden + j]
        ro = wx[row, 3 * hidden + j] + bias[3 * hidden + j]
        for k in range(size):
            hk = h_prev[b, base + k]
            ri += r[0, n, d, k] * hk
            rf += r[1, n, d, k] * hk
            rz += r[2, n, d, k] * hk
            ro += r[3, n, d, k] * hk
        ig, fg, zg, og = sigmoid(ri), sigmoid(rf), tanh(rz), sigmoid(ro)
        cn = fg * c_prev[b, j] + ig * zg
        c[b, j] = cn
        h[b, j] = og * tanh(cn)
        if keep:
            gates[b, j] = ig
            gates[b, hidden + j] = fg
            gates[b, 2 * hidden + j] = zg
            gates[b, 3 * hidden + j] = og

    @jit
    def backward_gates_element(dh, dc, gates, c, c_prev, draw, dc_prev, i):
        """Gate gradients and dc_prev of unit i; dc_prev may be dc (read before written)."""
        hidden = dh.shape[1]
        one = np.float32(1.0)
        b, j = i // hidden, i % hidden
        ig, fg = gates[b, j], gates[b, hidden + j]
        zg, og = gates[b, 2 * hidden + j], gates[b, 3 * hidden + j]
        tc = tanh(c[b, j])
        g = dh[b, j]
        dct = dc[b, j] + g * og * (one - tc * tc)
        draw[b, j] = dct * zg * ig * (one - ig)
        draw[b, hidden + j] = dct * c_prev[b, j] * fg * (one - fg)
        draw[b, 2 * hidden + j] = dct * ig * (one - zg * zg)
        draw[b, 3 * hidden + j] = g * tc * og * (one - og)
        dc_prev[b, j] = dct * fg

    @jit
    def backward_recurrent_element(draw, r, dh_extra, dh_prev, i):
        """dh_prev[b, n, k] = dh_extra[b, n, k] + sum_g sum_d R[g, n, d, k] draw[b, g, n, d]."""
        hidden = dh_prev.shape[1]
        size = r.shape[2]
        b, j = i // hidden, i % hidden
        n, k = j // size, j % size
        acc = dh_extra[b, j]
        for g in range(4):
            col = g * hidden + n * size
            for d in range(size):
                acc += r[g, n, d, k] * draw[b, col + d]
        dh_prev[b, j] = acc

    return forward_element, backward_gates_element, backward_recurrent_element


_cpu_forward_element, _cpu_backward_gates_element, _cpu_backward_recurrent_element = build(_cpu_jit, cpu_sigmoid,
                                                                                              cpu_tanh)
_gpu_forward_element, _gpu_backward_gates_element, _gpu_backward_recurrent_element = build(device_function, gpu_sigmoid,
                                                                                         gpu_tanh)


def _shape(r):
    """(N, D, H) from R (4, N, D, D)."""
    return r.shape[1], r.shape[2], r.shape[1] * r.shape[2]


# ---- cases of the generated tests ---------------------------------------------------------------------

def _weights(rng, heads, size):
    hidden = heads * size
    return normal32(rng, 4, heads, size, size, scale=0.6), normal32(rng, 4 * hidden, scale=0.3)


# (batch, heads, head size): a few units; 150 units = two 128-thread blocks
STEP_SHAPES = ((2, 2, 3), (3, 5, 10))


def _forward_step_cases(rng):
    for batch, heads, size in STEP_SHAPES:
        hidden = heads * size
        r, bias = _weights(rng, heads, size)
        yield normal32(rng, batch, 4 * hidden), r, bias, normal32(rng, batch, hidden), normal32(rng, batch, hidden)


def _backward_step_cases(rng):
    for batch, heads, size in STEP_SHAPES:
        hidden = heads * size
        r, bias = _weights(rng, heads, size)
        c_prev = normal32(rng, batch, hidden)
        _, c, gates = reference_lstm_forward_step(normal32(rng, batch, 4 * hidden), r, bias,
                                                  normal32(rng, batch, hidden), c_prev)
        dh, dc, extra = (normal32(rng, batch, hidden) for _ in range(3))
        yield dh, dc, r, gates.astype(np.float32), c.astype(np.float32), c_prev, extra


def _recurrent_grad_cases(rng):
    """Heads smaller than a tile with fewer rows than a slice; a head of 33 units (4 D = 132 rows: two row
    tiles) over 35 rows (five slices, the last partial); 81 units (two column tiles, three row tiles);
    72 rows of one small head, which the simulator's one SM splits in two chunks (sum_splits_cuda)."""
    for steps, batch, heads, size in ((3, 2, 2, 3), (2, 3, 2, 6), (5, 7, 1, 33), (2, 2, 1, 81), (8, 9, 1, 5)):
        hidden = heads * size
        yield normal32(rng, steps, batch, 4 * hidden), normal32(rng, steps + 1, batch, hidden), heads


SEQUENCE = (3, 2, 2, 3)  # steps, batch, heads, head size: the sequence ops launch once or twice per step


def _rows(rng, steps, batch, table_rows):
    return rng.integers(0, table_rows, (steps, batch)).astype(np.int32)


def _forward_cases(rng):
    """A table of 5 rows looked up in any order (repeats included), and one read row by row."""
    steps, batch, heads, size = SEQUENCE
    hidden = heads * size
    r, bias = _weights(rng, heads, size)
    yield normal32(rng, 5, 4 * hidden), _rows(rng, steps, batch, 5), r, bias, normal32(rng, 2, hidden), True
    rows = np.arange(steps * batch, dtype=np.int32).reshape(steps, batch)
    yield normal32(rng, steps * batch, 4 * hidden), rows, r, bias, normal32(rng, 2, hidden), False
    # one head of 56 units: R (50 KB) is over the 48 KiB without opt-in, so the GPU runs the persistent
    # (cooperative, grid-synchronised) kernel, a one-block grid
    r, bias = _weights(rng, 1, 56)
    yield normal32(rng, 3, 224), _rows(rng, 2, 1, 3), r * np.float32(0.3), bias, normal32(rng, 2, 56), True


def _backward_cases(rng):
    """Heads that fit a block (the one-launch backward), and one head of 56 units whose R (50 KB) does not:
    the tiled products, one launch a step (a block of 56 of the 80 columns, 7 slices of 8 a gate)."""
    for (steps, batch, heads, size), scale in ((SEQUENCE, 1.0), ((2, 3, 1, 56), 0.3)):
        hidden = heads * size
        r, bias = _weights(rng, heads, size)
        r = r * np.float32(scale)
        hs, cs, gates = reference_lstm_forward(normal32(rng, 5, 4 * hidden), _rows(rng, steps, batch, 5), r, bias,
                                               normal32(rng, 2, hidden), True)
        assert cs is not None and gates is not None  # kept
        yield (normal32(rng, steps, batch, hidden), r, hs.astype(np.float32), cs.astype(np.float32),
               gates.astype(np.float32))


# rows x in -> 4H: each product crosses a 16-wide tile in both directions (2 x 2 tiles)
PROJECTION = (20, 17, 24)


def _projection_cases(rng):
    rows, inner, cols = PROJECTION
    yield normal32(rng, rows, inner), normal32(rng, inner, cols)


def _projection_backward_cases(rng):
    rows, inner, cols = PROJECTION
    yield normal32(rng, rows, cols), normal32(rng, rows, inner), normal32(rng, inner, cols)


# ---- NumPy reference (float64) ------------------------------------------------------------------

def _check_rows(table, rows):
    """Host row indices are checked here (a kernel would read out of bounds); device rows are taken as
    checked by whoever uploaded them, since reading them back would wait for the device."""
    if len(rows.shape) != 2 or rows.dtype != np.int32:
        raise BadInput(f"LSTM input rows must be a (steps, batch) int32 array, got {rows.dtype} {rows.shape}")
    if hasattr(rows, "copy_to_host"):
        return
    if rows.size and (rows.min() < 0 or rows.max() >= table.shape[0]):
        raise BadInput(f"LSTM input row {int(rows.max())} is outside the table of {table.shape[0]} rows")


def _sig64(x):
    return 1.0 / (1.0 + np.exp(-x))


# H = heads * size units; gate-major columns [i | f | z | o] of H each
R = "float[4, heads, size, size]"
UNITS = "float[batch, heads * size]"
GATE_COLUMNS = "float[batch, 4 * heads * size]"


@op(cases=_forward_step_cases, tolerance=TOLERANCE,
    args={"wx": GATE_COLUMNS, "r": R, "bias": "float[4 * heads * size]", "h_prev": UNITS, "c_prev": UNITS})
def reference_lstm_forward_step(wx: FloatArray, r: FloatArray, bias: FloatArray, h_prev: FloatArray,
                                c_prev: FloatArray) -> tuple[Float64Array, Float64Array, Float64Array]:
    """(h, c, gates) of one step of the multi-head LSTM (the cell: this module's docstring): h and c
    (batch, H), gates (batch, 4H) the activated i, f, z, o that lstm_backward_step takes.

    wx: this step's input projections x W_in (columns i, f, z, o of H = heads * size units each, no bias).
    r: the recurrent weights, block-diagonal over heads: R[g, n, d, k] takes unit k of head n's h_prev
    into unit d of gate g of head n. bias: added to the pre-activations, in wx's column order.
    h_prev, c_prev: the state before the step."""
    r = f64(r)
    n, d, hidden = _shape(r)
    batch = wx.shape[0]
    rec = np.einsum("gndk,bnk->bgnd", r, f64(h_prev).reshape(batch, n, d)).reshape(batch, 4 * hidden)
    raw = (f64(wx) + rec + f64(bias).reshape(-1)).reshape(batch, 4, hidden)
    i, f, z, o = _sig64(raw[:, 0]), _sig64(raw[:, 1]), np.tanh(raw[:, 2]), _sig64(raw[:, 3])
    c = f * f64(c_prev) + i * z
    h = o * np.tanh(c)
    return h, c, np.concatenate([i, f, z, o], axis=1)


@op(cases=_backward_step_cases, tolerance=TOLERANCE,
    args={"dh": UNITS, "dc": UNITS, "r": R, "gates": GATE_COLUMNS, "c": UNITS, "c_prev": UNITS,
          "dh_extra": f"{UNITS} | None"})
def reference_lstm_backward_step(dh: FloatArray, dc: FloatArray, r: FloatArray, gates: FloatArray, c: FloatArray,
                                 c_prev: FloatArray,
                                 dh_extra: FloatArray | None = None) -> tuple[Float64Array, Float64Array, Float64Array]:
    """(draw (batch, 4H), dh_prev (batch, H), dc_prev (batch, H)) of one step: draw the gradients of the
    gate pre-activations (raw_g), dh_prev = R^T draw per head (+ dh_extra), dc_prev through the cell.

    dh, dc: the loss's gradients with respect to this step's h and c. r: the recurrent weights
    (lstm_forward_step). gates: the step's activated gates, c: its cell state, c_prev: the cell state
    before it (lstm_forward_step's outputs and argument). dh_extra: a gradient reaching h_prev other than
    through this step (the loss's gradient on the previous step's output), added to dh_prev; None: none."""
    r, gates = f64(r), f64(gates)
    n, d, hidden = _shape(r)
    batch = gates.shape[0]
    i, f, z, o = (gates[:, g * hidden:(g + 1) * hidden] for g in range(4))
    dh, tc = f64(dh), np.tanh(f64(c))
    dct = f64(dc) + dh * o * (1.0 - tc * tc)
    draw = np.concatenate([dct * z * i * (1.0 - i), dct * f64(c_prev) * f * (1.0 - f),
                           dct * i * (1.0 - z * z), dh * tc * o * (1.0 - o)], axis=1)
    dh_prev = np.einsum("gndk,bgnd->bnk", r, draw.reshape(batch, 4, n, d)).reshape(batch, hidden)
    if dh_extra is not None:
        dh_prev = dh_prev + f64(dh_extra)
    return draw, dh_prev, dct * f


@op(cases=_recurrent_grad_cases, tolerance=TOLERANCE,
    args={"draw": "float[steps, batch, 4 * hidden]", "hs": "float[steps + 1, batch, hidden]", "heads": "int"})
def reference_lstm_recurrent_grad(draw: FloatArray, hs: FloatArray, heads: int) -> Float64Array:
    """dR (4, heads, D, D), D = hidden / heads: the gradient of the recurrent weights,
    dR[g, n, d, k] = sum over steps t and batch rows b of draw[t, b, gate g, head n, unit d] hs[t, b, n, k].

    draw: every step's gradients of the gate pre-activations (lstm_backward's first output). hs: the
    states of lstm_forward, hs[t] the state entering step t (its last is not read). heads: how many
    heads the hidden units are cut into (a whole number of units each)."""
    draw, hs = f64(draw), f64(hs)
    steps, batch, four_h = draw.shape
    hidden = four_h // 4
    d = hidden // heads
    g = draw.reshape(steps * batch, 4, heads, d)
    prev = hs[:steps].reshape(steps * batch, heads, d)
    return np.einsum("xgnd,xnk->gndk", g, prev)


@op(cases=_forward_cases, tolerance=TOLERANCE,
    args={"table": "float[table_rows, 4 * heads * size]", "rows": "int32[steps, batch]", "r": R,
          "bias": "float[4 * heads * size]", "states0": "float[2, heads * size]", "keep": "bool"})
def reference_lstm_forward(table: FloatArray, rows: Int32Array, r: FloatArray, bias: FloatArray, states0: FloatArray,
                           keep: bool = False) -> tuple[Float64Array, Float64Array | None, Float64Array | None]:
    """(hs (T+1, B, H), cs (T+1, B, H), gates (T, B, 4H)): the multi-head LSTM over T steps of B sequences
    (lstm_forward_step at every step); hs[0], cs[0] the initial state, hs[t + 1] the output of step t;
    cs and gates (the activated i, f, z, o that lstm_backward takes) are None unless `keep`.

    table: the input projections of every token (lstm_input_projection of the embedding), read by row.
    rows: the table row of step t, sequence b (the token ids, time-major; checked against the table on
    the host). r, bias: the recurrent weights and bias (lstm_forward_step). states0: the learned initial
    h (row 0) and c (row 1), the same for every sequence. keep: also return cs and gates, for training."""
    _check_rows(table, rows)
    steps, batch = rows.shape
    wx = np.asarray(table)[np.asarray(rows, np.int64)]
    n, d, hidden = _shape(r)
    states0 = f64(states0).reshape(2, hidden)
    hs, cs = np.empty((steps + 1, batch, hidden)), np.empty((steps + 1, batch, hidden))
    hs[0], cs[0] = states0[0], states0[1]
    gates = np.empty((steps, batch, 4 * hidden))
    for t in range(steps):
        hs[t + 1], cs[t + 1], gates[t] = reference_lstm_forward_step(wx[t], r, bias, hs[t], cs[t])
    return (hs, cs, gates) if keep else (hs, None, None)


@op(cases=_backward_cases, tolerance=TOLERANCE,
    args={"dh_out": "float[steps, batch, heads * size]", "r": R, "hs": "float[steps + 1, batch, heads * size]",
          "cs": "float[steps + 1, batch, heads * size]", "gates": "float[steps, batch, 4 * heads * size]"})
def reference_lstm_backward(dh_out: FloatArray, r: FloatArray, hs: FloatArray, cs: FloatArray,
                            gates: FloatArray) -> tuple[Float64Array, Float64Array, Float64Array, Float64Array]:
    """(draw (T, B, 4H), dR (4, heads, size, size), dh0 (B, H), dc0 (B, H)): full BPTT through lstm_forward.
    draw: every step's gradients of the gate pre-activations (summed over rows: the bias's gradient; by
    token: the input table's); dR: the recurrent weights'; dh0, dc0: the initial state's, per sequence.

    dh_out: the loss's gradients with respect to every step's output hs[1:]. r: the recurrent weights;
    hs, cs, gates: lstm_forward's outputs with keep=True."""
    steps = dh_out.shape[0]
    draw = np.empty(gates.shape)
    dh, dc = f64(dh_out[steps - 1]), np.zeros(dh_out.shape[1:])
    for t in range(steps - 1, -1, -1):
        extra = dh_out[t - 1] if t > 0 else None
        draw[t], dh, dc = reference_lstm_backward_step(dh, dc, r, gates[t], cs[t + 1], cs[t], extra)
    return draw, reference_lstm_recurrent_grad(draw, hs, r.shape[1]), dh, dc


@op(cases=_projection_cases, tolerance=TOLERANCE, args={"x": "float[rows, d_in]", "w_in": "float[d_in, d_out]"})
def reference_lstm_input_projection(x: FloatArray, w_in: FloatArray) -> Float64Array:
    """x W_in (rows, d_out): the input projections of every row of x, which lstm_forward reads as its table.

    x: the inputs (the embedding table, one row a token). w_in: the input weights, d_out = 4H columns in
    the gate order i, f, z, o."""
    return f64(x) @ f64(w_in)


@op(cases=_projection_backward_cases, tolerance=TOLERANCE,
    args={"dwx": "float[rows, d_out]", "x": "float[rows, d_in]", "w_in": "float[d_in, d_out]"})
def reference_lstm_input_projection_backward(dwx: FloatArray, x: FloatArray,
                                             w_in: FloatArray) -> tuple[Float64Array, Float64Array]:
    """(dx (rows, d_in), dw_in (d_in, d_out)) = (dwx W_in^T, x^T dwx): lstm_input_projection's gradients.

    dwx: the loss's gradient with respect to the projections (for the table: lstm_backward's draw summed
    by token). x, w_in: the forward's arguments."""
    dwx = f64(dwx)
    return dwx @ f64(w_in).T, f64(x).T @ dwx


# ---- CPU twins (fp32) ---------------------------------------------------------------------------------

@parallel_jit(error_model="numpy")
def _cpu_forward_step(wx, rows, r, bias, h_prev, c_prev, h, c, gates, keep):
    for i in numba.prange(h.size):
        _cpu_forward_element(wx, rows, r, bias, h_prev, c_prev, h, c, gates, keep, i)


@parallel_jit(error_model="numpy")
def _cpu_backward_gates(dh, dc, gates, c, c_prev, draw, dc_prev):
    for i in numba.prange(dh.size):
        _cpu_backward_gates_element(dh, dc, gates, c, c_prev, draw, dc_prev, i)


@parallel_jit(error_model="numpy")
def _cpu_backward_recurrent(draw, r, dh_extra, dh_prev):
    for i in numba.prange(dh_prev.size):
        _cpu_backward_recurrent_element(draw, r, dh_extra, dh_prev, i)


@op
def cpu_lstm_forward_step(wx: Float32Array, r: Float32Array, bias: Float32Array, h_prev: Float32Array,
                          c_prev: Float32Array) -> tuple[Float32Array, Float32Array, Float32Array]:
    h, c = np.empty(h_prev.shape, np.float32), np.empty(h_prev.shape, np.float32)
    gates = np.empty((h_prev.shape[0], 4 * h_prev.shape[1]), np.float32)
    rows = np.arange(h_prev.shape[0], dtype=np.int32)
    _cpu_forward_step(wx, rows, r, bias.reshape(-1), h_prev, c_prev, h, c, gates, True)
    return h, c, gates


@op
def cpu_lstm_backward_step(dh: Float32Array, dc: Float32Array, r: Float32Array, gates: Float32Array, c: Float32Array,
                           c_prev: Float32Array,
                           dh_extra: Float32Array | None = None) -> tuple[Float32Array, Float32Array, Float32Array]:
    draw = np.empty(gates.shape, np.float32)
    dc_prev, dh_prev = np.empty(dh.shape, np.float32), np.empty(dh.shape, np.float32)
    _cpu_backward_gates(dh, dc, gates, c, c_prev, draw, dc_prev)
    extra = np.zeros(dh.shape, np.float32) if dh_extra is None else dh_extra
    _cpu_backward_recurrent(draw, r, extra, dh_prev)
    return draw, dh_prev, dc_prev


@op
def cpu_lstm_recurrent_grad(draw: Float32Array, hs: Float32Array, heads: int) -> Float32Array:
    """dR per head as one batched matrix product on BLAS: (4D x T B) draw^T times (T B x D) h_{t-1}
    (7.7x the element-per-thread loop at Table 1 100k, batch 1024 x 11 steps)."""
    steps, batch, four_h = draw.shape
    size, rows = four_h // 4 // heads, steps * batch
    a = np.asarray(draw, np.float32).reshape(rows, 4, heads, size).transpose(2, 1, 3, 0).reshape(heads, 4 * size, rows)
    b = np.asarray(hs, np.float32)[:steps].reshape(rows, heads, size).transpose(1, 0, 2)
    return np.ascontiguousarray(np.matmul(a, b).reshape(heads, 4, size, size).transpose(1, 0, 2, 3))


@op
def cpu_lstm_forward(table: Float32Array, rows: Int32Array, r: Float32Array, bias: Float32Array, states0: Float32Array,
                     keep: bool = False) -> tuple[Float32Array, Float32Array | None, Float32Array | None]:
    _check_rows(table, rows)
    steps, batch = rows.shape
    heads, size, hidden = _shape(r)
    states0 = np.asarray(states0, np.float32).reshape(2, hidden)
    hs = np.empty((steps + 1, batch, hidden), np.float32)
    hs[0] = states0[0]
    cs = gates = np.empty((1, 1, 1), np.float32)  # written only when kept
    if keep:
        cs = np.empty((steps + 1, batch, hidden), np.float32)
        cs[0] = states0[1]
        gates = np.empty((steps, batch, 4 * hidden), np.float32)
    table_t = np.ascontiguousarray((np.asarray(table, np.float32) + np.asarray(bias, np.float32).reshape(-1)).T)
    rt = np.ascontiguousarray(np.asarray(r, np.float32).transpose(1, 3, 0, 2)).reshape(heads, size, 4 * size)
    forward_sequence(table_t, np.ascontiguousarray(rows), rt, np.ascontiguousarray(states0[1]), hs, cs, gates, keep)
    return (hs, cs, gates) if keep else (hs, None, None)


@op
def cpu_lstm_backward(dh_out: Float32Array, r: Float32Array, hs: Float32Array, cs: Float32Array,
                      gates: Float32Array) -> tuple[Float32Array, Float32Array, Float32Array, Float32Array]:
    steps, batch, hidden = dh_out.shape
    draw = np.empty(gates.shape, np.float32)
    dh, dc = np.empty((batch, hidden), np.float32), np.zeros((batch, hidden), np.float32)
    zeros = np.zeros((batch, hidden), np.float32)
    for t in range(steps - 1, -1, -1):
        _cpu_backward_gates(dh_out[t] if t == steps - 1 else dh, dc, gates[t], cs[t + 1], cs[t], draw[t], dc)
        _cpu_backward_recurrent(draw[t], r, dh_out[t - 1] if t > 0 else zeros, dh)
    return draw, cpu_lstm_recurrent_grad(draw, hs, r.shape[1]), dh, dc


@op
def cpu_lstm_input_projection(x: Float32Array, w_in: Float32Array) -> Float32Array:
    return np.ascontiguousarray(x @ w_in)


@op
def cpu_lstm_input_projection_backward(dwx: Float32Array, x: Float32Array,
                                       w_in: Float32Array) -> tuple[Float32Array, Float32Array]:
    return np.ascontiguousarray(dwx @ w_in.T), np.ascontiguousarray(x.T @ dwx)


# ---- CUDA kernels ---------------------------------------------------------------------------------------

@kernel((F32_2D, I32_1D, F32_4D, F32_1D, F32_2D, F32_2D, F32_2D, F32_2D, F32_2D, BOOL), block=THREADS)
def forward_step_cuda(wx, rows, r, bias, h_prev, c_prev, h, c, gates, keep):
    i = cuda.grid(1)
    if i < h.size:
        _gpu_forward_element(wx, rows, r, bias, h_prev, c_prev, h, c, gates, keep, i)


@kernel((F32_2D, F32_2D, F32_2D, F32_2D, F32_2D, F32_2D, F32_2D), block=THREADS)
def backward_gates_cuda(dh, dc, gates, c, c_prev, draw, dc_prev):
    i = cuda.grid(1)
    if i < dh.size:
        _gpu_backward_gates_element(dh, dc, gates, c, c_prev, draw, dc_prev, i)


@kernel((F32_2D, F32_4D, F32_2D, F32_2D), block=THREADS)
def backward_recurrent_cuda(draw, r, dh_extra, dh_prev):
    i = cuda.grid(1)
    if i < dh_prev.size:
        _gpu_backward_recurrent_element(draw, r, dh_extra, dh_prev, i)


@kernel((F32_2D, F32_2D, F32_2D), block=THREADS)
def broadcast_state_cuda(states0, h, c):
    """h[b] = states0[0], c[b] = states0[1] for every batch row."""
    batch, hidden = h.shape
    i = cuda.grid(1)
    if i < batch * hidden:
        b, j = i // hidden, i % hidden
        h[b, j] = states0[0, j]
        c[b, j] = states0[1, j]


@op
def cuda_lstm_forward_step(wx: BackendArray, r: BackendArray, bias: BackendArray, h_prev: BackendArray,
                           c_prev: BackendArray) -> tuple[BackendArray, BackendArray, BackendArray]:
    batch, hidden = h_prev.shape
    h, c = cuda.device_array((batch, hidden), np.float32), cuda.device_array((batch, hidden), np.float32)
    gates = cuda.device_array((batch, 4 * hidden), np.float32)
    rows = cuda.to_device(np.arange(batch, dtype=np.int32))
    forward_step_cuda[blocks(batch * hidden, THREADS)](wx, rows, r, bias.reshape(4 * hidden), h_prev, c_prev, h, c,
                                                       gates, True)
    return h, c, gates


@op
def cuda_lstm_backward_step(dh: BackendArray, dc: BackendArray, r: BackendArray, gates: BackendArray, c: BackendArray,
                            c_prev: BackendArray,
                            dh_extra: BackendArray | None = None) -> tuple[BackendArray, BackendArray, BackendArray]:
    batch, hidden = dh.shape
    draw = cuda.device_array((batch, 4 * hidden), np.float32)
    dc_prev, dh_prev = cuda.device_array((batch, hidden), np.float32), cuda.device_array((batch, hidden), np.float32)
    grid = blocks(batch * hidden, THREADS)
    backward_gates_cuda[grid](dh, dc, gates, c, c_prev, draw, dc_prev)
    extra = device_zeros((batch, hidden)) if dh_extra is None else dh_extra
    backward_recurrent_cuda[grid](draw, r, extra, dh_prev)
    return draw, dh_prev, dc_prev


@op
def cuda_lstm_recurrent_grad(draw: BackendArray, hs: BackendArray, heads: int) -> BackendArray:
    """One batched tiled product over all T B rows (kernels/rnn/lstm_backward_cuda.py)."""
    size = draw.shape[2] // 4 // heads
    dr = cuda.device_array((4, heads, size, size), np.float32)
    run_weight_grad(draw, hs, heads, dr, coresident_blocks())
    return dr


@op
def cuda_lstm_forward(table: BackendArray, rows: BackendArray, r: BackendArray, bias: BackendArray,
                      states0: BackendArray, keep: bool = False) -> tuple[BackendArray, BackendArray, BackendArray]:
    """Device (hs, cs, gates), or (hs, None, None): kernels/rnn/lstm_sequence_cuda.py, R in shared memory."""
    _check_rows(table, rows)
    steps, batch = rows.shape
    rows = rows if hasattr(rows, "copy_to_host") else cuda.to_device(np.ascontiguousarray(rows))
    _, _, hidden = _shape(r)
    bias, states0 = bias.reshape(4 * hidden), states0.reshape(2, hidden)
    hs = cuda.device_array((steps + 1, batch, hidden), np.float32)
    c_state = cuda.device_array((batch, hidden), np.float32)
    cs = cuda.device_array((steps + 1, batch, hidden), np.float32) if keep else cuda.device_array((1, 1, 1), np.float32)
    gates = cuda.device_array((steps, batch, 4 * hidden), np.float32) if keep else cuda.device_array((1, 1, 1),
                                                                                                   np.float32)
    broadcast_state_cuda[blocks(batch * hidden, THREADS)](states0, hs[0], c_state)
    if keep:
        cs[0].copy_to_device(c_state)
    run_sequence(table, rows, r, bias, hs, c_state, cs, gates, keep)
    return (hs, cs, gates) if keep else (hs, None, None)


@op
def cuda_lstm_backward(dh_out: BackendArray, r: BackendArray, hs: BackendArray, cs: BackendArray,
                       gates: BackendArray) -> tuple[BackendArray, BackendArray, BackendArray, BackendArray]:
    """Device (draw, dR, dh0, dc0) of full BPTT through the stored forward (keep=True): in one launch
    with R in shared memory where a head fits a block (kernels/rnn/lstm_sequence_cuda.py), else one
    tiled product a step with the gate gradients in its epilogue (kernels/rnn/lstm_backward_cuda.py);
    dR by one batched tiled product after either."""
    steps, batch, hidden = dh_out.shape
    draw = cuda.device_array(gates.shape, np.float32)
    dh = cuda.device_array((batch, hidden), np.float32)
    dc = cuda.device_array((batch, hidden), np.float32)  # written before it is read, in both paths
    run = run_sequence_backward if backward_fits(r.shape[1], r.shape[2], batch, steps) else run_tiled_backward
    run(on_device(dh_out), r, cs, gates, draw, dh, dc)
    return draw, cuda_lstm_recurrent_grad(draw, hs, r.shape[1]), dh, dc


@op
def cuda_lstm_input_projection(x: BackendArray, w_in: BackendArray) -> BackendArray:
    return tiled_product(x, w_in)


@op
def cuda_lstm_input_projection_backward(dwx: BackendArray, x: BackendArray,
                                        w_in: BackendArray) -> tuple[BackendArray, BackendArray]:
    return tiled_product(dwx, w_in, transpose_b=True), tiled_product(x, dwx, transpose_a=True)

# the ops of this module by name, for callers: lstm_backward(kernels, ...)
lstm_backward = registered(reference_lstm_backward)
lstm_backward_step = registered(reference_lstm_backward_step)
lstm_forward = registered(reference_lstm_forward)
lstm_forward_step = registered(reference_lstm_forward_step)
lstm_input_projection = registered(reference_lstm_input_projection)
lstm_input_projection_backward = registered(reference_lstm_input_projection_backward)
lstm_recurrent_grad = registered(reference_lstm_recurrent_grad)
