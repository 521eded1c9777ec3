"""NumPy reference of the counter-based noise (see scalar_math for the definition).

Written independently of the scalar functions: plain uint64 products reduced mod 2^32, whole
arrays at once. Needs only NumPy, so data samplers can use it too.
"""

import numpy as np

from eggnog.kernels.noise.scalar_math import (
    GAUSS_MUL,
    GAUSS_SHIFT,
    GOLDEN32,
    INDEX_LIMIT,
    KB_SALT,
    MASK32,
    SECOND_WORD_SALT,
)

_M = np.uint64(MASK32)


def fmix32(h):
    h = np.asarray(h, dtype=np.uint64)
    h = h ^ (h >> np.uint64(16))
    h = (h * np.uint64(0x85EBCA6B)) & _M
    h = h ^ (h >> np.uint64(13))
    h = (h * np.uint64(0xC2B2AE35)) & _M
    return h ^ (h >> np.uint64(16))


def check_slice(start, count):
    if start < 0 or count < 0 or start + count > INDEX_LIMIT:
        raise ValueError(f"noise slice [{start}, {start + count}) must lie in [0, 2^32)")


def round1(key, start, count):
    check_slice(start, count)
    index = np.arange(start, start + count, dtype=np.uint64)
    return fmix32((index + np.uint64(key[0])) & _M)


def bits(key, start, count):
    """The raw 32-bit words of elements [start, start + count) of the stream `key`."""
    return fmix32(round1(key, start, count) ^ np.uint64(key[1]))


def uniform_int8(key, start, count, k):
    if not 0 <= k <= 127:
        raise ValueError(f"uniform_int8 needs 0 <= k <= 127, got {k}")
    b = bits(key, start, count).astype(np.int64)
    return ((b * (2 * k + 1)) >> 32) - k


def gaussian_from_bits(b):
    b = np.asarray(b).astype(np.int64)
    s = (b & 0xFF) + ((b >> 8) & 0xFF) + ((b >> 16) & 0xFF) + (b >> 24)
    return ((s - 510) * GAUSS_MUL + (1 << (GAUSS_SHIFT - 1))) >> GAUSS_SHIFT


def gaussian_int8(key, start, count):
    return gaussian_from_bits(bits(key, start, count))


def member_keys(prefix, members):
    """Stream keys (ka, kb) of many members of one tensor: arrays, same as scalar_math.stream_key."""
    ka = fmix32(((np.uint64(prefix) + np.uint64(GOLDEN32)) & _M) ^ np.asarray(members, dtype=np.uint64))
    return ka, fmix32(ka ^ np.uint64(KB_SALT))


def gaussian_rows(prefix, members, start, count):
    """gaussian_int8 elements [start, start + count) of each member's stream: (len(members), count)."""
    check_slice(start, count)
    ka, kb = member_keys(prefix, members)
    index = np.arange(start, start + count, dtype=np.uint64)[None, :]
    return gaussian_from_bits(fmix32(fmix32((index + ka[:, None]) & _M) ^ kb[:, None]))


def member_noise_rows(prefix, members, count, kind):
    """scalar_math.member_noise elements [0, count) of each member's stream: int64 (len(members), count)."""
    from eggnog.kernels.noise.scalar_math import DEGGS_GAUSSIAN, DEGGS_RANGE, EGG_NOISE

    if kind == EGG_NOISE:
        return gaussian_rows(prefix, members, 0, count)
    reps = 3 if kind == DEGGS_GAUSSIAN else 1
    ka, kb = member_keys(prefix, members)
    index = np.arange(count * reps, dtype=np.uint64)[None, :]
    b = fmix32(fmix32((index + ka[:, None]) & _M) ^ kb[:, None]).astype(np.int64)
    values = ((b * (2 * DEGGS_RANGE + 1)) >> 32) - DEGGS_RANGE
    return values.reshape(len(members), count, reps).sum(axis=2)


def rademacher_int8(key, start, count):
    return 1 - 2 * (bits(key, start, count).astype(np.int64) >> 31)


def normal_float32(key, start, count):
    y = round1(key, start, count)
    b1 = fmix32(y ^ np.uint64(key[1]))
    b2 = fmix32(y ^ np.uint64(key[1] ^ SECOND_WORD_SALT))
    u1 = ((b1 >> np.uint64(8)) + np.uint64(1)).astype(np.float64) * 2.0**-24
    u2 = (b2 >> np.uint64(8)).astype(np.float64) * 2.0**-24
    # float64 throughout, rounded once: the twins compute in float32 and agree to a few ulp.
    return (np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)).astype(np.float32)
