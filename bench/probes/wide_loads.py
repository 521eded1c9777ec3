"""16-byte loads under two resident blocks an SM (the EGG epoch's occupancy: 256 threads, its launch
bounds and dynamic shared memory): each warp follows four chains through a 16 MB buffer of 512-byte lines
(L2-resident, far past L1), each lane loading its 16 bytes of a line with ld.global.nc.v4 (coalesced, as
the epoch's loads are); the next line of a chain is in the bytes just loaded, so the four loads of a round
are in flight together and the next round waits for them: the epoch's four chunk loads in flight.

`ldg128_latency`: cycles a round takes, the latency of a 16-byte load from its issue to its value under
that load; `ldg128_bandwidth`: the bytes those loads bring, per second (L2 to the SMs, no L1 reuse). Neither
fixes a constant: 16 warps with 2 KB each in flight make the round bandwidth-bound, so it is not the
latency the model adds beside its L2 pipe (global_latency_cycles, fitted), and the model's L2 bandwidth
is taken under the epoch's own pattern (l2_pattern).

Check: every thread ends on the lines its chains reach after n rounds, and sums the words it read."""

import time

import numba
import numpy as np

from bench.probes.device import kernel_seconds, require_equal, row, wrap32
from eggnog.kernels.core.cuda_api import I32, I32_1D, allow_dynamic_shared, cuda, kernel
from eggnog.kernels.core.loads import load_global_v4
from eggnog.kernels.egg.epoch_cuda import Plan

I32_2D = numba.int32[:, ::1]
THREADS = 256
BLOCKS_PER_SM = 2
LINE_WORDS = 128  # 512 bytes: a warp's 32 lanes x 16 bytes
CHAINS = 4
LINES, SIMULATED_LINES = 1 << 15, 16  # 16 MB
ROUNDS, QUICK_ROUNDS, SIMULATED_ROUNDS = 4096, 1024, 3
EGG = (6, 256)


@kernel((I32_1D, I32_2D, I32, I32_2D), block=THREADS, launch_bounds=(THREADS, BLOCKS_PER_SM))
def chase_lines(lines, starts, rounds, out):
    """Lane l's words of line L: the next line of its chain, L, l and 1; out[t] = the four lines reached and
    the sum of the other words read (all four words are used: ptxas narrows a load whose words are not)."""
    t = cuda.grid(1)
    lane = cuda.threadIdx.x & 31
    warp = t >> 5
    a, b, c, d = starts[warp, 0], starts[warp, 1], starts[warp, 2], starts[warp, 3]
    seen = np.int32(0)
    at = np.int32(4 * lane)
    r = np.int32(0)
    while r < rounds:
        a, a1, a2, a3 = load_global_v4(lines, np.int32(a * LINE_WORDS + at))
        b, b1, b2, b3 = load_global_v4(lines, np.int32(b * LINE_WORDS + at))
        c, c1, c2, c3 = load_global_v4(lines, np.int32(c * LINE_WORDS + at))
        d, d1, d2, d3 = load_global_v4(lines, np.int32(d * LINE_WORDS + at))
        seen = np.int32(seen + a1 + a2 + a3 + b1 + b2 + b3 + c1 + c2 + c3 + d1 + d2 + d3)
        r = np.int32(r + 1)
    out[t, 0], out[t, 1], out[t, 2], out[t, 3], out[t, 4] = a, b, c, d, seen


def chain_buffer(n_lines, rng):
    """Lines in one random cycle: (the buffer's words, the cycle's order)."""
    order = rng.permutation(n_lines).astype(np.int32)
    following = np.empty(n_lines, np.int32)
    following[order] = np.roll(order, -1)
    words = np.zeros((n_lines, 32, 4), np.int32)
    words[:, :, 0] = following[:, None]
    words[:, :, 1] = np.arange(n_lines, dtype=np.int32)[:, None]
    words[:, :, 2] = np.arange(32, dtype=np.int32)[None, :]
    words[:, :, 3] = 1
    return words.ravel(), order


def expected(order, starts, rounds, threads):
    """The lines each thread reaches and its sum of (line, lane, 1) over the loads, following the cycle on
    the host."""
    where = np.empty(order.size, np.int64)
    where[order] = np.arange(order.size)
    position = where[starts]  # (warps, chains): each round reads the current line, then moves on
    reached = order[(position + rounds) % order.size]
    laps, rest = divmod(rounds, order.size)
    prefix = np.concatenate([[0], np.cumsum(np.tile(order, 2), dtype=np.int64)])  # sums along the cycle
    seen = (laps * int(order.sum()) + prefix[position + rest] - prefix[position]).sum(axis=1)
    per_thread = np.repeat(np.concatenate([reached, seen[:, None]], axis=1), 32, axis=0)[:threads]
    per_thread[:, 4] += CHAINS * rounds * (np.arange(threads) % 32 + 1)
    return wrap32(per_thread)


def run(device, quick):
    started = time.perf_counter()
    rng = np.random.default_rng(3)
    n_lines = SIMULATED_LINES if device.simulated else LINES
    block = 64 if device.simulated else THREADS
    blocks = BLOCKS_PER_SM * (1 if device.simulated else device.sms)
    rounds = SIMULATED_ROUNDS if device.simulated else (QUICK_ROUNDS if quick else ROUNDS)
    threads = blocks * block
    words, order = chain_buffer(n_lines, rng)
    spacing = max(1, n_lines // (threads // 32 * CHAINS))
    starts = order[(np.arange(threads // 32 * CHAINS) * spacing) % n_lines].reshape(-1, CHAINS)
    args = (cuda.to_device(words), cuda.to_device(np.ascontiguousarray(starts)), np.int32(rounds),
            cuda.device_array((threads, 5), np.int32))
    shared = 0 if device.simulated else Plan(*EGG).shared_bytes
    allow_dynamic_shared(chase_lines, args, shared)

    def launch():
        chase_lines[blocks, block, 0, shared](*args)

    seconds = kernel_seconds(device, launch, quick)
    require_equal("wide_loads", args[-1].copy_to_host(), expected(order, starts, rounds, threads))
    cycles = device.cycles(seconds) / rounds
    moved = threads * rounds * CHAINS * 16
    basis = (f"{rounds} rounds of {CHAINS} LDG.128 a thread, {blocks} blocks of {block} "
             f"({shared} B shared a block) over {n_lines * 512 / 1e6:.3g} MB in {seconds * 1e3:.4g} ms")
    return [row(device, "wide_loads", "ldg128_latency", cycles, seconds, started, basis),
            row(device, "wide_loads", "ldg128_bandwidth", moved / seconds, seconds, started, basis)]
