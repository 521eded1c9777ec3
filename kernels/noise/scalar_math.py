"""Scalar math of the counter-based noise, written once and compiled for the CPU and the GPU.

Every value is a pure function of (seed, tensor_id, epoch, member, element index):

    prefix   = prefix_key(seed, tensor_id, epoch)              # once per tensor and epoch, on the host
    ka       = member_key_a(prefix, member); kb = fmix32(ka ^ KB_SALT)   # per member, host or kernel
    y        = fmix32((index + ka) mod 2^32)                   # round 1, keyed by ka
    bits     = fmix32(y ^ kb)                                  # round 2, keyed by kb
    bits2    = fmix32(y ^ kb ^ SECOND_WORD_SALT)               # a second word, for Box-Muller

More in docs/internals.md (kernels/noise/scalar_math.py)."""

import math

import numpy as np

MASK32 = 0xFFFFFFFF
GOLDEN32 = 0x9E3779B9
KEY_INIT = 0x243F6A88  # digits of pi: any fixed non-zero start
KB_SALT = 0x5851F42D
SECOND_WORD_SALT = 0x6A09E667
INDEX_LIMIT = 1 << 32

GAUSS_MUL = 443  # 16 / 147.80 ~= 443 / 4096
GAUSS_SHIFT = 12
TWO_POW_M24 = 2.0**-24
HALF_PI_OVER_2POW22 = (math.pi / 2) / 2**22


def build(jit):
    """Return the scalar functions compiled by `jit` (identity for plain Python)."""

    @jit
    def mul32(h, c):
        # (h * c) mod 2^32 without a product above 2^48: no overflow in any integer semantics.
        return (h * (c & 0xFFFF) + (((h * (c >> 16)) & 0xFFFF) << 16)) & MASK32

    @jit
    def fmix32(h):
        h ^= h >> 16
        h = mul32(h, 0x85EBCA6B)
        h ^= h >> 13
        h = mul32(h, 0xC2B2AE35)
        h ^= h >> 16
        return h

    @jit
    def member_key_a(prefix, member):
        return fmix32(((prefix + GOLDEN32) & MASK32) ^ member)

    @jit
    def member_key_b(key_a):
        return fmix32(key_a ^ KB_SALT)

    @jit
    def round1(ka, index):
        return fmix32((index + ka) & MASK32)

    @jit
    def bits_of(y, kb):
        return fmix32(y ^ kb)

    @jit
    def uniform_int(bits, k):
        return ((bits * (2 * k + 1)) >> 32) - k

    @jit
    def gaussian_int8(bits):
        s = (bits & 0xFF) + ((bits >> 8) & 0xFF) + ((bits >> 16) & 0xFF) + (bits >> 24)
        return ((s - 510) * GAUSS_MUL + (1 << (GAUSS_SHIFT - 1))) >> GAUSS_SHIFT

    @jit
    def rademacher(bits):
        return 1 - 2 * (bits >> 31)

    return mul32, fmix32, member_key_a, member_key_b, round1, bits_of, uniform_int, gaussian_int8, rademacher


# Member noise kinds, what `member_noise` draws at a stream index: the EGG's gaussian_int8 (nano-egg),
# d-eggs' uniform integers on [-15, 15], and d-eggs' "gaussian": the sum of three such draws (at
# stream indices 3i, 3i + 1, 3i + 2).
EGG_NOISE, DEGGS_UNIFORM, DEGGS_GAUSSIAN = 0, 1, 2
DEGGS_RANGE = 15


def build_member_noise(jit, round1, bits_of, uniform_int, gaussian_int8):
    @jit
    def member_noise(ka, kb, index, kind):
        if kind == EGG_NOISE:
            return gaussian_int8(bits_of(round1(ka, index), kb))
        if kind == DEGGS_UNIFORM:
            return uniform_int(bits_of(round1(ka, index), kb), DEGGS_RANGE)
        total = 0
        for r in range(3):
            total += uniform_int(bits_of(round1(ka, 3 * index + r), kb), DEGGS_RANGE)
        return total

    return member_noise


def build_normal(jit, fmix32):
    """Box-Muller on float32. The cosine is a polynomial, not libm: libdevice's cosf carries a
    float64 slow path for huge arguments, and our angle is never huge. Constants are cast in place
    because numba types module-level NumPy scalars as float64."""

    @jit
    def cos_turn24(m):
        # cos(2*pi*m / 2^24) for 0 <= m < 2^24. The quadrant (top 2 bits) and the reflection
        # about pi/4 are exact integer steps, so the Taylor series only sees [0, pi/4].
        quadrant = m >> 22
        r = m & 0x3FFFFF
        reflected = r > 0x200000
        if reflected:
            r = 0x400000 - r
        x = np.float32(np.int32(r)) * np.float32(HALF_PI_OVER_2POW22)
        x2 = x * x
        c = np.float32(1.0 / 40320.0) + x2 * np.float32(-1.0 / 3628800.0)
        c = np.float32(-1.0 / 720.0) + x2 * c
        c = np.float32(1.0 / 24.0) + x2 * c
        c = np.float32(-0.5) + x2 * c
        c = np.float32(1.0) + x2 * c
        s = np.float32(1.0 / 362880.0) + x2 * np.float32(-1.0 / 39916800.0)
        s = np.float32(-1.0 / 5040.0) + x2 * s
        s = np.float32(1.0 / 120.0) + x2 * s
        s = np.float32(-1.0 / 6.0) + x2 * s
        s = x + x * x2 * s
        if reflected:
            c, s = s, c
        if quadrant == 0:
            return c
        if quadrant == 1:
            return -s
        if quadrant == 2:
            return -c
        return s

    @jit
    def normal_f32(y, kb):
        b1 = fmix32(y ^ kb)
        b2 = fmix32(y ^ kb ^ SECOND_WORD_SALT)
        u1 = np.float32(np.int32((b1 >> 8) + 1)) * np.float32(TWO_POW_M24)  # (0, 1]: log finite
        radius = math.sqrt(np.float32(-2.0) * math.log(u1))
        return radius * cos_turn24(b2 >> 8)

    return normal_f32


_, _fmix32_py, _member_key_a_py, _member_key_b_py, *_ = build(lambda f: f)


def _check_range(name, value, limit):
    if not 0 <= int(value) < limit:
        raise ValueError(f"noise {name} must be in [0, {limit}), got {value}")


def prefix_key(seed, tensor_id, epoch):
    """The key of all streams of one tensor at one noise epoch; kernels derive each member's
    stream key from it with member_key_a / member_key_b."""
    _check_range("seed", seed, 1 << 64)
    _check_range("tensor_id", tensor_id, 1 << 32)
    _check_range("epoch", epoch, 1 << 32)
    h = KEY_INIT
    for word in (seed & MASK32, seed >> 32, tensor_id, epoch):
        h = _fmix32_py(((h + GOLDEN32) & MASK32) ^ int(word))
    return h


def stream_key(seed, tensor_id, epoch, member):
    """The two 32-bit round keys of one noise stream; computed on the host, passed to kernels."""
    _check_range("member", member, 1 << 32)
    ka = _member_key_a_py(prefix_key(seed, tensor_id, epoch), int(member))
    return ka, _member_key_b_py(ka)
