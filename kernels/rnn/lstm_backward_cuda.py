"""The multi-head LSTM's backward on the GPU as tiled products (the op is lstm.cuda_lstm_backward when a
head does not fit the one-launch backward of kernels/rnn/lstm_sequence_cuda.py; the weight gradient
lstm.cuda_lstm_recurrent_grad at every size).

Per step the recurrence dh_{t-1} = dh_out[t-1] + sum_g R[g, n]^T draw_t[g, n] is, per head n, a
product (B x 4D) (4D x D): `recurrent_product_cuda` computes a BLOCK_M x BLOCK_N tile of it (batch rows
x input units k of one head) from k-major slices of draw_t and of R staged in shared memory, and turns
its outputs straight into the gate gradients of step t - 1 (element-wise per unit: no other block's
outputs are needed), so a step is one launch: draw_{t-1} and dc_{t-2} come out of the product's
epilogue. The backward is `first_gates_cuda` (step T - 1's gates from dh_out alone), T - 1 fused
launches, then one unfused product for dh_0.

More in docs/internals.md (kernels/rnn/lstm_backward_cuda.py)."""

from typing import Any

import numba
import numpy as np

from eggnog.kernels.core.cuda_api import BOOL, F32_1D, F32_2D, I64, cuda, device_function, kernel
from eggnog.kernels.core.loads import (
    copy_async_commit,
    copy_async_f32,
    copy_async_wait,
    load_shared_v4,
    store_shared_f32x4,
)
from eggnog.kernels.rnn.lstm_sequence_cuda import H100_SMS, TABLE1, gpu_tanh, plan

TX, TY = 10, 16  # threads per block: TX columns x TY rows
THREADS = TX * TY
PER = 8  # a thread's outputs: PER x PER
BLOCK_M, BLOCK_N = TY * PER, TX * PER  # 128 x 80 outputs a block
HALF_M, HALF_N = BLOCK_M // 2, BLOCK_N // 2
STEP = 8  # k per staged slice
STAGES = 3  # slices in flight: copies of the next two land while one is multiplied
A_PITCH, B_PITCH = BLOCK_M + 4, BLOCK_N + 4
A_WORDS, B_WORDS = STEP * A_PITCH, STEP * B_PITCH
STAGE_WORDS = A_WORDS + B_WORDS
SHARED_WORDS = STAGES * STAGE_WORDS
OUTPUTS = PER * PER
HALF_TILE = HALF_M * BLOCK_N  # outputs staged through shared memory at a time: 32 a thread, within the ring
B_COPIES = BLOCK_N * STEP // THREADS  # copies of the columns operand a thread issues per slice (the first
                                      # BLOCK_M threads also copy STEP of the rows operand)
WAIT = STAGES - 2  # copy groups left in flight when a slice is multiplied
MIN_SPLIT_ROWS = 32  # the weight gradient's T B rows are cut into chunks no shorter than this (4 slices)
MAX_SPLITS = 8
RESIDENT = 3  # blocks an SM holds: launch bounds cap the products at 128 registers (3 x 5 warps x 4 KB)


@device_function
def _k_product(sh, a_at, b_at, acc):
    """One k: 8 values of each operand (two LDS.128 each) and 64 FMA."""
    a = cuda.local.array(PER, numba.float32)
    b = cuda.local.array(PER, numba.float32)
    a[0], a[1], a[2], a[3] = load_shared_v4(sh, a_at)
    a[4], a[5], a[6], a[7] = load_shared_v4(sh, a_at + HALF_M)
    b[0], b[1], b[2], b[3] = load_shared_v4(sh, b_at)
    b[4], b[5], b[6], b[7] = load_shared_v4(sh, b_at + HALF_N)
    for i in range(PER):
        for j in range(PER):
            acc[i * PER + j] += a[i] * b[j]


