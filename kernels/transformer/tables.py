"""Look-up tables of the integer transformer (d-eggs' config.h), built once on the host in float64
and handed to every backend as data, so no device libm enters a result.

    rope_table(positions, head_dim)  int64 (positions, head_dim / 2, 2): round(2^20 cos(p theta_i)),
                                     round(2^20 sin(p theta_i)), theta_i = 10000^(-2 i / head_dim)
    EXP_LUT                          int64 (256,): round(2^18 exp(-i / 6)), the attention weights
    GELU_LUT                         int64 (256,): GELU of int8 at fixed point 16, index x + 128:
                                     clip(round(16 gelu(x / 16))), gelu(z) = z Phi(z)
"""

import math
from functools import lru_cache

import numpy as np

ROPE_SCALE_BIT = 20
ROPE_BASE = 10000.0
SOFTMAX_SCALE_BIT = 18
SOFTMAX_EXP_SCALE = 6.0
SOFTMAX_LUT_SIZE = 256
FIXED_ONE = 16


def rope_table(positions, head_dim):
    i = np.arange(head_dim // 2, dtype=np.float64)
    theta = ROPE_BASE ** (-2.0 * i / head_dim)
    angle = np.arange(positions, dtype=np.float64)[:, None] * theta[None, :]
    scale = float(1 << ROPE_SCALE_BIT)
    return np.ascontiguousarray(np.stack([np.rint(np.cos(angle) * scale), np.rint(np.sin(angle) * scale)], axis=-1)
                                .astype(np.int64))


@lru_cache(maxsize=8)
def cached_rope_table(positions, head_dim):
    """rope_table, made once per size and read-only (generation asks for the same one every token)."""
    table = rope_table(positions, head_dim)
    table.flags.writeable = False
    return table


EXP_LUT = np.rint((1 << SOFTMAX_SCALE_BIT) * np.exp(-np.arange(SOFTMAX_LUT_SIZE) / SOFTMAX_EXP_SCALE)).astype(np.int64)


def _gelu(z):
    return z * 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


GELU_LUT = np.array([min(max(round(FIXED_ONE * _gelu((x - 128) / FIXED_ONE)), -127), 127) for x in range(256)],
                    dtype=np.int64)
