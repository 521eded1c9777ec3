"""The persistent LSTM's inner loop alone (kernels/rnn/lstm_sequence_cuda.py, forward_persistent_cuda at
its default of six rows a thread): R and a group's staged h rows in shared memory, thread (unit u, lane l)
runs the k loop of four k a trip (four 16-byte R loads serve six rows, one 16-byte h load and 16 FFMA a
row) for rows l, l + lanes, ..., `reps` times. Table 1 10M's plan (64 heads of 150 units: 75 units a
block, 6 lanes, 512 threads, one block an SM by its shared memory), one block an SM on every SM.

`lstm_loop_ipc`: warp instructions the loop issues per clock per SM: the loop's instructions per trip
come from its SASS (ptxas and cuobjdump of the dev extra, as the static report) when they are at hand,
else from its source (10 LDS.128, 96 FFMA, 3 of loop control); the static model predicts 3.5 where the
best measured kernel reached 2.09 (issue 61).

Check: R and h are small integers, so the float32 dots are exact: each accumulator is reps x its dot."""

import time

import numba
import numpy as np

from bench.probes.device import kernel_seconds, require_equal, row
from eggnog.kernels.core.cuda_api import (
    F32_1D,
    F32_2D,
    I32,
    I64,
    allow_dynamic_shared,
    cuda,
    device_function,
    device_zeros,
    kernel,
)
from eggnog.kernels.core.int_simd import opaque
from eggnog.kernels.core.loads import load_shared_v4
from eggnog.kernels.rnn.lstm_sequence_cuda import MAX_THREADS, persistent_bytes, plan

ROWS = 6  # lstm_sequence_cuda.ROWS, the persistent kernel's default rows a thread
HEADS, SIZE, SIMULATED_SIZE = 64, 150, 8  # Table 1 10M: hidden 9600 in 64 heads
SIMULATED_UNITS, SIMULATED_LANES = 4, 2
REPS, QUICK_REPS, SIMULATED_REPS = 2000, 500, 2
SOURCE_INSTRUCTIONS = 4 + ROWS + 16 * ROWS + 3  # a trip: R loads, h loads, FFMA, loop control
SIGNATURE = (F32_1D, I64, I64, I64, I32, F32_2D)


@device_function
def _row_four_k(shared, h_at, w, acc):
    """Four k of one row's dot: its h as one 16-byte load against the four k's gates w (the kernel's)."""
    x0, x1, x2, x3 = load_shared_v4(shared, np.int64(h_at))
    i, f, z, o = acc
    i, f, z, o = i + w[0] * x0, f + w[1] * x0, z + w[2] * x0, o + w[3] * x0
    i, f, z, o = i + w[4] * x1, f + w[5] * x1, z + w[6] * x1, o + w[7] * x1
    i, f, z, o = i + w[8] * x2, f + w[9] * x2, z + w[10] * x2, o + w[11] * x2
    return i + w[12] * x3, f + w[13] * x3, z + w[14] * x3, o + w[15] * x3


@device_function
def _four_k(shared, h_at, stride, w_at, accs):
    """Four k for the six rows (h staged `stride` words apart), R's four gates for each k one 16-byte load."""
    w = (load_shared_v4(shared, np.int64(w_at)) + load_shared_v4(shared, np.int64(w_at + np.uint64(4)))
         + load_shared_v4(shared, np.int64(w_at + np.uint64(8)))
         + load_shared_v4(shared, np.int64(w_at + np.uint64(12))))
    a0, a1, a2, a3, a4, a5 = accs
    return (_row_four_k(shared, h_at, w, a0), _row_four_k(shared, h_at + stride, w, a1),
            _row_four_k(shared, h_at + 2 * stride, w, a2), _row_four_k(shared, h_at + 3 * stride, w, a3),
            _row_four_k(shared, h_at + 4 * stride, w, a4), _row_four_k(shared, h_at + 5 * stride, w, a5))


@device_function
def _store(out, t, at, acc):
    out[t, at], out[t, at + 1], out[t, at + 2], out[t, at + 3] = acc


