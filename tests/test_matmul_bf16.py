"""matmul_bf16 and matmul_backward_bf16 beyond the registered cases (which check reference = twin =
simulated kernel): their error against the fp32 products of the unrounded inputs is within the bound
their module states and is of bf16 size; bf16 rounding is to nearest, ties to even, as the hardware's
cvt.rn.bf16x2.f32 (and the simulated pack agrees with it); the bf16 fragment layout gives every element
one owner; shapes that do not match are refused."""

import numpy as np
import pytest

from eggnog.kernels.core.mma import BF16_K, MMA_M, MMA_N, bf16_fragments_to_matrices, round_bf16, simulated_pack_bf16x2
from eggnog.kernels.core.placement import to_host
from eggnog.kernels.layers.matmul_bf16 import (
    cpu_matmul_backward_bf16,
    cpu_matmul_bf16,
    cuda_matmul_backward_bf16,
    cuda_matmul_bf16,
)
from eggnog.runtime.errors import BadInput


def f64(a):
    return np.asarray(a, np.float64)


def bound(a, b):
    """The module's bound on |op(a, b) - a b| for a (M, K) b (K, N)."""
    k = a.shape[1]
    return (2.0 ** -7 + 2.0 ** -15 + k * 2.0 ** -24) * (np.abs(f64(a)) @ np.abs(f64(b)))


def rms(a):
    return np.sqrt(np.mean(np.asarray(a, np.float64) ** 2))


def test_twin_error_is_within_the_stated_bound_and_of_bf16_size():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(64, 1536)).astype(np.float32)
    w = (rng.normal(size=(48, 1536)) / 40).astype(np.float32)
    exact = f64(x) @ f64(w).T
    err = np.abs(cpu_matmul_bf16(x, w) - exact)
    assert np.all(err <= bound(x, w.T))
    # bf16: about 2^-7 / sqrt(12) = 2.3e-3 (module docstring); TF32 would be 3e-4, fp32 1e-7
    assert 1.8e-3 < rms(err) / rms(exact) < 3e-3


def test_backward_twin_errors_are_within_the_stated_bound_and_of_bf16_size():
    rng = np.random.default_rng(5)
    rows, d_in, d_out = 512, 48, 40
    dy = rng.normal(size=(rows, d_out)).astype(np.float32)
    x = rng.normal(size=(rows, d_in)).astype(np.float32)
    w = rng.normal(size=(d_out, d_in)).astype(np.float32)
    dx, dw = cpu_matmul_backward_bf16(dy, x, w)
    for got, a, b in ((dx, dy, w), (dw, dy.T, x)):
        exact = f64(a) @ f64(b)
        err = np.abs(got - exact)
        assert np.all(err <= bound(a, b))
        assert 1.8e-3 < rms(err) / rms(exact) < 3e-3


def test_kernel_errors_are_within_the_stated_bound():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(20, 96)).astype(np.float32)
    w = rng.normal(size=(12, 96)).astype(np.float32) * np.float32(1000)
    dy = rng.normal(size=(20, 12)).astype(np.float32)
    y = to_host(cuda_matmul_bf16(x, w))
    err = np.abs(y - f64(x) @ f64(w).T)
    assert np.all(err <= bound(x, w.T)) and err.max() > 0
    dx, dw = (to_host(a) for a in cuda_matmul_backward_bf16(dy, x, w))
    for got, a, b in ((dx, dy, w), (dw, dy.T, x)):
        err = np.abs(got - f64(a) @ f64(b))
        assert np.all(err <= bound(a, b)) and err.max() > 0


def bits(value):
    return np.float32(value).view(np.uint32)


def from_bits(word):
    return np.uint32(word).view(np.float32)


