"""The multi-head LSTM's whole-sequence forward and backward on the GPU (the ops are lstm's
cuda_lstm_forward and cuda_lstm_backward), FlashRNN-style: a block owns one head (or a slice of its
units) for a tile of batch rows and keeps that part of R in shared memory.

More in docs/internals.md (kernels/rnn/lstm_sequence_cuda.py)."""

import math

import numba
import numpy as np

from eggnog.kernels.core.cuda_api import (
    BOOL,
    F32_1D,
    F32_2D,
    F32_4D,
    I64,
    allow_dynamic_shared,
    cuda,
    device_function,
    flat,
    kernel,
)
from eggnog.kernels.core.cuda_fast_math import reciprocal_approx
from eggnog.kernels.core.loads import load_shared_v4
from eggnog.kernels.core.tuning import Tunable

SHARED_BUDGET = 48 * 1024  # bytes of R per block: what a block gets without the opt-in
OPT_IN_BUDGET = 227 * 1024  # with the opt-in: the most sm_90 allows a block
H100_SMS = 132  # the static plan's co-resident blocks (one per SM); at run time the device's count
ROWS = 6  # batch rows a persistent thread computes: each 16-byte load of R serves six (eight spill)
ROW_VARIANTS = (4, 5, 6)  # the persistent kernel's launch variants (kernels/core/tuning.py), ROWS the default
MAX_THREADS = 512  # a 1024-thread block allows 64 registers a thread; these kernels take more (persistent: 120)


def _device_activations():
    @device_function
    def sigmoid(x):  # the approximate reciprocal: no IEEE-division slow path (at most 1 ulp more)
        return reciprocal_approx(np.float32(1.0) + math.exp(-x))

    @device_function
    def tanh(x):
        return math.tanh(x)

    return sigmoid, tanh


gpu_sigmoid, gpu_tanh = _device_activations()


def _pitch(size):
    return size | 1


def shared_bytes(size, units):
    """Dynamic shared memory of the sequence kernels: the slice's R, gates innermost, at an odd pitch."""
    return 16 * units * _pitch(size)


def _span(size):
    """The persistent kernel's k extent: the head size rounded up to 4 (R and h padded with zeros), so
    its dot runs on 16-byte loads, four k an iteration."""
    return (size + 3) // 4 * 4


def row_lanes(units):
    """Thread rows of a persistent block: each thread takes one unit for `rows` batch rows at a time."""
    return MAX_THREADS // units


def persistent_bytes(size, units, rows=ROWS):
    """The persistent kernel's R (k padded to the span, odd pitch) and its staged h_(t-1) rows: `rows` per
    thread row."""
    return 16 * units * (_span(size) | 1) + 4 * rows * row_lanes(units) * _span(size)


