"""Int8 tensor-core issue rate: every warp runs four independent accumulator chains D_j = A B + D_j of
mma.sync m16n8k32 (IMMA.16832.S8.S8; kernels/core/mma.py), 32 warps an SM, so the tensor pipe sets the
time. The static model assumes the dense int8 peak (limits.py: about 0.92 of these a clock an SM on an
H100 SXM).

Check: after n steps each accumulator is its initial value plus n (A B), wrapped to 32 bits, with A and B
assembled from the lanes' fragment registers by mma.py's documented layout."""

import time

import numba
import numpy as np

from bench.probes.device import kernel_seconds, require_equal, row, wrap32
from eggnog.kernels.core.cuda_api import I32, cuda, kernel
from eggnog.kernels.core.mma import C_COLS, C_ROWS, fragments_to_matrices, mma_s8_16832

I32_2D = numba.int32[:, ::1]
THREADS = 256
BLOCKS_PER_SM = 4  # 32 warps an SM
CHAINS = 4
STEPS, QUICK_STEPS, SIMULATED_STEPS = 1 << 16, 1 << 14, 2


@kernel((I32_2D, I32_2D, I32, I32_2D), block=THREADS, tensor_cores=True)
def imma_chains(fragments, init, steps, out):
    """fragments[lane]: the lane's A registers (4 words) and B registers (2); init[t]: the thread's
    4 x 4 accumulator registers, different for every thread and chain, so no two chains can be merged."""
    t = cuda.grid(1)
    lane = cuda.threadIdx.x & 31
    a0, a1, a2, a3 = fragments[lane, 0], fragments[lane, 1], fragments[lane, 2], fragments[lane, 3]
    b0, b1 = fragments[lane, 4], fragments[lane, 5]
    c0, c1, c2, c3 = init[t, 0], init[t, 1], init[t, 2], init[t, 3]
    d0, d1, d2, d3 = init[t, 4], init[t, 5], init[t, 6], init[t, 7]
    e0, e1, e2, e3 = init[t, 8], init[t, 9], init[t, 10], init[t, 11]
    f0, f1, f2, f3 = init[t, 12], init[t, 13], init[t, 14], init[t, 15]
    i = np.int32(0)
    while i < steps:
        c0, c1, c2, c3 = mma_s8_16832(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)
        d0, d1, d2, d3 = mma_s8_16832(a0, a1, a2, a3, b0, b1, d0, d1, d2, d3)
        e0, e1, e2, e3 = mma_s8_16832(a0, a1, a2, a3, b0, b1, e0, e1, e2, e3)
        f0, f1, f2, f3 = mma_s8_16832(a0, a1, a2, a3, b0, b1, f0, f1, f2, f3)
        i = np.int32(i + 1)
    out[t, 0], out[t, 1], out[t, 2], out[t, 3] = c0, c1, c2, c3
    out[t, 4], out[t, 5], out[t, 6], out[t, 7] = d0, d1, d2, d3
    out[t, 8], out[t, 9], out[t, 10], out[t, 11] = e0, e1, e2, e3
    out[t, 12], out[t, 13], out[t, 14], out[t, 15] = f0, f1, f2, f3


def expected(fragments, init, steps):
    """Every thread's 16 accumulators after `steps` products, on the host."""
    a, b = fragments_to_matrices(fragments[:, :4], fragments[:, 4:])
    product = (a @ b)[C_ROWS, C_COLS].reshape(32, 4)  # lane, register
    lanes = np.arange(init.shape[0]) % 32
    return wrap32(init.astype(np.int64) + steps * np.tile(product[lanes], (1, CHAINS)))


def run(device, quick):
    started = time.perf_counter()
    rng = np.random.default_rng(1)
    blocks = 1 if device.simulated else BLOCKS_PER_SM * device.sms
    block = 64 if device.simulated else THREADS
    steps = SIMULATED_STEPS if device.simulated else (QUICK_STEPS if quick else STEPS)
    threads = blocks * block
    fragments = rng.integers(-128, 128, (32, 24)).astype(np.int8).view(np.int32)
    init = rng.integers(-(1 << 20), 1 << 20, (threads, 4 * CHAINS)).astype(np.int32)
    fragments_d, init_d = cuda.to_device(fragments), cuda.to_device(init)
    out = cuda.device_array((threads, 4 * CHAINS), np.int32)

    def launch():
        imma_chains[blocks, block](fragments_d, init_d, np.int32(steps), out)

    seconds = kernel_seconds(device, launch, quick)
    require_equal("imma_rate", out.copy_to_host(), expected(fragments, init, steps))
    mmas = threads / 32 * steps * CHAINS
    rate = mmas / device.cycles(seconds) / device.sms
    basis = (f"{mmas:.4g} warp mma m16n8k32 in {seconds * 1e3:.4g} ms, {blocks} blocks of {block} on "
             f"{device.sms} SMs at {device.clock_hz / 1e9:.3g} GHz")
    return [row(device, "imma_rate", "imma_issue", rate, seconds, started, basis)]
