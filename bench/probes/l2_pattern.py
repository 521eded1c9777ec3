"""L2 bandwidth under the EGG epoch's weight loads (kernels/egg/epoch_cuda.py, _mma_rows): every block
reads every matrix of the model once per pass, as the epoch reads them once per byte. Lane (g, q) of a warp
loads 16 bytes at word 4q of weight rows n0 + 4 (g >> 1) + (g & 1) and the two rows after, two 64-byte k
steps a trip (ld.global.nc.v4, zero past the row as _weights gives), warps 2p and 2p + 1 the same
16-column tiles n0 = 16p + 64i (each warp's half of the block's rows reads the same fragments again:
L1 hits when they meet). Blocks of 256 threads, two an SM, held there by the epoch's launch bounds and
dynamic shared memory (6x256's plan); the weights (6x256: 4.8 MB) stay in L2.

Two rows: `l2_egg_pattern` counts the bytes the load instructions ask for (every lane's 16 bytes, the
re-reads included: what the static model's L2 pipe charges per LDG, timing.py), so the fitted constant
reproduces the epoch's weight loads; `l2_egg_pattern_unique` counts each block's weights once (the
roofline's view, half of it). The noise, vectors and states stream from HBM and are left out.

Check: each block's threads sum the words they load; per block that is twice the weights' sum per pass."""

import time

import numpy as np

from bench.probes.device import kernel_seconds, require_equal, row, wrap32
from eggnog.kernels.core.cuda_api import I32, I32_1D, allow_dynamic_shared, cuda, kernel
from eggnog.kernels.core.int_simd import opaque
from eggnog.kernels.core.loads import load_global_v4
from eggnog.kernels.egg.epoch_cuda import Plan
from eggnog.kernels.egg.layout import egg_layout

THREADS = 256  # the epoch's block
WARPS = THREADS // 32
BLOCKS_PER_SM = 2
MODEL, SIMULATED_MODEL = (6, 256), (1, 64)
PASSES, QUICK_PASSES, SIMULATED_PASSES = 40, 10, 2


@kernel((I32_1D, I32_1D, I32_1D, I32_1D, I32, I32_1D), block=THREADS, launch_bounds=(THREADS, BLOCKS_PER_SM))
def l2_weight_sweep(weights, word_at, d_ins, d_outs, passes, out):
    """`passes` sweeps over the matrices (word offset, d_in, d_out); out[thread] = the sum of its words."""
    tid = cuda.threadIdx.x
    lane = tid & 31
    warp = tid >> 5
    g = lane >> 2
    q = lane & 3
    acc = np.int32(0)
    p = np.int32(0)
    while p < passes:
        z = opaque(np.int32(0))  # a zero the compiler cannot see: no pass's loads are hoisted out of the loop
        m = np.int32(0)
        while m < word_at.size:
            words = np.int32(d_ins[m] >> 2)
            n0 = np.int32(16 * (warp >> 1))
            while n0 < d_outs[m]:
                wrow = np.int32(word_at[m] + z + (n0 + 4 * (g >> 1) + (g & 1)) * words + 4 * q)
                xrow = np.int32(wrow + 2 * words)
                kw = np.int32(0)
                while kw < words:
                    w0, w1, w2, w3 = load_global_v4(weights, wrow + kw)
                    x0, x1, x2, x3 = load_global_v4(weights, xrow + kw)
                    acc = np.int32(acc + w0 + w1 + w2 + w3 + x0 + x1 + x2 + x3)
                    if kw + 16 < words:
                        u0, u1, u2, u3 = load_global_v4(weights, wrow + kw + 16)
                        y0, y1, y2, y3 = load_global_v4(weights, xrow + kw + 16)
                        acc = np.int32(acc + u0 + u1 + u2 + u3 + y0 + y1 + y2 + y3)
                    kw = opaque(np.int32(kw + 32))
                n0 = np.int32(n0 + 16 * WARPS // 2)
            m = np.int32(m + 1)
        p = np.int32(p + 1)
    out[cuda.grid(1)] = acc


def matrices(n_layer, dim):
    """(word offset, d_in, d_out) of every matrix the epoch multiplies through _mma_rows, in a buffer of
    the model's parameters (the embedding is looked up by token, not swept)."""
    return [(offset // 4, shape[1], shape[0]) for _, shape, kind, offset in egg_layout(n_layer, dim)
            if kind == "matrix"]


def run(device, quick):
    started = time.perf_counter()
    n_layer, dim = SIMULATED_MODEL if device.simulated else MODEL
    table = np.array(matrices(n_layer, dim), np.int32)
    end = int(max(w + i * o // 4 for w, i, o in table))
    # small words on the simulator (its int32 sums are NumPy scalars, which warn on overflow)
    weights = np.random.default_rng(2).integers(0, 1 << (6 if device.simulated else 24), end).astype(np.int32)
    blocks = BLOCKS_PER_SM * (1 if device.simulated else device.sms)
    passes = SIMULATED_PASSES if device.simulated else (QUICK_PASSES if quick else PASSES)
    args = (cuda.to_device(weights), *(cuda.to_device(np.ascontiguousarray(table[:, k])) for k in range(3)),
            np.int32(passes), cuda.device_array(blocks * THREADS, np.int32))
    shared = 0 if device.simulated else Plan(*MODEL).shared_bytes  # the epoch's: two blocks an SM
    allow_dynamic_shared(l2_weight_sweep, args, shared)

    def launch():
        l2_weight_sweep[blocks, THREADS, 0, shared](*args)

    seconds = kernel_seconds(device, launch, quick)
    matrix_sum = sum(int(weights[w:w + i * o // 4].astype(np.int64).sum()) for w, i, o in table)
    sums = args[-1].copy_to_host().reshape(blocks, THREADS).astype(np.int64).sum(axis=1)
    require_equal("l2_pattern", wrap32(sums), wrap32(np.full(blocks, 2 * passes * matrix_sum)))
    unique = blocks * passes * 4 * sum(int(i) * int(o) // 4 for _, i, o in table)
    basis = (f"{blocks} blocks x {passes} passes over {unique // blocks // passes} weight bytes "
             f"(EGG {n_layer}x{dim}) in {seconds * 1e3:.4g} ms, {shared} B shared a block")
    return [row(device, "l2_pattern", "l2_egg_pattern", 2 * unique / seconds, seconds, started,
                basis + "; every lane's 16 bytes counted (each warp pair reads a fragment twice)"),
            row(device, "l2_pattern", "l2_egg_pattern_unique", unique / seconds, seconds, started,
                basis + "; each block's weights counted once")]
