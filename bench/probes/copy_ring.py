"""The TF32 matmul's asynchronous-copy ring (kernels/layers/matmul_tf32.py) with its products taken out:
a block of 256 threads copies k slices of a 256-row x tile and a 192-row W tile into a three-stage ring of
shared memory with cp.async (16-byte pieces, 8 threads a row, as its _copy_rows; its shape constants),
and per slice waits for the oldest group (cp.async.wait_group 1), meets at the barrier and issues the next
slice's copies, as _slice does. With no mma to hide behind, the cycles a slice takes are what a stage's wait costs; one
block an SM (the ring's 210 KiB of shared memory). x is 8 row tiles, so x and W (13.8 MB) stay in L2.

Check: after each slice lands, thread t sums row t of the stage's x tile and (t < 192) row t of its W
tile, small integers, so the float32 sums are exact: each thread ends with laps x its rows' sums."""

import time

import numba
import numpy as np

from bench.probes.device import kernel_seconds, require_equal, row
from eggnog.kernels.core.cuda_api import F32_1D, F32_2D, I32, allow_dynamic_shared, cuda, device_function, kernel
from eggnog.kernels.core.loads import copy_async_commit, copy_async_v4, copy_async_wait, load_shared_v4
from eggnog.kernels.layers.matmul_tf32 import (  # the default shape: 256 x 192 tiles, 3 stages
    BLOCK_K,
    BLOCK_M,
    BLOCK_N,
    CHUNKS,
    PITCH,
    SHARED_BYTES,
    STAGE_WORDS,
    STAGES,
    THREADS,
    WAIT,
    X_WORDS,
)

D_IN, SIMULATED_D_IN = 1536, 2 * BLOCK_K  # the benchmark's 32768 x 1536 x 1536: 48 slices
X_TILES = 8
LAPS, QUICK_LAPS, SIMULATED_LAPS = 40, 10, 2


@device_function
def _copy_rows(src, base, count, k0, sh, at, tid):
    """The matmul's _copy_rows for rows of whole 16-byte pieces: rows base..base+count-1, columns
    k0..k0+BLOCK_K-1 of src to shared rows of PITCH words at `at`, zeros outside src."""
    rows, cols = src.shape
    r = tid >> 3
    k = (tid & 7) << 2
    inside = k0 + k < cols
    for _ in range(count * CHUNKS // THREADS):
        full = inside and base + r < rows
        copy_async_v4(sh, at + r * PITCH + k, src, base + r if full else 0, k0 + k if full else 0, full)
        r += THREADS // CHUNKS


@device_function
def _copy_slice(x, w, sh, t, stage, m_base, tid):
    """k slice t of the block's x rows and W's first BLOCK_N rows into a stage (the matmul's _copy_slice)."""
    at = stage * STAGE_WORDS
    _copy_rows(x, m_base, BLOCK_M, t * BLOCK_K, sh, at, tid)
    _copy_rows(w, 0, BLOCK_N, t * BLOCK_K, sh, at + X_WORDS, tid)


@kernel((F32_2D, F32_2D, I32, F32_1D), block=THREADS)
def copy_ring(x, w, laps, out):
    """`laps` times over the slices of d_in: block b copies x tile b % (rows / BLOCK_M) and W's first
    BLOCK_N rows; out[b * THREADS + t] = thread t's sum of its rows."""
    sh = cuda.shared.array(0, numba.float32)
    tid = cuda.threadIdx.x
    m_base = (cuda.blockIdx.x % (x.shape[0] // BLOCK_M)) * BLOCK_M
    slices = x.shape[1] // BLOCK_K
    total = laps * slices
    following = 0  # the slice of d_in the next copies take (counted, not a division per slice)
    for t in range(STAGES - 1):
        if t < total:
            _copy_slice(x, w, sh, following, t, m_base, tid)
            following = following + 1 if following + 1 < slices else 0
        copy_async_commit()
    acc = np.float32(0.0)
    stage = 0
    t = 0
    while t < total:
        copy_async_wait(WAIT)  # slice t has landed (this thread's copies) ...
        cuda.syncthreads()  # ... and everyone's; everyone is done with slice t - 1
        if t + STAGES - 1 < total:
            _copy_slice(x, w, sh, following, stage - 1 if stage > 0 else STAGES - 1, m_base, tid)
            following = following + 1 if following + 1 < slices else 0
        copy_async_commit()
        at = stage * STAGE_WORDS + tid * PITCH
        for k in range(0, BLOCK_K, 4):  # constant trips: unrolled, 8 LDS.128
            a0, a1, a2, a3 = load_shared_v4(sh, at + k)
            acc += a0 + a1 + a2 + a3
        if tid < BLOCK_N:
            for k in range(0, BLOCK_K, 4):
                b0, b1, b2, b3 = load_shared_v4(sh, at + X_WORDS + k)
                acc += b0 + b1 + b2 + b3
        stage = stage + 1 if stage < STAGES - 1 else 0
        t += 1
    out[cuda.blockIdx.x * THREADS + tid] = acc


def expected(x, w, laps, blocks):
    rows = x.sum(axis=1, dtype=np.float64).reshape(-1, BLOCK_M)
    tiles = rows[np.arange(blocks) % rows.shape[0]]
    w_rows = np.zeros(BLOCK_M)
    w_rows[:BLOCK_N] = w.sum(axis=1, dtype=np.float64)
    return (laps * (tiles + w_rows)).ravel().astype(np.float32)


def run(device, quick):
    started = time.perf_counter()
    rng = np.random.default_rng(5)
    d_in = SIMULATED_D_IN if device.simulated else D_IN
    tiles = 1 if device.simulated else X_TILES
    blocks = 1 if device.simulated else device.sms
    laps = SIMULATED_LAPS if device.simulated else (QUICK_LAPS if quick else LAPS)
    x = rng.integers(0, 4, (tiles * BLOCK_M, d_in)).astype(np.float32)
    w = rng.integers(0, 4, (BLOCK_N, d_in)).astype(np.float32)
    args = (cuda.to_device(x), cuda.to_device(w), np.int32(laps), cuda.device_array(blocks * THREADS, np.float32))
    allow_dynamic_shared(copy_ring, args, SHARED_BYTES)

    def launch():
        copy_ring[blocks, THREADS, 0, SHARED_BYTES](*args)

    seconds = kernel_seconds(device, launch, quick)
    require_equal("copy_ring", args[-1].copy_to_host(), expected(x, w, laps, blocks))
    slices = laps * d_in // BLOCK_K
    basis = (f"{slices} slices of {(BLOCK_M + BLOCK_N) * BLOCK_K * 4} B a block, {blocks} blocks of {THREADS} "
             f"in {seconds * 1e3:.4g} ms")
    return [row(device, "copy_ring", "copy_ring_wait", device.cycles(seconds) / slices, seconds, started, basis)]