def test_round_bf16_is_nearest_with_ties_to_even():
    ulp = 2.0 ** -7  # bf16 spacing in [1, 2)
    cases = {1.0: 1.0, 1.0 + ulp / 4: 1.0, 1.0 + ulp / 2: 1.0, 1.0 + 3 * ulp / 2: 1.0 + 2 * ulp,
             -(1.0 + 3 * ulp / 2): -(1.0 + 2 * ulp), 1.0 + ulp / 2 + 2.0 ** -20: 1.0 + ulp,
             1.0 + 3 * ulp / 4: 1.0 + ulp, np.inf: np.inf, -np.inf: -np.inf, 0.0: 0.0,
             np.float32(np.finfo(np.float32).max): np.inf}  # past the largest bf16: overflow to inf
    for x, expected in cases.items():
        assert round_bf16(np.float32(x)) == np.float32(expected), x
    # subnormals round the same way, no flush: a tie between 0 and the smallest bf16 subnormal goes to 0,
    # one between it and the next up
    assert bits(round_bf16(from_bits(0x00008000))) == 0
    assert bits(round_bf16(from_bits(0x00018000))) == 0x00020000
    assert bits(round_bf16(from_bits(0x00018001))) == 0x00020000
    assert bits(round_bf16(from_bits(0x7F7F0000))) == 0x7F7F0000  # the largest bf16 stays
    assert bits(round_bf16(from_bits(0x7F7F7FFF))) == 0x7F7F0000
    for nan in (np.nan, from_bits(0xFFC00001), from_bits(0x7F800001)):
        assert bits(round_bf16(nan)) == 0x7FFF0000  # the canonical NaN, whatever the payload


def test_simulated_pack_holds_the_rounded_pair_lower_half_first():
    rng = np.random.default_rng(6)
    values = np.concatenate([rng.normal(size=64), [np.inf, -np.inf, np.nan, 1.0 + 2.0 ** -8, 1e-40]]).astype(
        np.float32)
    for lo, hi in zip(values, np.roll(values, 1)):
        word = int(bits(simulated_pack_bf16x2(lo, hi)))
        assert word & 0xFFFF == bits(round_bf16(lo)) >> 16
        assert word >> 16 == bits(round_bf16(hi)) >> 16


def test_every_element_of_the_bf16_fragments_has_exactly_one_owner():
    # register value: the lane's index in the upper half's exponent-free bits, the register in the lower
    words = [[(lane << 16) | (reg + 1) for reg in range(4)] for lane in range(32)]
    a_regs = [[np.uint32(v).view(np.float32) for v in lane] for lane in words]
    b_regs = [lane[:2] for lane in a_regs]
    a, b = bf16_fragments_to_matrices(a_regs, b_regs)
    assert a.shape == (MMA_M, BF16_K) and b.shape == (BF16_K, MMA_N)
    a_bits = a.astype(np.float32).view(np.uint32) >> 16
    b_bits = b.astype(np.float32).view(np.uint32) >> 16
    for lane in range(32):
        g, q = lane // 4, lane % 4
        # lower halves carry reg + 1, upper halves the lane, at the PTX ISA's positions
        assert [a_bits[g, 2 * q], a_bits[g + 8, 2 * q], a_bits[g, 2 * q + 8], a_bits[g + 8, 2 * q + 8]] == [1, 2, 3, 4]
        assert [a_bits[g, 2 * q + 1], a_bits[g + 8, 2 * q + 9]] == [lane, lane]
        b_halves = [b_bits[2 * q, g], b_bits[2 * q + 8, g], b_bits[2 * q + 1, g], b_bits[2 * q + 9, g]]
        assert b_halves == [1, 2, lane, lane]


@pytest.mark.parametrize("x_shape, w_shape", [((3, 4), (5, 6)), ((4,), (5, 4)), ((2, 3, 4), (5, 4))])
def test_mismatched_shapes_are_refused(x_shape, w_shape):
    x, w = np.zeros(x_shape, np.float32), np.zeros(w_shape, np.float32)
    for fn in (cpu_matmul_bf16, cuda_matmul_bf16):
        with pytest.raises(BadInput, match="linear layer"):
            fn(x, w)


def test_a_gradient_of_the_wrong_shape_is_refused():
    x, w, dy = np.zeros((3, 4), np.float32), np.zeros((5, 4), np.float32), np.zeros((3, 4), np.float32)
    for fn in (cpu_matmul_backward_bf16, cuda_matmul_backward_bf16):
        with pytest.raises(BadInput, match="gradient of a linear layer"):
            fn(dy, x, w)
