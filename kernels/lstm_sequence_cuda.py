"""The multi-head LSTM's whole-sequence forward on the GPU (the op is lstm_cell.cuda_lstm_forward),
FlashRNN-style: a block owns one head (or a slice of its units) for a tile of batch rows and keeps
that part of R in shared memory.

Heads are independent (R is block-diagonal), so a block holding a whole head's R runs every step in
one launch with no grid-wide sync: per step it reads h_{t-1} of its rows (written by its own threads
the step before, visible after the barrier), computes the four gates of each (unit, row) from its wx
table row, the bias and R in shared memory, and writes h_t. When a head's R (16 D^2 bytes) does not fit
in SHARED_BUDGET, its units are split over several blocks, each holding its slice's rows of R, and the
sequence runs one launch per step (the launch boundary is the sync: every slice needs every unit of
h_{t-1}).

Threads: one per (unit of the slice, row of the tile), units fastest, so a warp's h loads are a few
rows broadcast; c stays in a register over the steps of a launch (in `c_state` between launches).
R sits in shared memory as R[g][unit][k] with an odd pitch: consecutive units read different banks.

Traffic per step and batch row (bytes), against the on-chip minimum 4 (4H + H) of the wx row read
and h_t written: h_{t-1} is read once per slice, 4 D H / units, and R once per tile and launch,
16 D^2 N / rows / (steps per launch). `plan` picks the slice that minimises the sum; `step_traffic`
gives it, and the static report prints it per Table 1 size.
"""

import math

import numba
import numpy as np

from eggnog.kernels.cuda_api import BOOL, F32_1D, F32_2D, F32_4D, I64, cuda, device_function, flat, kernel
from eggnog.kernels.fast_math import reciprocal_approx

SHARED_BUDGET = 48 * 1024  # bytes of R per block: what a block gets without the opt-in
MAX_THREADS = 512  # at the kernel's 80 registers a 1024-thread block would not launch (65536 per SM)


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
    return 16 * units * _pitch(size)


