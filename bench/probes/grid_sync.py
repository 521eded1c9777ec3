"""grid.sync and the cooperative launch it needs (the persistent LSTM's: kernels/rnn/lstm_sequence_cuda.py,
one block of 512 threads an SM, a grid.sync a step). Each step, block g's first thread writes a value,
the grid synchronises, and it reads block g + 1's: a sync that does not hold gives stale values. Two
launches, of S1 and S2 steps: a sync costs (t2 - t1) / (S2 - S1); the launch with no step at all is the
cooperative launch's device time (`cooperative_launch`, for the record: the model costs launches through
host_s_per_call).

Check: block g ends with the sum over steps s of (x[g + 1] + s); on the simulator, whose blocks run one
after another, with one block."""

import time

import numba
import numpy as np

from bench.probes.device import kernel_seconds, require_equal, row
from eggnog.kernels.core.cuda_api import I32, I64_1D, cuda, kernel

I64_2D = numba.int64[:, ::1]
THREADS = 512  # the persistent LSTM's block
STEPS, QUICK_STEPS, SIMULATED_STEPS = (500, 5500), (200, 2200), (1, 3)


@kernel((I64_1D, I64_2D, I32, I64_1D), block=THREADS)
def grid_sync_steps(x, slots, steps, out):
    """Two slot rows, alternating: a block writes row s & 1 while a slow neighbour may still read row
    (s - 1) & 1, so one sync a step is enough."""
    g = cuda.blockIdx.x
    blocks = cuda.gridDim.x
    grid = cuda.cg.this_grid()
    total = numba.int64(0)
    s = np.int32(0)
    while s < steps:
        if cuda.threadIdx.x == 0:
            slots[s & 1, g] = x[g] + s
        grid.sync()
        if cuda.threadIdx.x == 0:
            total += slots[s & 1, (g + 1) % blocks]
        s = np.int32(s + 1)
    if cuda.threadIdx.x == 0:
        out[g] = total


def expected(x, steps):
    return np.roll(x, -1) * steps + steps * (steps - 1) // 2


def run(device, quick):
    started = time.perf_counter()
    blocks = 1 if device.simulated else device.sms
    block = 32 if device.simulated else THREADS
    x = np.random.default_rng(4).integers(-(1 << 40), 1 << 40, blocks)
    x_d, slots, out = cuda.to_device(x), cuda.device_array((2, blocks), np.int64), cuda.device_array(blocks, np.int64)
    seconds = {}
    for steps in (0, *(SIMULATED_STEPS if device.simulated else (QUICK_STEPS if quick else STEPS))):
        def launch(steps=steps):
            grid_sync_steps[blocks, block](x_d, slots, np.int32(steps), out)

        seconds[steps] = kernel_seconds(device, launch, quick)
        require_equal("grid_sync", out.copy_to_host(), expected(x, steps))
    first, last = sorted(seconds)[-2:]
    per_sync = (seconds[last] - seconds[first]) / (last - first)
    basis = f"{blocks} blocks of {block}: {', '.join(f'{s} steps {t * 1e3:.4g} ms' for s, t in seconds.items())}"
    return [row(device, "grid_sync", "grid_sync", per_sync, seconds[last], started, basis),
            row(device, "grid_sync", "cooperative_launch", seconds[0], seconds[0], started, basis)]
