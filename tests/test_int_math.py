"""EGG integer math: exact tables, the integer floor(16 log2 S) over every reachable S, the
log-likelihood against nano-egg's table formula."""

import math

import numba
import numpy as np
import pytest

from eggnog.kernels.egg import member_ops
from eggnog.kernels.egg.int_math import EXP2, build, iroot, matmul_divisor

S_MIN, S_MAX = 256 * int(EXP2[1]), 256 * int(EXP2[255])  # sums of 256 EXP2 terms of y' in [1, 255]
cpu_floor_log2_x16 = build(numba.njit)[1]


def test_exp2_matches_the_float_table_formula():
    assert EXP2.tolist() == [int(2 ** (i / 16) * 16) for i in range(256)]


def test_integer_roots_and_divisors():
    assert [iroot(n, 2) for n in (0, 1, 3, 4, 255, 256, 1023, 1024)] == [0, 1, 1, 2, 15, 16, 31, 32]
    assert iroot(2**64, 16) == 16 and iroot(2**64 - 1, 16) == 15
    assert matmul_divisor(256) == 256 and matmul_divisor(1024) == 512 and matmul_divisor(64) == 128


@numba.njit
def _count_mismatches(lo, hi):
    bad = 0
    for s in range(lo, hi + 1):
        if cpu_floor_log2_x16(s) != math.floor(16.0 * math.log2(s)):
            bad += 1
    return bad


def test_floor_log2_exact_on_every_reachable_sum():
    # float64 is exact here (no 16*log2(S) lies within 5e-9 of an integer): it is the table formula.
    assert _count_mismatches(S_MIN, S_MAX) == 0


def test_floor_log2_boundaries_on_every_backend():
    py, gpu = member_ops.py_floor_log2_x16, member_ops.gpu_floor_log2_x16
    for k in range(16 * 12, 16 * 28):
        edge = iroot(1 << k, 16) + (0 if iroot(1 << k, 16) ** 16 == 1 << k else 1)  # ceil(2^(k/16))
        for s in (edge - 1, edge):
            if S_MIN <= s <= S_MAX:
                expected = k if s == edge else k - 1
                assert py(s) == cpu_floor_log2_x16(s) == int(gpu(s)) == expected


def test_floor_log2_exact_above_2_to_28_on_every_backend():
    """Sums of vocabularies above 256 symbols: edges of every sixteenth up to 2^40, exactly."""
    py, gpu = member_ops.py_floor_log2_x16, member_ops.gpu_floor_log2_x16
    for k in range(16 * 28, 16 * 40):
        edge = iroot(1 << k, 16) + (0 if iroot(1 << k, 16) ** 16 == 1 << k else 1)  # ceil(2^(k/16))
        for s in (edge - 1, edge, edge + 12345):
            exact = (s**16).bit_length() - 1  # floor(log2(s^16)), in integers
            assert py(s) == cpu_floor_log2_x16(s) == int(gpu(s)) == exact


def table_loglik(logits, targets):
    """nano-egg: ll = y'[target] - LOG2[S - 1], LOG2[j] = int32(log2((j + 1) / 16) * 16)."""
    y = logits.astype(np.int64) + 128
    s = EXP2[y].sum(axis=1)
    return y[np.arange(len(y)), targets] - np.trunc(np.log2(s / 16) * 16).astype(np.int64)


@pytest.mark.parametrize("scale", [16, 127])
def test_loglik_against_the_table(scale):
    rng = np.random.default_rng(scale)
    logits = np.clip(rng.normal(0, scale, (40, 256)), -127, 127).astype(np.int8)
    logits[0] = 127
    logits[1] = -127
    targets = rng.integers(0, 256, 40).astype(np.uint8)
    assert np.array_equal(member_ops.reference_egg_loglik(logits, targets), table_loglik(logits, targets))
