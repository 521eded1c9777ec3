"""Integer scalar math of the EGG model, written once and compiled for the CPU and the GPU.

Fixed point: 16 = 1.0 for activations and weights (int8, saturating at +-127); int32 accumulation;
shifts are arithmetic (floor). The log-likelihood is in units of 1/16 bit:

    y'  = logit + 128                    in [1, 255]
    S   = sum_v EXP2[y'_v]               EXP2[i] = floor(2^(i/16) * 16)
    ll  = y'[target] - floor(16 * log2(S / 16))

nano-egg reads the last term from a 1 GiB table (LOG2[S - 1]); here floor(16 * log2 S) is computed
exactly with integers: with e = floor(log2 S) and M = S << (61 - e) in [2^61, 2^62), the sixteenth
m is the number of thresholds ceil(2^(61 + q/16)), q = 1..15, that M reaches (exact for any S < 2^62,
so also for the sums of vocabularies above 256 symbols). All tables are built
with exact integer roots, so no libm result can shift a floor.
"""

import numpy as np

MAX8 = 127
FIXED_POINT = 4


def iroot(n, k):
    """floor(n ** (1/k)) for non-negative integers, exactly."""
    lo, hi = 0, 1 << (n.bit_length() // k + 1)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if mid**k <= n:
            lo = mid
        else:
            hi = mid - 1
    return lo


EXP2 = np.array([iroot(1 << (64 + i), 16) for i in range(256)], dtype=np.int64)


def _ceil_pow2_sixteenth(exponent_times_16):
    root = iroot(1 << exponent_times_16, 16)
    return root if root**16 == 1 << exponent_times_16 else root + 1


LOG2_THRESHOLDS = np.array([_ceil_pow2_sixteenth(61 * 16 + q) for q in range(16)], dtype=np.int64)


def matmul_divisor(d_in):
    """Outputs of an int8 matmul are divided by 16 * floor(sqrt(d_in)) to keep std 16."""
    return 16 * iroot(d_in, 2)


def build(jit):
    @jit
    def clip8(v):
        return min(max(v, -MAX8), MAX8)

    @jit
    def floor_log2_x16(s):
        """floor(16 * log2(s)) for 1 <= s < 2^62."""
        s = np.int64(s)  # a kernel may hand in an int32 sum: the shift below needs 64 bits
        e = 0
        t = s
        while t > 1:
            t >>= 1
            e += 1
        m = s << (61 - e)
        q = 0
        for j in range(1, 16):
            if m >= LOG2_THRESHOLDS[j]:
                q = j
        return 16 * e + q

    @jit
    def l1_norm_value(x, w, mean_abs):
        """One output of EGG's L1 norm: x*w / mean|x|, floor, clipped. mean_abs == 0 (mean |x| < 1)
        reproduces nano-egg's division by zero: -1 where x*w == 0, else -2."""
        p = x * w
        if mean_abs == 0:
            return -1 if p == 0 else -2
        return clip8(p // mean_abs)

    @jit
    def gru_gate(f, s):
        """(f + 127) in [0, 254] is the forget gate / 256 applied to the state s."""
        return ((f + MAX8) * s) >> 8

    @jit
    def gru_mix(f, s, hh):
        return s + (((f + MAX8) * (hh - s)) >> 8)

    return clip8, floor_log2_x16, l1_norm_value, gru_gate, gru_mix