def _traffic(heads, size, batch, steps, units):
    """Bytes per row-step beyond the on-chip minimum, for a slice of `units`."""
    rows = min(batch, MAX_THREADS // units)
    per_launch = steps if units == size else 1
    return 4 * size * heads * size / units + 16 * size * size * heads / rows / per_launch


def plan(heads, size, batch, steps, budget=None):
    """(units per block, rows per tile, 'sequence' or 'per step') for a head size, batch and length."""
    budget = SHARED_BUDGET if budget is None else budget
    fitting = [u for u in range(1, min(size, MAX_THREADS) + 1) if size % u == 0 and shared_bytes(size, u) <= budget]
    if not fitting:
        raise ValueError(f"one unit of R ({shared_bytes(size, 1)} bytes) exceeds the shared-memory budget")
    units = min(fitting, key=lambda u: (_traffic(heads, size, batch, steps, u), -u))
    return units, min(batch, MAX_THREADS // units), "sequence" if units == size else "per step"


def step_traffic(heads, size, batch, steps, budget=None):
    """(bytes moved per step and batch row under the plan, on-chip minimum)."""
    units, _, _ = plan(heads, size, batch, steps, budget)
    minimum = 4 * 5 * heads * size
    return minimum + _traffic(heads, size, batch, steps, units), minimum


@kernel((F32_2D, numba.int32[:, ::1], F32_4D, F32_1D, F32_1D, F32_2D, F32_1D, F32_1D, BOOL, I64, I64, I64, I64),
        block=MAX_THREADS)
def forward_sequence_cuda(table, rows, r, bias, hs, c_state, cs, gates, keep, first, last, units, tile):
    """Steps first..last-1 for block (head n, unit slice s, row tile); hs, cs (T + 1, B, H) and gates
    (T, B, 4H) flat, hs[first] holding h_{first-1}. Indices into them are unsigned (no sign checks)."""
    heads, size = r.shape[1], r.shape[2]
    hidden = heads * size
    batch = rows.shape[1]
    pitch = size | 1
    slices = size // units
    tiles = (batch + tile - 1) // tile
    n = cuda.blockIdx.x // (slices * tiles)
    s = (cuda.blockIdx.x // tiles) % slices
    r_s = cuda.shared.array(0, numba.float32)  # [gate][unit of the slice][k]
    for e in range(cuda.threadIdx.x, 4 * units * size, cuda.blockDim.x):
        g, u, k = e // (units * size), (e // size) % units, e % size
        r_s[(g * units + u) * pitch + k] = r[g, n, s * units + u, k]
    u = cuda.threadIdx.x % units
    b = (cuda.blockIdx.x % tiles) * tile + cuda.threadIdx.x // units
    j = n * size + s * units + u
    active = cuda.threadIdx.x < units * tile and b < batch
    c = c_state[b, j] if active else np.float32(0.0)
    row_stride = np.uint64(batch * hidden)
    head_at = np.uint64(b * hidden + n * size)  # h_{t-1}[b, head n] at t * row_stride + head_at
    ri_at, rf_at = np.uint32(u * pitch), np.uint32((units + u) * pitch)
    rz_at, ro_at = np.uint32((2 * units + u) * pitch), np.uint32((3 * units + u) * pitch)
    cuda.syncthreads()
    for t in range(first, last):
        if active:
            row = rows[t, b]
            ri = table[row, j] + bias[j]
            rf = table[row, hidden + j] + bias[hidden + j]
            rz = table[row, 2 * hidden + j] + bias[2 * hidden + j]
            ro = table[row, 3 * hidden + j] + bias[3 * hidden + j]
            h_at = np.uint64(t) * row_stride + head_at
            for k in range(np.uint32(size)):
                hk = hs[h_at + k]
                ri += r_s[ri_at + k] * hk
                rf += r_s[rf_at + k] * hk
                rz += r_s[rz_at + k] * hk
                ro += r_s[ro_at + k] * hk
            ig, fg, zg, og = gpu_sigmoid(ri), gpu_sigmoid(rf), gpu_tanh(rz), gpu_sigmoid(ro)
            c = fg * c + ig * zg
            out = np.uint64(t + 1) * row_stride + np.uint64(b * hidden + j)
            hs[out] = og * gpu_tanh(c)
            if keep:
                cs[out] = c
                at = np.uint64(t) * np.uint64(4) * row_stride + np.uint64(b * 4 * hidden + j)
                gates[at] = ig
                gates[at + np.uint64(hidden)] = fg
                gates[at + np.uint64(2 * hidden)] = zg
                gates[at + np.uint64(3 * hidden)] = og
        cuda.syncthreads()  # h_t is complete for every row of the tile before step t + 1 reads it
    if active:
        c_state[b, j] = c


def run(table, rows, r, bias, hs, c_state, cs, gates, keep):
    """Launch the plan over all steps; hs[0] and c_state hold the initial states on entry, c_state the
    last c on return."""
    heads, size = r.shape[1], r.shape[2]
    steps, batch = rows.shape
    units, tile, launches = plan(heads, size, batch, steps)
    grid = heads * (size // units) * math.ceil(batch / tile)
    config = (grid, units * tile, 0, shared_bytes(size, units))
    spans = [(0, steps)] if launches == "sequence" else [(t, t + 1) for t in range(steps)]
    for first, last in spans:
        forward_sequence_cuda[config](table, rows, r, bias, flat(hs), c_state, flat(cs), flat(gates), keep, first, last,
                                      units, tile)


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
                r_at = np.uint32(g * size * pitch + u)
                for d in range(np.uint32(size)):
                    acc += r_s[r_at + d * np.uint32(pitch)] * draw[gate_at + d]
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


# ---- roofline of the static report (bench/sass_report.py) -----------------------------------------

TABLE1 = {"100k": (240, 12), "1M": (1600, 32), "10M": (9600, 64)}  # hidden, heads (bench/table1_grid.py)
ROOFLINE_WORKLOADS = tuple(f"LSTM {name} forward, batch 1024, 11 steps" for name in TABLE1)


def roofline(workload, batch=1024, steps=11):
    name = workload.split()[1]
    hidden, heads = TABLE1[name]
    size = hidden // heads
    moved, minimum = step_traffic(heads, size, batch, steps)
    units, tile, launches = plan(heads, size, batch, steps)
    return {
        "name": f"{workload}: forward_sequence_cuda ({launches}, {units} units x {tile} rows per block)",
        "kernel": f"{__name__}.forward_sequence_cuda",
        "unit": "row-step",
        "ops_per_unit": 2 * 4 * hidden * size,
        "compute_limit": "fp32_simt",
        "reference_limit": "hbm",
        "bytes_per_unit": {"hbm": moved, "l2": moved},
        "basis": (f"per batch row and step: the wx table row (4H fp32; L2: the table is V x 4H), h_t written, "
                  f"h_(t-1) read once per slice, R once per tile and launch: {moved / minimum:.2f}x the on-chip "
                  f"minimum of {minimum:.0f} B (wx row and h_t)."),
    }
