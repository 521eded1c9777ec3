"""The MinGRU scan's CPU twin loops (kernels/rnn/scan.py wraps them as ops): fp32, sequential over T,
parallel over (batch row, tile of channels). Each parallel iteration walks T for one batch row and a tile
of channels, the channels innermost and contiguous, so the gate math (cpu_vector_math's exp, one
division a gate) vectorises.
"""

import numba
import numpy as np

from eggnog.kernels.core.cpu_vector_math import exp32, sigmoid32

CPU_TILE = 256


@numba.njit(inline="always", error_model="numpy")
def _gates_cpu(kv):
    """(sigmoid(k), sigmoid(-k)) from one exp: no 1 - z cancellation."""
    t = exp32(-abs(kv))
    r = np.float32(1.0) / (np.float32(1.0) + t)
    return (r, t * r) if kv >= 0 else (t * r, r)


@numba.njit(inline="always", error_model="numpy")
def _candidate_cpu(uv):
    """(g(u), g'(u))."""
    s = sigmoid32(uv)
    return (uv + np.float32(0.5), np.float32(1.0)) if uv >= 0 else (s, s * (np.float32(1.0) - s))


@numba.njit(parallel=True, error_model="numpy", cache=True)
def forward_loop(k, u, h0, h):
    batch, steps, channels = k.shape
    tiles = (channels + CPU_TILE - 1) // CPU_TILE
    for bt in numba.prange(batch * tiles):
        b, c0 = bt // tiles, (bt % tiles) * CPU_TILE
        width = min(channels - c0, CPU_TILE)
        state = h0[b, c0:c0 + width].copy()
        for t in range(steps):
            kt, ut, ht = k[b, t, c0:c0 + width], u[b, t, c0:c0 + width], h[b, t, c0:c0 + width]
            for c in range(width):
                z, a = _gates_cpu(kt[c])
                g, _ = _candidate_cpu(ut[c])
                state[c] = a * state[c] + z * g
                ht[c] = state[c]


@numba.njit(parallel=True, error_model="numpy", cache=True)
def backward_loop(grad_h, k, u, h, h0, dk, du, dh0):
    batch, steps, channels = k.shape
    tiles = (channels + CPU_TILE - 1) // CPU_TILE
    for bt in numba.prange(batch * tiles):
        b, c0 = bt // tiles, (bt % tiles) * CPU_TILE
        width = min(channels - c0, CPU_TILE)
        lam = np.zeros(width, np.float32)
        a_next = np.zeros(width, np.float32)  # sigmoid(-k) of step t + 1 (none after the last)
        for t in range(steps - 1, -1, -1):
            before = h[b, t - 1, c0:c0 + width] if t > 0 else h0[b, c0:c0 + width]
            kt, ut, gt = k[b, t, c0:c0 + width], u[b, t, c0:c0 + width], grad_h[b, t, c0:c0 + width]
            dkt, dut = dk[b, t, c0:c0 + width], du[b, t, c0:c0 + width]
            for c in range(width):
                z, a = _gates_cpu(kt[c])
                g, dg = _candidate_cpu(ut[c])
                lam[c] = gt[c] + a_next[c] * lam[c]
                dkt[c] = z * a * lam[c] * (g - before[c])
                dut[c] = lam[c] * z * dg
                a_next[c] = a
        dh0[b, c0:c0 + width] = a_next * lam