@device_function
def _multiply(sh, stage, ty, tx, acc):
    """The STEP k of the slice in `stage`, written out (unrolled)."""
    a_at = stage * STAGE_WORDS + 4 * ty
    b_at = stage * STAGE_WORDS + A_WORDS + 4 * tx
    _k_product(sh, a_at, b_at, acc)
    _k_product(sh, a_at + A_PITCH, b_at + B_PITCH, acc)
    _k_product(sh, a_at + 2 * A_PITCH, b_at + 2 * B_PITCH, acc)
    _k_product(sh, a_at + 3 * A_PITCH, b_at + 3 * B_PITCH, acc)
    _k_product(sh, a_at + 4 * A_PITCH, b_at + 4 * B_PITCH, acc)
    _k_product(sh, a_at + 5 * A_PITCH, b_at + 5 * B_PITCH, acc)
    _k_product(sh, a_at + 6 * A_PITCH, b_at + 6 * B_PITCH, acc)
    _k_product(sh, a_at + 7 * A_PITCH, b_at + 7 * B_PITCH, acc)


@device_function
def _stage_outputs(sh, acc, half, ty, tx):
    """The thread's outputs in rows HALF_M half + 4 ty + i (i < 4) into sh[:HALF_M BLOCK_N] at
    [row - HALF_M half][column]. Only constant indices of acc (unrolled), so acc stays in registers;
    the epilogue then reads the tile a unit a thread, consecutive threads consecutive units."""
    for i in range(4):
        at = (4 * ty + i) * BLOCK_N + 4 * tx
        o = (4 * half + i) * PER
        store_shared_f32x4(sh, at, acc[o], acc[o + 1], acc[o + 2], acc[o + 3])
        store_shared_f32x4(sh, at + HALF_N, acc[o + 4], acc[o + 5], acc[o + 6], acc[o + 7])


@device_function
def _unit_grads(g_h, gates, c, c_prev, dc, draw, b, j, hidden, first):
    """Unit (b, j)'s gate gradients into draw, and dc_prev into dc (read first; zero when `first`),
    from g_h, the total gradient of its h."""
    one = np.float32(1.0)
    ig, fg = gates[b, j], gates[b, hidden + j]
    zg, og = gates[b, 2 * hidden + j], gates[b, 3 * hidden + j]
    tc = gpu_tanh(c[b, j])
    dct = g_h * og * (one - tc * tc)
    if not first:
        dct += dc[b, j]
    draw[b, j] = dct * zg * ig * (one - ig)
    draw[b, hidden + j] = dct * c_prev[b, j] * fg * (one - fg)
    draw[b, 2 * hidden + j] = dct * ig * (one - zg * zg)
    draw[b, 3 * hidden + j] = g_h * tc * og * (one - og)
    dc[b, j] = dct * fg


@kernel((F32_2D, F32_2D, F32_2D, F32_2D, F32_2D, F32_2D), block=128)
def first_gates_cuda(dh, gates, c, c_prev, dc, draw):
    """The last step's gate gradients: dh its output gradient, no dc from a later step."""
    batch, hidden = dh.shape
    i = cuda.grid(1)
    if i < batch * hidden:
        b, j = i // hidden, i % hidden
        _unit_grads(dh[b, j], gates, c, c_prev, dc, draw, b, j, hidden, True)


