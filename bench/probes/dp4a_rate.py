"""dp4a issue rate: every thread runs eight independent chains acc_j = dp4a(a_j, b, acc_j) (IDP.4A.S8.S8
on the IMAD pipe) at full occupancy, so the pipe, not a chain's latency, sets the time. The static model
assumes 2 warp instructions a clock an SM (timing.py: 2 cycles a warp instruction on each of 4 schedulers).

Check: after n steps acc_j = j + t + n * (a_j . b_t) wrapped to 32 bits, and the thread stores the sum of
its eight accumulators."""

import time

import numpy as np

from bench.probes.device import kernel_seconds, require_equal, row, wrap32
from eggnog.kernels.core.cuda_api import I32, I32_1D, cuda, kernel
from eggnog.kernels.core.int_simd import dp4a

THREADS = 256
CHAINS = 8
BLOCKS_PER_SM = 8  # 2048 threads: a full SM
STEPS, QUICK_STEPS, SIMULATED_STEPS = 1 << 16, 1 << 14, 3


@kernel((I32_1D, I32_1D, I32, I32_1D), block=THREADS)
def dp4a_chains(a, b, steps, out):
    """Eight chains on the thread's word b[t]; the initial values differ (j + t), so no two chains are the
    same computation the compiler could merge."""
    t = cuda.grid(1)
    if t >= b.size:
        return
    w = b[t]
    start = np.int32(t)
    c0, c1, c2, c3 = start, np.int32(start + 1), np.int32(start + 2), np.int32(start + 3)
    c4, c5, c6, c7 = np.int32(start + 4), np.int32(start + 5), np.int32(start + 6), np.int32(start + 7)
    a0, a1, a2, a3, a4, a5, a6, a7 = a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]
    i = np.int32(0)
    while i < steps:
        c0 = dp4a(a0, w, c0)
        c1 = dp4a(a1, w, c1)
        c2 = dp4a(a2, w, c2)
        c3 = dp4a(a3, w, c3)
        c4 = dp4a(a4, w, c4)
        c5 = dp4a(a5, w, c5)
        c6 = dp4a(a6, w, c6)
        c7 = dp4a(a7, w, c7)
        i = np.int32(i + 1)
    out[t] = np.int32(c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7)


def expected(a, b, steps):
    """Each thread's sum of its chains, computed on the host."""
    a8 = a.view(np.int8).reshape(CHAINS, 4).astype(np.int64)
    b8 = b.view(np.int8).reshape(-1, 4).astype(np.int64)
    t = np.arange(b.size, dtype=np.int64)
    dots = b8 @ a8.sum(axis=0)  # sum over chains of a_j . b_t
    return wrap32(CHAINS * t + CHAINS * (CHAINS - 1) // 2 + steps * dots)


def run(device, quick):
    started = time.perf_counter()
    rng = np.random.default_rng(0)
    blocks = 1 if device.simulated else BLOCKS_PER_SM * device.sms
    steps = SIMULATED_STEPS if device.simulated else (QUICK_STEPS if quick else STEPS)
    threads = blocks * (64 if device.simulated else THREADS)
    # small bytes on the simulator: its int32 sums are NumPy scalars, which warn on overflow
    limit = 8 if device.simulated else 128
    a = rng.integers(-limit, limit, 4 * CHAINS).astype(np.int8).view(np.int32)
    b = rng.integers(-limit, limit, 4 * threads).astype(np.int8).view(np.int32)
    a_d, b_d = cuda.to_device(a), cuda.to_device(b)
    out = cuda.device_array(threads, np.int32)
    block = threads // blocks

    def launch():
        dp4a_chains[blocks, block](a_d, b_d, np.int32(steps), out)

    seconds = kernel_seconds(device, launch, quick)
    require_equal("dp4a_rate", out.copy_to_host(), expected(a, b, steps))
    warp_instructions = threads / 32 * steps * CHAINS
    rate = warp_instructions / device.cycles(seconds) / device.sms
    basis = (f"{warp_instructions:.4g} warp dp4a in {seconds * 1e3:.4g} ms, {blocks} blocks of {block} on "
             f"{device.sms} SMs at {device.clock_hz / 1e9:.3g} GHz")
    return [row(device, "dp4a_rate", "dp4a_issue", rate, seconds, started, basis)]