def _traffic(heads, size, batch, steps, units, mode):
    """Bytes per row-step beyond the on-chip minimum, for a slice of `units` in a mode."""
    hidden = heads * size
    h_reads = 4 * hidden * size / units
    if mode == "persistent":
        return h_reads + 8 * hidden
    rows = min(batch, MAX_THREADS // units)
    return h_reads + 16 * size * size * heads / rows / (steps if mode == "sequence" else 1)


def coresident_blocks():
    """Blocks of OPT_IN_BUDGET shared memory a cooperative grid may hold on this device: one per SM.
    numba's simulated device states no SM count, and its cooperative grids hold one block."""
    return getattr(cuda.get_current_device(), "MULTIPROCESSOR_COUNT", 1)


def plan(heads, size, batch, steps, coresident=None, rows=ROWS):
    """(units per block, rows per tile, mode) for a head size, batch and length; `coresident` is the
    number of blocks a cooperative grid may hold (default: this device's), `rows` the persistent kernel's
    rows a thread."""
    if shared_bytes(size, size) <= SHARED_BUDGET:
        return size, min(batch, MAX_THREADS // size), "sequence"
    divisors = [u for u in range(min(size, MAX_THREADS), 0, -1) if size % u == 0]
    largest = next((u for u in divisors if persistent_bytes(size, u, rows) <= OPT_IN_BUDGET), None)
    coresident = coresident_blocks() if coresident is None and largest else coresident
    if largest and heads * (size // largest) <= coresident:
        return largest, batch, "persistent"
    fitting = [u for u in divisors if shared_bytes(size, u) <= SHARED_BUDGET]
    if not fitting:
        raise ValueError(f"one unit of R ({shared_bytes(size, 1)} bytes) exceeds the shared-memory budget")
    units = min(fitting, key=lambda u: (_traffic(heads, size, batch, steps, u, "per step"), -u))
    return units, min(batch, MAX_THREADS // units), "per step"


def step_traffic(heads, size, batch, steps, coresident=H100_SMS):
    """(bytes moved per step and batch row under the plan, on-chip minimum)."""
    units, _, mode = plan(heads, size, batch, steps, coresident)
    minimum = 4 * 5 * heads * size
    return minimum + _traffic(heads, size, batch, steps, units, mode), minimum


@device_function
def _gate_inputs(table, rows, bias, t, b, j):
    """Unit j's four gate pre-activations for batch row b at step t before the recurrence: its wx table
    row plus the bias."""
    hidden = table.shape[1] // 4
    row = rows[t, b]
    return (table[row, j] + bias[j], table[row, hidden + j] + bias[hidden + j],
            table[row, 2 * hidden + j] + bias[2 * hidden + j], table[row, 3 * hidden + j] + bias[3 * hidden + j])


@device_function
def _finish(outs, keep, t, b, j, batch, hidden, pre, c):
    """The cell from the four pre-activations `pre` (i, f, z, o) and c_(t-1): writes h_t (and c_t and the
    gates when `keep`) into the flat arrays of outs = (hs, cs, gates); returns c_t."""
    hs, cs, gates = outs
    ri, rf, rz, ro = pre
    ig, fg, zg, og = gpu_sigmoid(ri), gpu_sigmoid(rf), gpu_tanh(rz), gpu_sigmoid(ro)
    c = fg * c + ig * zg
    row_stride = np.uint64(batch * hidden)
    out = np.uint64(t + 1) * row_stride + np.uint64(b * hidden + j)
    hs[out] = og * gpu_tanh(c)
    if keep:
        cs[out] = c
        at = np.uint64(t) * np.uint64(4) * row_stride + np.uint64(b * 4 * hidden + j)
        gates[at] = ig
        gates[at + np.uint64(hidden)] = fg
        gates[at + np.uint64(2 * hidden)] = zg
        gates[at + np.uint64(3 * hidden)] = og
    return c


@device_function
def _unit_step(ins, r_s, outs, keep, t, b, unit, units, size, c):
    """Step t of unit s * units + u of head n, unit = (n, s, u), for batch row b, from c_{t-1} (the
    sequence kernel); ins = (table, rows, bias), outs = (hs, cs, gates)."""
    table, rows, bias = ins
    hs = outs[0]
    n, s, u = unit
    hidden = table.shape[1] // 4
    batch = rows.shape[1]
    pitch = size | 1
    j = n * size + s * units + u
    ri, rf, rz, ro = _gate_inputs(table, rows, bias, t, b, j)
    h_at = np.uint64(t) * np.uint64(batch * hidden) + np.uint64(b * hidden + n * size)
    h_prev = hs[h_at:h_at + np.uint64(size)]
    at = np.uint64(u * pitch * 4)
    k, end = np.uint64(0), np.uint64(size)
    while k < end:  # unsigned 64-bit throughout: no wraparound code and none of range()'s bookkeeping
        hk = h_prev[k]
        wi, wf, wz, wo = load_shared_v4(r_s, np.int64(at + (k << np.uint64(2))))  # R[unit][k][0..3]: one LDS.128
        ri += wi * hk
        rf += wf * hk
        rz += wz * hk
        ro += wo * hk
        k += np.uint64(1)
    return _finish(outs, keep, t, b, j, batch, hidden, (ri, rf, rz, ro), c)


@device_function
def _stage_r(r, r_s, n, s, units, size, pitch, span):
    """The slice's rows of head n's R into shared memory, gates innermost: R[unit][k][g] at word
    4 (unit pitch + k) + g, so one 16-byte load gives a (unit, k)'s four gates; k from size to span
    is zero."""
    for e in range(cuda.threadIdx.x, 4 * units * span, cuda.blockDim.x):
        g, u, k = e // (units * span), (e // span) % units, e % span
        r_s[(u * pitch + k) * 4 + g] = r[g, n, s * units + u, k] if k < size else np.float32(0.0)
    cuda.syncthreads()


@kernel((F32_2D, numba.int32[:, ::1], F32_4D, F32_1D, F32_1D, F32_2D, F32_1D, F32_1D, BOOL, I64, I64, I64, I64),
        block=MAX_THREADS)
def forward_sequence_cuda(table, rows, r, bias, hs, c_state, cs, gates, keep, first, last, units, tile):
    """Steps first..last-1 for block (head n, unit slice s, row tile), a thread per (unit, row), c in a
    register; hs, cs (T + 1, B, H) and gates (T, B, 4H) flat, hs[first] holding h_{first-1}."""
    size = r.shape[2]
    batch = rows.shape[1]
    slices = size // units
    tiles = (batch + tile - 1) // tile
    n = cuda.blockIdx.x // (slices * tiles)
    s = (cuda.blockIdx.x // tiles) % slices
    r_s = cuda.shared.array(0, numba.float32)
    _stage_r(r, r_s, n, s, units, size, size | 1, size)
    u = cuda.threadIdx.x % units
    b = (cuda.blockIdx.x % tiles) * tile + cuda.threadIdx.x // units
    j = n * size + s * units + u
    active = cuda.threadIdx.x < units * tile and b < batch
    c = c_state[b, j] if active else np.float32(0.0)
    for t in range(first, last):
        if active:
            c = _unit_step((table, rows, bias), r_s, (hs, cs, gates), keep, t, b, (n, s, u), units, size, c)
        cuda.syncthreads()  # h_t is complete for every row of the tile before step t + 1 reads it
    if active:
        c_state[b, j] = c


@device_function
def _stage_h(hs, shared, base, t, first_row, group, batch, hidden, n, size, span):
    """h_(t-1) of head n for batch rows first_row .. first_row + group - 1 into shared[base:], a row
    every span words, zeros past the batch and past the head size; consecutive threads take
    consecutive k of a row, so the global loads coalesce. A thread has four loads in flight before it
    stores: the staging is a few L2 round trips, not one per word."""
    step, end = np.int64(cuda.blockDim.x), group * span
    e = np.int64(cuda.threadIdx.x)
    while e < end:  # not range(): its trip count is a 64-bit division, a call into cudadevrt
        v0 = _staged_word(hs, e, t, first_row, batch, hidden, n, size, span)
        v1 = _staged_word(hs, e + step, t, first_row, batch, hidden, n, size, span)
        v2 = _staged_word(hs, e + 2 * step, t, first_row, batch, hidden, n, size, span)
        v3 = _staged_word(hs, e + 3 * step, t, first_row, batch, hidden, n, size, span)
        _store_staged(shared, base, e, end, v0)
        _store_staged(shared, base, e + step, end, v1)
        _store_staged(shared, base, e + 2 * step, end, v2)
        _store_staged(shared, base, e + 3 * step, end, v3)
        e += 4 * step
    cuda.syncthreads()


@device_function
def _store_staged(shared, base, e, end, v):
    if e < end:
        shared[base + e] = v


@device_function
def _staged_word(hs, e, t, first_row, batch, hidden, n, size, span):
    """Word e of a staged group: h_(t-1)[first_row + e // span, n * size + e % span], zero past the
    batch and the head size."""
    row = np.int64(np.uint32(e) // np.uint32(span))
    k = e - row * span
    b = first_row + row
    if b < batch and k < size:
        return hs[np.uint64(t) * np.uint64(batch * hidden) + np.uint64(b * hidden + n * size + k)]
    return np.float32(0.0)


@device_function
def _row_four_k(shared, h_at, w, acc):
    """Four k of one row's dot: its h as one 16-byte load against the four k's gates w (16 words)."""
    x0, x1, x2, x3 = load_shared_v4(shared, np.int64(h_at))
    i, f, z, o = acc
    i, f, z, o = i + w[0] * x0, f + w[1] * x0, z + w[2] * x0, o + w[3] * x0
    i, f, z, o = i + w[4] * x1, f + w[5] * x1, z + w[6] * x1, o + w[7] * x1
    i, f, z, o = i + w[8] * x2, f + w[9] * x2, z + w[10] * x2, o + w[11] * x2
    return i + w[12] * x3, f + w[13] * x3, z + w[14] * x3, o + w[15] * x3


@device_function
def _r_words(shared, w_at):
    """A unit's four gates of R for four k: four 16-byte loads (16 words)."""
    return (load_shared_v4(shared, np.int64(w_at)) + load_shared_v4(shared, np.int64(w_at + np.uint64(4)))
            + load_shared_v4(shared, np.int64(w_at + np.uint64(8)))
            + load_shared_v4(shared, np.int64(w_at + np.uint64(12))))


def _rows_dot_of(rows):
    """Four k of `rows` rows' dots (h staged `stride` words apart) against the same R words w: accs holds
    the rows' (i, f, z, o). Built by recursion over the rows, so every index is a constant (no run-time
    index into the tuple) and the code is that of the rows written out."""
    if rows == 1:
        @device_function
        def dot(shared, h_at, stride, w, accs):
            return (_row_four_k(shared, h_at, w, accs[0]),)
        return dot
    rest = _rows_dot_of(rows - 1)

    @device_function
    def dots(shared, h_at, stride, w, accs):
        return (_row_four_k(shared, h_at, w, accs[0]),) + rest(shared, h_at + stride, stride, w, accs[1:])
    return dots


def _zeros_of(rows):
    """`rows` accumulators (i, f, z, o) of zeros (recursion, as `_rows_dot_of`)."""
    if rows == 1:
        @device_function
        def zero():
            z = np.float32(0.0)
            return ((z, z, z, z),)
        return zero
    rest = _zeros_of(rows - 1)

    @device_function
    def zeros():
        z = np.float32(0.0)
        return ((z, z, z, z),) + rest()
    return zeros


@device_function
def _row_end(ins, outs, c_state, keep, t, b, j, acc):
    """Row b's cell from its dot `acc` (i, f, z, o) plus its gate inputs, skipping rows past the batch
    (computed, never written)."""
    table, rows, bias = ins
    batch, hidden = rows.shape[1], table.shape[1] // 4
    if b < batch:
        wi, wf, wz, wo = _gate_inputs(table, rows, bias, t, b, j)
        i, f, z, o = acc
        pre = (wi + i, wf + f, wz + z, wo + o)
        c_state[b, j] = _finish(outs, keep, t, b, j, batch, hidden, pre, c_state[b, j])


def persistent_name(rows):
    """The kernel of `rows` rows a thread: the default keeps the plain name (the static report's)."""
    return "forward_persistent_cuda" if rows == ROWS else f"forward_persistent_cuda_rows{rows}"


def _four_k_of(rows):
    """Four k of the persistent kernel's dot for its `rows` rows: a unit's four gates of R for each k as
    one 16-byte load, used for every row."""
    rows_dot = _rows_dot_of(rows)

    @device_function
    def four_k(shared, h_at, stride, w_at, accs):
        return rows_dot(shared, h_at, stride, _r_words(shared, w_at), accs)
    return four_k


def _persistent_template(rows):
    """The persistent kernel computing `rows` rows a thread (4 to 6, ROW_VARIANTS), compiled for that count."""
    assert 4 <= rows <= 6, "the row ends below are written out for 4 to 6 rows"
    four_k, zeros = _four_k_of(rows), _zeros_of(rows)

    def forward_persistent(table, rows_in, r, bias, hs, c_state, cs, gates, keep, units, lanes):
        """Every step in one cooperative launch for block (head n, unit slice s) over the whole batch; the
        grid synchronises between steps (every slice of a head reads every unit of h_{t-1}), c lives in
        c_state. Per step the batch goes in groups of `rows` x lanes rows: the group's h_(t-1) is staged in
        shared memory behind R, then thread (unit u, lane l) computes unit u for rows l, l + lanes, ... of
        the group, four k at a time: four 16-byte R loads serve all its rows, each row's h is one 16-byte
        load, 16 FMAs a row; the gate inputs and c are added after the dot, so the loop holds only the
        accumulators, R and h. `launch_bounds` holds it to 128 registers, so 512 threads fit an SM (with
        eight rows ptxas spills). lanes (threads a unit) comes from the launcher, and the divisions are
        32-bit: a 64-bit one is a call into cudadevrt (slow, and opaque to the static model)."""
        size = r.shape[2]
        steps, batch = rows_in.shape
        hidden = table.shape[1] // 4
        block, per = np.uint32(cuda.blockIdx.x), np.uint32(units)  # 32-bit divisions (docstring)
        slices = np.uint32(size) // per
        n, s = np.int64(block // slices), np.int64(block % slices)
        span = (size + 3) // 4 * 4  # _span(size), which device code cannot call
        pitch = span | 1
        shared = cuda.shared.array(0, numba.float32)
        _stage_r(r, shared, n, s, units, size, pitch, span)
        h_base = 4 * units * pitch  # the staged rows start 16-byte aligned after R
        u, lane = np.int64(np.uint32(cuda.threadIdx.x) % per), np.int64(np.uint32(cuda.threadIdx.x) // per)
        j = n * size + s * units + u
        r_at = np.uint64(u * pitch * 4)
        end = np.uint64(span)
        stride = np.uint64(lanes * span)
        ins, outs = (table, rows_in, bias), (hs, cs, gates)
        grid = cuda.cg.this_grid()
        for t in range(steps):
            first_row = np.int64(0)
            while first_row < batch:  # not range(), as in _stage_h
                _stage_h(hs, shared, h_base, t, first_row, rows * lanes, batch, hidden, n, size, span)
                if lane < lanes:
                    accs = zeros()
                    h_at = np.uint64(h_base + lane * span)
                    k = np.uint64(0)
                    while k < end:
                        accs = four_k(shared, h_at + k, stride, r_at + (k << np.uint64(2)), accs)
                        k += np.uint64(4)
                    b = first_row + lane  # each row's cell written out (through a device function the
                    # tuple made ptxas spill); the rows past `rows` are pruned when the kernel compiles
                    _row_end(ins, outs, c_state, keep, t, b, j, accs[0])
                    _row_end(ins, outs, c_state, keep, t, b + lanes, j, accs[1])
                    _row_end(ins, outs, c_state, keep, t, b + 2 * lanes, j, accs[2])
                    _row_end(ins, outs, c_state, keep, t, b + 3 * lanes, j, accs[3])
                    if rows > 4:
                        _row_end(ins, outs, c_state, keep, t, b + 4 * lanes, j, accs[4])
                    if rows > 5:
                        _row_end(ins, outs, c_state, keep, t, b + 5 * lanes, j, accs[5])
                cuda.syncthreads()  # every thread is done with the staged rows before the next group's
                first_row += rows * lanes
            grid.sync()

    forward_persistent.__name__ = forward_persistent.__qualname__ = persistent_name(rows)
    signature = (F32_2D, numba.int32[:, ::1], F32_4D, F32_1D, F32_1D, F32_2D, F32_1D, F32_1D, BOOL, I64, I64)
    return kernel(signature, block=MAX_THREADS, launch_bounds=MAX_THREADS)(forward_persistent)


# every variant bound at module level (the PTX inventory finds kernels there); the default by its plain name
forward_persistent_cuda_rows4 = _persistent_template(4)
forward_persistent_cuda_rows5 = _persistent_template(5)
forward_persistent_cuda = _persistent_template(ROWS)
PERSISTENT = {4: forward_persistent_cuda_rows4, 5: forward_persistent_cuda_rows5, ROWS: forward_persistent_cuda}
assert tuple(sorted(PERSISTENT)) == ROW_VARIANTS


def rows_variant(rows):
    return f"rows{rows}"


def run(table, rows, r, bias, hs, c_state, cs, gates, keep, variant=None):
    """Launch the plan over all steps; hs[0] and c_state hold the initial states on entry, c_state the
    last c on return. `variant` (rows4, rows5, rows6) names the persistent kernel's rows a thread; None
    asks the tuning file (PERSISTENT_TUNABLE) for this device and size."""
    heads, size = r.shape[1], r.shape[2]
    steps, batch = rows.shape
    variant = variant or PERSISTENT_TUNABLE.choose((heads, size, batch))
    per_thread = int(variant.removeprefix("rows"))
    units, tile, mode = plan(heads, size, batch, steps, rows=per_thread)
    nbytes = persistent_bytes(size, units, per_thread) if mode == "persistent" else shared_bytes(size, units)
    if mode == "persistent":
        launched = PERSISTENT[per_thread]
        args = (table, rows, r, bias, flat(hs), c_state, flat(cs), flat(gates), keep, units, MAX_THREADS // units)
        allow_dynamic_shared(launched, args, nbytes)
        launched[heads * (size // units), MAX_THREADS, 0, nbytes](*args)
        return
    grid = heads * (size // units) * math.ceil(batch / tile)
    spans = [(0, steps)] if mode == "sequence" else [(t, t + 1) for t in range(steps)]
    for first, last in spans:
        forward_sequence_cuda[grid, units * tile, 0, nbytes](table, rows, r, bias, flat(hs), c_state, flat(cs),
                                                             flat(gates), keep, first, last, units, tile)


TUNED_STEPS = 11  # steps a tuning launch runs (Table 1's windows)


def _tuning_launch(variant, sizes):
    """Device inputs of a forward of (heads, head size, batch) over TUNED_STEPS steps, and the launch of
    `variant` on them (the tuner's Tunable.run): a persistent launch where the plan is persistent."""
    heads, size, batch = sizes
    rng = np.random.default_rng(0)
    hidden = heads * size
    table = cuda.to_device(rng.normal(0, 1, (batch, 4 * hidden)).astype(np.float32))
    rows = cuda.to_device(rng.integers(0, batch, (TUNED_STEPS, batch)).astype(np.int32))
    r = cuda.to_device((rng.normal(0, 1, (4, heads, size, size)) / np.sqrt(size)).astype(np.float32))
    bias = cuda.to_device(np.zeros(4 * hidden, np.float32))
    hs = cuda.to_device(np.zeros((TUNED_STEPS + 1, batch, hidden), np.float32))
    c_state = cuda.to_device(np.zeros((batch, hidden), np.float32))
    unused = cuda.to_device(np.zeros((1, 1, 1), np.float32))  # cs and gates: not kept
    return lambda: run(table, rows, r, bias, hs, c_state, unused, unused, False, variant)


PERSISTENT_TUNABLE = Tunable(
    kernel="lstm_forward_persistent", variants=tuple(rows_variant(n) for n in ROW_VARIANTS),
    default=rows_variant(ROWS), run=_tuning_launch,
    problems=(("Table 1 10M LSTM forward, batch 1024", (64, 150, 1024)),),
    small=((1, 56, 2),))  # one head over the 48 KiB without opt-in: persistent, a one-block grid
TUNABLES = (PERSISTENT_TUNABLE,)


@kernel((F32_4D, F32_1D, F32_1D, F32_1D, F32_1D, F32_2D, F32_2D, I64), block=MAX_THREADS)
def backward_sequence_cuda(r, cs, gates, dh_out, draw, dh_state, dc_state, tile):
    """Full BPTT through the stored forward for block (head n, row tile) holding the whole head's R, all
    steps from T - 1 down to 0 in one launch: a thread per (unit, row) turns dh_t (its output gradient plus
    R^T draw_{t+1}, carried in a register) and dc into draw_t, then, once every unit of its row has written
    draw_t, sums R^T draw_t for its unit. cs (T + 1, B, H), gates and draw (T, B, 4H) and dh_out (T, B, H)
    are flat; dh_state and dc_state receive dh_0 and dc_0."""
    heads, size = r.shape[1], r.shape[2]
    hidden = heads * size
    steps = gates.size // (dh_state.size * 4)
    batch = dh_state.shape[0]
    pitch = size | 1
    tiles = (batch + tile - 1) // tile
    n = cuda.blockIdx.x // tiles
    r_s = cuda.shared.array(0, numba.float32)  # [gate][d][k]
    for e in range(cuda.threadIdx.x, 4 * size * size, cuda.blockDim.x):
        g, d, k = e // (size * size), (e // size) % size, e % size
        r_s[(g * size + d) * pitch + k] = r[g, n, d, k]
    u = cuda.threadIdx.x % size
    b = (cuda.blockIdx.x % tiles) * tile + cuda.threadIdx.x // size
    j = n * size + u
    active = cuda.threadIdx.x < size * tile and b < batch
    one = np.float32(1.0)
    dh, dc = np.float32(0.0), np.float32(0.0)
    row_stride = np.uint64(batch * hidden)
    unit_at = np.uint64(b * hidden + j)
    cuda.syncthreads()
    for t in range(steps - 1, -1, -1):
        at = np.uint64(t) * np.uint64(4) * row_stride + np.uint64(b * 4 * hidden + j)
        if active:
            ig, fg = gates[at], gates[at + np.uint64(hidden)]
            zg, og = gates[at + np.uint64(2 * hidden)], gates[at + np.uint64(3 * hidden)]
            c_now = np.uint64(t + 1) * row_stride + unit_at
            tc = gpu_tanh(cs[c_now])
            g_h = dh_out[np.uint64(t) * row_stride + unit_at] + dh
            dct = dc + g_h * og * (one - tc * tc)
            draw[at] = dct * zg * ig * (one - ig)
            draw[at + np.uint64(hidden)] = dct * cs[c_now - row_stride] * fg * (one - fg)
            draw[at + np.uint64(2 * hidden)] = dct * ig * (one - zg * zg)
            draw[at + np.uint64(3 * hidden)] = g_h * tc * og * (one - og)
            dc = dct * fg
        cuda.syncthreads()  # draw_t of every unit of the row is written before R^T draw_t reads it
        if active:
            head_at = np.uint64(t) * np.uint64(4) * row_stride + np.uint64(b * 4 * hidden + n * size)
            acc = np.float32(0.0)
            for g in range(4):
                gate_at = head_at + np.uint64(g * hidden)
                draw_g = draw[gate_at:gate_at + np.uint64(size)]
                r_at, d, end = np.uint64(g * size * pitch + u), np.uint64(0), np.uint64(size)
                while d < end:  # unsigned 64-bit counters, as in _unit_step
                    acc += r_s[r_at] * draw_g[d]
                    r_at += np.uint64(pitch)
                    d += np.uint64(1)
            dh = acc
    if active:
        dh_state[b, j] = dh
        dc_state[b, j] = dc


def backward_fits(heads, size, batch, steps):
    """Whether the one-launch backward applies: the forward's plan keeps the whole head in a block."""
    return plan(heads, size, batch, steps)[2] == "sequence"


def run_backward(dh_out, r, cs, gates, draw, dh_state, dc_state):
    heads, size = r.shape[1], r.shape[2]
    steps, batch, _ = dh_out.shape
    tile = min(batch, MAX_THREADS // size)
    config = (heads * math.ceil(batch / tile), size * tile, 0, shared_bytes(size, size))
    backward_sequence_cuda[config](r, flat(cs), flat(gates), flat(dh_out), flat(draw), dh_state, dc_state, tile)


# ---- roofline of the static report (kernels/STATIC_REPORT.md) -------------------------------------

TABLE1 = {"100k": (240, 12), "1M": (1600, 32), "10M": (9600, 64)}  # hidden, heads (bench/zorn_paper/table1_grid.py)
ROOFLINE_WORKLOADS = tuple(f"LSTM {name} forward, batch 1024, 11 steps" for name in TABLE1)


def roofline(workload, batch=1024, steps=11):
    name = workload.split()[1]
    hidden, heads = TABLE1[name]
    size = hidden // heads
    moved, minimum = step_traffic(heads, size, batch, steps)
    units, tile, launches = plan(heads, size, batch, steps, H100_SMS)
    kernel = "forward_persistent_cuda" if launches == "persistent" else "forward_sequence_cuda"
    return {
        "name": f"{workload}: {kernel} ({launches}, {units} units x {tile} rows per block)",
        "kernel": f"{__name__}.{kernel}",
        "unit": "row-step",
        "ops_per_unit": 2 * 4 * hidden * size,
        "compute_limit": "fp32_simt",
        "reference_limit": "hbm",
        "bytes_per_unit": {"hbm": moved, "l2": moved},
        "basis": (f"per batch row and step: the wx table row (4H fp32; L2: the table is V x 4H), h_t written, "
                  f"h_(t-1) read once per slice, R once per tile and launch: {moved / minimum:.2f}x the on-chip "
                  f"minimum of {minimum:.0f} B (wx row and h_t)."),
    }