@kernel(SIGNATURE, block=MAX_THREADS, launch_bounds=MAX_THREADS)
def lstm_dot_loop(staged, units, lanes, span, reps, out):
    """staged: R (word 4 (u pitch + k) + gate, pitch = span | 1) then the ROWS x lanes h rows (span words
    each), copied into shared memory as the kernel's _stage_r and _stage_h leave them; out[t]: thread t's
    six rows' (i, f, z, o) after `reps` runs of the k loop."""
    shared = cuda.shared.array(0, numba.float32)
    for e in range(cuda.threadIdx.x, staged.size, cuda.blockDim.x):
        shared[e] = staged[e]
    cuda.syncthreads()
    per = np.uint32(units)
    u, lane = np.int64(np.uint32(cuda.threadIdx.x) % per), np.int64(np.uint32(cuda.threadIdx.x) // per)
    pitch = span | 1
    h_base = 4 * units * pitch
    r_at = np.uint64(u * pitch * 4)
    end = np.uint64(span)
    stride = np.uint64(lanes * span)
    if lane < lanes:
        zero = np.float32(0.0)
        z4 = (zero, zero, zero, zero)
        accs = (z4, z4, z4, z4, z4, z4)
        rep = np.int32(0)
        while rep < reps:
            # a zero the compiler cannot see: no rep's loads are hoisted out of the rep loop
            h_at = np.uint64(h_base + lane * span) + np.uint64(opaque(np.int32(0)))
            k = np.uint64(0)
            while k < end:
                accs = _four_k(shared, h_at + k, stride, r_at + (k << np.uint64(2)), accs)
                k += np.uint64(4)
            rep = np.int32(rep + 1)
        t = cuda.grid(1)
        a0, a1, a2, a3, a4, a5 = accs
        _store(out, t, 0, a0)
        _store(out, t, 4, a1)
        _store(out, t, 8, a2)
        _store(out, t, 12, a3)
        _store(out, t, 16, a4)
        _store(out, t, 20, a5)


def staged_words(r, h):
    """R (units, span, 4) at an odd pitch, then h (ROWS x lanes, span): the shared layout, flat."""
    units, span, _ = r.shape
    padded = np.zeros((units, span | 1, 4), np.float32)
    padded[:, :span] = r
    return np.concatenate([padded.ravel(), h.ravel()]).astype(np.float32)


def expected(r, h, lanes, reps, block, blocks):
    """Each thread's six rows' gate dots times reps; zeros for threads past units x lanes."""
    units = r.shape[0]
    out = np.zeros((blocks * block, 4 * ROWS), np.float32)
    for tid in range(units * lanes):
        u, lane = tid % units, tid // units
        dots = h[lane + lanes * np.arange(ROWS)].astype(np.float64) @ r[u].astype(np.float64)  # (ROWS, 4)
        out[tid::block][:blocks] = (reps * dots).ravel()
    return out


def loop_instructions(cc):
    """(instructions a trip of the k loop issues, where the count comes from): its SASS when ptxas and
    cuobjdump are at hand (a trip is 16 ROWS FFMA, however far ptxas unrolled), else the source's count."""
    try:
        from bench.static_report.parse import analyze_sass
        from bench.static_report.tools import assemble, find_tools

        ptx, _ = cuda.compile_ptx(lstm_dot_loop.py_func, SIGNATURE, cc=cc, launch_bounds=MAX_THREADS)
        loops = analyze_sass(assemble(ptx, find_tools(), f"sm_{cc[0]}{cc[1]}")[1])["innermost_loops"]
    except Exception as e:  # no tools, or no compiler for this target: the source's count, said so
        return SOURCE_INSTRUCTIONS, f"the source's count ({type(e).__name__}: no SASS)"
    loop = max(loops, key=lambda found: found["ffma"])
    trips = loop["ffma"] / (16 * ROWS)
    return loop["instructions"] / trips, f"its SASS ({loop['instructions']} instructions for {loop['ffma']} FFMA)"


def run(device, quick):
    started = time.perf_counter()
    rng = np.random.default_rng(6)
    if device.simulated:
        size, units, lanes, block, blocks = SIMULATED_SIZE, SIMULATED_UNITS, SIMULATED_LANES, 8, 1
    else:
        size = SIZE
        units = plan(HEADS, SIZE, 1024, 11, coresident=1 << 20)[0]  # the persistent mode's slice
        lanes, block, blocks = MAX_THREADS // units, MAX_THREADS, device.sms
    span = (size + 3) // 4 * 4
    reps = SIMULATED_REPS if device.simulated else (QUICK_REPS if quick else REPS)
    r = np.zeros((units, span, 4), np.float32)
    r[:, :size] = rng.integers(-2, 3, (units, size, 4))
    h = np.zeros((ROWS * lanes, span), np.float32)
    h[:, :size] = rng.integers(-2, 3, (ROWS * lanes, size))
    staged = staged_words(r, h)
    shared = 4 * staged.size
    if not device.simulated:
        assert shared == persistent_bytes(size, units), "the staged words differ from the kernel's shared memory"
    out = device_zeros((blocks * block, 4 * ROWS), np.float32)
    args = (cuda.to_device(staged), np.int64(units), np.int64(lanes), np.int64(span), np.int32(reps), out)
    allow_dynamic_shared(lstm_dot_loop, args, shared)

    def launch():
        lstm_dot_loop[blocks, block, 0, shared](*args)

    seconds = kernel_seconds(device, launch, quick)
    require_equal("lstm_loop", out.copy_to_host(), expected(r, h, lanes, reps, block, blocks))
    per_trip, source = (SOURCE_INSTRUCTIONS, "the source's count") if device.simulated else \
        loop_instructions(device.cc)
    warps = -(-units * lanes // 32)  # warps with a working lane, each issuing the loop
    issued = warps * reps * (span // 4) * per_trip
    basis = (f"{warps} warps x {reps} reps x {span // 4} trips x {per_trip:.4g} instructions a trip "
             f"(from {source}), one block of {block} an SM on {blocks} SMs, in {seconds * 1e3:.4g} ms")
    return [row(device, "lstm_loop", "lstm_loop_ipc", issued / device.cycles(seconds), seconds, started, basis)]
