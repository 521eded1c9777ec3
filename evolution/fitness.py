"""Fitness shaping and its wire format. Inside evolution code fitness is "higher is better"; the
log-likelihood sums that members score already are, and `bits_per_byte` is the one place that
turns them into a loss (lower is better)."""

import numpy as np

from eggnog.runtime.errors import BadInput

TRITS_PER_BYTE = 5
_POWERS = 3 ** np.arange(TRITS_PER_BYTE, dtype=np.int64)
Z_SCALE = 16  # z-scored fitness in fixed point: 16 = one standard deviation


def check_population(population, group_size, ranks):
    """Antithetic pairs in groups sharing data, split evenly over ranks; BadInput otherwise."""
    if group_size < 2 or group_size % 2:
        raise BadInput(f"group size must be even and at least 2 (pairs share their data), got {group_size}")
    if population < group_size or population % group_size:
        raise BadInput(f"population {population} must be a positive multiple of the group size {group_size}")
    if population % ranks or (population // ranks) % 2:
        raise BadInput(f"population {population} cannot be split into {ranks} equal slices of whole "
                       f"antithetic pairs; use a multiple of {2 * ranks}")


def bits_per_byte(loglik_sum, tokens):
    """Loss in bits/byte from a sum of log-likelihoods in 1/16-bit units."""
    return -float(loglik_sum) / (16.0 * tokens)


def deggs_proxy(proxy_sum, tokens):
    """d-eggs' reported loss: its integer proxy summed over `tokens` member-tokens, / (tokens 16)."""
    return proxy_sum / (tokens * 16)


def pair_signs(scores):
    """Fast fitness: sign(s_even - s_odd) per antithetic pair, int8 in {-1, 0, +1}; integer scores
    subtract in int64, any others in float64 (a cast to int64 would tie 0.3 with 0.1)."""
    scores = np.asarray(scores)
    scores = scores.astype(np.int64 if scores.dtype.kind in "biu" else np.float64)
    return np.sign(scores[0::2] - scores[1::2]).astype(np.int8)


def pair_zscores(scores):
    """Fitness without the sign shortcut: the pair differences z-scored over the whole population,
    16 = one standard deviation, rounded and clipped to int8 (0 when all differences are equal)."""
    d = np.asarray(scores, dtype=np.float64)
    d = d[0::2] - d[1::2]
    std = d.std()
    if std == 0:
        return np.zeros(d.size, dtype=np.int8)
    return np.clip(np.rint(Z_SCALE * d / std), -127, 127).astype(np.int8)


def pack_ternary(trits):
    """5 values of {-1, 0, +1} per byte (d-eggs format: 0 -> 0, +1 -> 1, -1 -> 2, byte = sum v_i 3^i);
    the tail is padded with zeros."""
    trits = np.asarray(trits, dtype=np.int8)
    if trits.size and (trits.min() < -1 or trits.max() > 1):
        raise ValueError("ternary packing needs values in {-1, 0, +1}")
    digits = np.where(trits < 0, 2, trits).astype(np.int64)
    padded = np.zeros(-(-digits.size // TRITS_PER_BYTE) * TRITS_PER_BYTE, dtype=np.int64)
    padded[:digits.size] = digits
    return (padded.reshape(-1, TRITS_PER_BYTE) @ _POWERS).astype(np.uint8)


def unpack_ternary(packed, count):
    packed = np.asarray(packed, dtype=np.int64)
    if packed.size and packed.max() >= 3**TRITS_PER_BYTE:
        raise ValueError("a ternary-packed byte is at most 242")
    digits = (packed[:, None] // _POWERS) % 3
    values = np.where(digits == 2, -1, digits).astype(np.int8).reshape(-1)
    if count > values.size:
        raise ValueError(f"{count} values requested from {packed.size} packed bytes")
    return values[:count]