@device_function
def _copy_step_slice(draw, r2, sh, s, stage, row0, col0, n, tid):
    """Slice s of the step product into a stage: gate g = s // per_gate, d from d0 = STEP (s % per_gate):
    draw[row0 + m, g H + n D + d] at [kk][m] by thread m < BLOCK_M (8 consecutive words of its row: one
    sector) and R[g, n, d, col0 + c] (r2 = R as (4 N D, D)) at [kk][c], consecutive lanes consecutive c;
    zeros outside. A thread's copies differ only by constants, so few addresses stay live across the
    multiply."""
    batch, four_h = draw.shape
    size = r2.shape[1]
    heads = r2.shape[0] // (4 * size)
    per_gate = (size + STEP - 1) // STEP
    g = s // per_gate
    d0 = (s - g * per_gate) * STEP
    col = g * (four_h // 4) + n * size + d0
    base = stage * STAGE_WORDS
    if tid < BLOCK_M:
        row_inside = row0 + tid < batch
        for kk in range(STEP):
            full = row_inside and d0 + kk < size
            copy_async_f32(sh, base + kk * A_PITCH + tid, draw, row0 + tid if full else 0, col + kk if full else 0,
                           full)
    c = tid % BLOCK_N
    inside = col0 + c < size
    r_row = (g * heads + n) * size + d0
    for q in range(B_COPIES):
        kk = tid // BLOCK_N + q * (THREADS // BLOCK_N)
        full = inside and d0 + kk < size
        copy_async_f32(sh, base + A_WORDS + kk * B_PITCH + c, r2, r_row + kk if full else 0, col0 + c if full else 0,
                       full)


@kernel((F32_2D, F32_2D, F32_2D, F32_2D, F32_2D, F32_2D, F32_2D, F32_2D, F32_2D, BOOL), block=THREADS,
        launch_bounds=(THREADS, RESIDENT))
def recurrent_product_cuda(draw, r2, dh_extra, gates, c, c_prev, dc, draw_prev, dh, fuse):
    """Block (column tile, row tile, head n): the tile of sum_g R[g, n]^T draw[:, g, n] (draw (B, 4H) of
    step t, r2 = R as (4 N D, D)). With `fuse`, each output plus dh_extra (dh_out[t-1]) is the gradient of
    h_{t-1}: the gates (step t - 1), c = c_{t-1} and c_prev = c_{t-2} give draw_prev and update dc in place;
    otherwise the output goes to dh."""
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    tid = ty * TX + tx
    size = r2.shape[1]
    n = cuda.blockIdx.z
    row0, col0 = cuda.blockIdx.y * BLOCK_M, cuda.blockIdx.x * BLOCK_N
    sh = cuda.shared.array(SHARED_WORDS, numba.float32)
    acc = cuda.local.array(OUTPUTS, numba.float32)
    for i in range(OUTPUTS):
        acc[i] = np.float32(0.0)
    slices = 4 * ((size + STEP - 1) // STEP)
    for s in range(STAGES - 1):
        if s < slices:
            _copy_step_slice(draw, r2, sh, s, s, row0, col0, n, tid)
        copy_async_commit()
    stage = 0
    for s in range(slices):
        copy_async_wait(WAIT)  # slice s has landed (this thread's copies) ...
        cuda.syncthreads()  # ... and everyone's; everyone is done with slice s - 1's stage
        if s + STAGES - 1 < slices:
            _copy_step_slice(draw, r2, sh, s + STAGES - 1, stage - 1 if stage > 0 else STAGES - 1, row0, col0, n,
                             tid)
        copy_async_commit()
        _multiply(sh, stage, ty, tx, acc)
        stage = stage + 1 if stage < STAGES - 1 else 0
    cuda.syncthreads()  # every slice is multiplied: the ring is free for the outputs
    _stage_outputs(sh, acc, 0, ty, tx)
    cuda.syncthreads()
    cell = (gates, c, c_prev, dc, draw_prev)
    _finish_step(sh, 0, dh_extra, cell, dh, fuse, (row0, col0), n, size, tid)
    cuda.syncthreads()
    _stage_outputs(sh, acc, 1, ty, tx)
    cuda.syncthreads()
    _finish_step(sh, 1, dh_extra, cell, dh, fuse, (row0, col0), n, size, tid)


@device_function
def _finish_step(sh, half, dh_extra, cell, dh, fuse, corner, n, size, tid):
    """Half `half` of the step product's tile from sh, a unit a thread: the gate gradients of step t - 1
    (fused) or dh. cell: (gates, c, c_prev, dc, draw_prev); corner: the tile's (row0, col0)."""
    gates, c, c_prev, dc, draw_prev = cell
    row0, col0 = corner
    batch, hidden = dh.shape
    for q in range(HALF_TILE // THREADS):  # a constant count (the static model reads it)
        e = tid + q * THREADS
        m, col = e // BLOCK_N, e % BLOCK_N
        b, k = row0 + HALF_M * half + m, col0 + col
        if b < batch and k < size:
            j = n * size + k
            if fuse:
                _unit_grads(sh[e] + dh_extra[b, j], gates, c, c_prev, dc, draw_prev, b, j, hidden, False)
            else:
                dh[b, j] = sh[e]


@device_function
def _copy_grad_slice(draw, hs, sh, column, x0, x_end, stage, col0, n, size, tid):
    """Rows x0 .. x0 + STEP - 1 (below x_end) into a stage: draw[x, column] at [kk][tid] by the first
    BLOCK_M threads (column: this thread's draw column, -1 past the head's 4 D) and hs[x, n D + col0 + c]
    at [kk][c]; consecutive lanes copy consecutive columns, and a thread's copies differ only in x, so
    few addresses stay live across the multiply."""
    base = stage * STAGE_WORDS
    if tid < BLOCK_M:
        for kk in range(STEP):
            full = x0 + kk < x_end and column >= 0
            copy_async_f32(sh, base + kk * A_PITCH + tid, draw, x0 + kk if full else 0, column if full else 0, full)
    c = tid % BLOCK_N
    inside = col0 + c < size
    for q in range(B_COPIES):
        kk = tid // BLOCK_N + q * (THREADS // BLOCK_N)
        full = inside and x0 + kk < x_end
        copy_async_f32(sh, base + A_WORDS + kk * B_PITCH + c, hs, x0 + kk if full else 0,
                       n * size + col0 + c if full else 0, full)


@kernel((F32_2D, F32_2D, F32_1D, I64, I64), block=THREADS, launch_bounds=(THREADS, RESIDENT))
def weight_grad_cuda(draw, hs, out, size, chunk):
    """Block (column tile, row tile, split s x N + head n): the tile of dR[g, n] (rows (g, d) of the head's
    4 D, columns k) summed over rows s chunk .. (s + 1) chunk - 1 of draw (T B, 4H) and hs (T B, H)
    (h_{t-1} of each row); out is split s's (4, N, D, D), flat, at s 4 N D^2."""
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    tid = ty * TX + tx
    rows, four_h = draw.shape
    hidden = four_h // 4
    heads = hidden // size
    n = cuda.blockIdx.z % heads
    split = cuda.blockIdx.z // heads
    row0, col0 = cuda.blockIdx.y * BLOCK_M, cuda.blockIdx.x * BLOCK_N
    x_begin = split * chunk
    x_end = min(rows, x_begin + chunk)
    g, d = (row0 + tid) // size, (row0 + tid) % size
    column = g * hidden + n * size + d if g < 4 else -1  # the draw column of tile row tid
    sh = cuda.shared.array(SHARED_WORDS, numba.float32)
    acc = cuda.local.array(OUTPUTS, numba.float32)
    for i in range(OUTPUTS):
        acc[i] = np.float32(0.0)
    slices = (x_end - x_begin + STEP - 1) // STEP
    for s in range(STAGES - 1):
        if s < slices:
            _copy_grad_slice(draw, hs, sh, column, x_begin + s * STEP, x_end, s, col0, n, size, tid)
        copy_async_commit()
    stage = 0
    for s in range(slices):
        copy_async_wait(WAIT)
        cuda.syncthreads()
        if s + STAGES - 1 < slices:
            _copy_grad_slice(draw, hs, sh, column, x_begin + (s + STAGES - 1) * STEP, x_end,
                             stage - 1 if stage > 0 else STAGES - 1, col0, n, size, tid)
        copy_async_commit()
        _multiply(sh, stage, ty, tx, acc)
        stage = stage + 1 if stage < STAGES - 1 else 0
    at = split * 4 * heads * size * size
    cuda.syncthreads()
    _stage_outputs(sh, acc, 0, ty, tx)
    cuda.syncthreads()
    _finish_grad(sh, 0, out, at, row0, col0, n, heads, size, tid)
    cuda.syncthreads()
    _stage_outputs(sh, acc, 1, ty, tx)
    cuda.syncthreads()
    _finish_grad(sh, 1, out, at, row0, col0, n, heads, size, tid)


@device_function
def _finish_grad(sh, half, out, at, row0, col0, n, heads, size, tid):
    """Half `half` of the weight gradient's tile from sh into out (4, N, D, D) at `at`, flat."""
    for q in range(HALF_TILE // THREADS):
        e = tid + q * THREADS
        m, k = row0 + HALF_M * half + e // BLOCK_N, col0 + e % BLOCK_N
        if m < 4 * size and k < size:
            g, d = m // size, m % size
            out[at + ((g * heads + n) * size + d) * size + k] = sh[e]


@kernel((F32_1D, F32_1D, I64), block=256)
def sum_splits_cuda(parts, out, splits):
    """out[i] = sum_s parts[s size + i], in order of s."""
    i = cuda.grid(1)
    if i < out.size:
        acc = parts[i]
        for s in range(1, splits):
            acc += parts[s * out.size + i]
        out[i] = acc


def grad_tiles(heads, size):
    """The weight gradient's grid without splits: (column tiles, row tiles, heads)."""
    return (size + BLOCK_N - 1) // BLOCK_N, (4 * size + BLOCK_M - 1) // BLOCK_M, heads


def grad_splits(heads, size, rows, sms):
    """Chunks of the T B rows: the count (at most MAX_SPLITS, chunks of at least MIN_SPLIT_ROWS rows) whose
    blocks fill their last wave on `sms` SMs of RESIDENT blocks best, per row of work; fewer on a tie."""
    tiles = int(np.prod(grad_tiles(heads, size)))
    slots = sms * RESIDENT
    best, cost = 1, None
    for splits in range(1, MAX_SPLITS + 1):
        if splits > 1 and rows < splits * MIN_SPLIT_ROWS:
            break
        waves = -(-tiles * splits // slots) / splits
        if cost is None or waves < cost - 1e-9:
            best, cost = splits, waves
    return best


def step_grid(heads, size, batch):
    return (size + BLOCK_N - 1) // BLOCK_N, (batch + BLOCK_M - 1) // BLOCK_M, heads


def run_backward(dh_out, r, cs, gates, draw, dh, dc):
    """Full BPTT of the whole sequence by tiled products, one launch a step: dh and dc receive dh_0 and
    dc_0 (dc is carried in place; dh is written by the last launch)."""
    steps, batch, hidden = dh_out.shape
    heads, size = r.shape[1], r.shape[2]
    r2 = r.reshape(4 * heads * size, size)
    last = steps - 1
    first_gates_cuda[(batch * hidden + 127) // 128, 128](dh_out[last], gates[last], cs[last + 1], cs[last], dc,
                                                         draw[last])
    grid = step_grid(heads, size, batch)
    for t in range(last, 0, -1):
        recurrent_product_cuda[grid, (TX, TY)](draw[t], r2, dh_out[t - 1], gates[t - 1], cs[t], cs[t - 1], dc,
                                              draw[t - 1], dh, True)
    # dh_0: the unfused product (the gate arguments are unused)
    recurrent_product_cuda[grid, (TX, TY)](draw[0], r2, dh, gates[0], dh, dh, dc, draw[0], dh, False)


def run_weight_grad(draw, hs, heads, dr, sms):
    """dR (4, N, D, D) into dr from draw (T, B, 4H) and hs (T + 1, B, H) on `sms` SMs."""
    steps, batch, four_h = draw.shape
    size = four_h // 4 // heads
    rows = steps * batch
    splits = grad_splits(heads, size, rows, sms)
    chunk = -(-rows // splits)
    out = dr.reshape(dr.size) if splits == 1 else cuda.device_array(splits * dr.size, np.float32)
    tiles = grad_tiles(heads, size)
    weight_grad_cuda[(tiles[0], tiles[1], heads * splits), (TX, TY)](
        draw.reshape(rows, four_h), hs[:steps].reshape(rows, four_h // 4), out, size, chunk)
    if splits > 1:
        sum_splits_cuda[(dr.size + 255) // 256, 256](out, dr.reshape(dr.size), splits)


def _array(*shape):
    return {"shape": shape, "dtype": "float32"}


def backward_launches(heads, size, batch, steps):
    """The static report's launches of run_backward (module-qualified kernel names)."""
    hidden = heads * size
    state, wide, r2 = _array(batch, hidden), _array(batch, 4 * hidden), _array(4 * hidden, size)
    first = {"kernel": f"{__name__}.first_gates_cuda", "grid": (batch * hidden + 127) // 128, "block": 128,
             "args": [state, wide, state, state, state, wide]}
    product = {"kernel": f"{__name__}.recurrent_product_cuda", "grid": step_grid(heads, size, batch), "block": (TX, TY),
               "args": [wide, r2, state, wide, state, state, state, wide, state, True]}
    return [first] + [product] * (steps - 1) + [{**product, "args": product["args"][:-1] + [False]}]


def weight_grad_launches(heads, size, batch, steps, sms):
    """The static report's launches of run_weight_grad."""
    rows = steps * batch
    splits = grad_splits(heads, size, rows, sms)
    tiles = grad_tiles(heads, size)
    total = 4 * heads * size * size
    launches: list[dict[str, Any]] = [
        {"kernel": f"{__name__}.weight_grad_cuda", "grid": (tiles[0], tiles[1], heads * splits),
         "block": (TX, TY), "args": [_array(rows, 4 * heads * size), _array(rows, heads * size),
                                     _array(splits * total), size, -(-rows // splits)]}]
    if splits > 1:
        launches.append({"kernel": f"{__name__}.sum_splits_cuda", "grid": (total + 255) // 256, "block": 256,
                         "args": [_array(splits * total), _array(total), splits]})
    return launches


# ---- roofline of the static report (kernels/STATIC_REPORT.md) -------------------------------------

ROOFLINE_WORKLOADS = tuple(f"LSTM {name} backward, batch 1024, 11 steps" for name in ("1M", "10M"))


def roofline(workload, batch=1024, steps=11):
    """lstm.cuda_lstm_backward at a Table 1 size. Where the head fits a block (1M) the one-launch backward
    then the weight gradient, as a roofline row only: the static model cannot walk backward_sequence_cuda
    (its while loops over d have trip counts it does not read, and its tanh meets a MUFU it does not
    execute). Else every launch: the tiled products, one a step (10M), then the weight gradient."""
    name = workload.split()[1]
    hidden, heads = TABLE1[name]
    size = hidden // heads
    fits = plan(heads, size, batch, steps, H100_SMS)[2] == "sequence"  # backward_fits on an H100
    # per row-step: gates (4H) and c_t, c_(t-1), dh_out read, draw (4H) written and read by the weight
    # gradient with h_(t-1); the tiled path reads draw once more (the next step's product)
    moved = 4 * (4 * hidden * (3 if fits else 4) + 4 * hidden)
    row = {
        "unit": "row-step",
        "ops_per_unit": 2 * 2 * 4 * hidden * size,
        "compute_limit": "fp32_simt",
        "reference_limit": "fp32_simt",
        "bytes_per_unit": {"hbm": moved},
        "basis": (f"per batch row and step: R^T draw (dh_(t-1)) and draw^T h_(t-1) (dR), 2 x 8 H D flops; "
                  f"HBM {moved / 1e3:.0f} kB: gates and draw streamed a few times, states once."),
    }
    if fits:
        return {**row, "kernel": "eggnog.kernels.rnn.lstm_sequence_cuda.backward_sequence_cuda",
                "name": f"{workload}: backward_sequence_cuda (one launch, R in shared memory) + weight_grad_cuda"}
    launches = backward_launches(heads, size, batch, steps)
    return {**row, "name": f"{workload}: recurrent_product_cuda ({len(launches)} launches) + weight_grad_cuda",
            "kernel": f"{__name__}.recurrent_product_cuda",
            "launches": launches + weight_grad_launches(heads, size, batch, steps, H100_SMS),
            "units": batch * steps}
