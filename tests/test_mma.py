"""The simulated mma distributes fragments as the PTX ISA layout says: a warp that loads whole matrices by
that layout gets A @ B + C (int8: wrapping in 32 bits; TF32: of the rounded inputs, to fp32 accumulation
error), and the fragment helpers invert it."""

import numpy as np

from eggnog.kernels.core.mma import c_positions, fragments_to_matrices, round_tf32
from tests.mma_check import run_and_compare, run_tf32


def test_one_warp_mma_equals_the_matrix_product():
    for seed in (0, 1):
        got, expected = run_and_compare(seed)
        np.testing.assert_array_equal(got, expected)


def test_every_element_of_a_b_and_c_has_exactly_one_owner():
    a_regs = [[lane | (reg << 8) for reg in range(4)] for lane in range(32)]  # byte 0: the lane; byte 1: the register
    b_regs = [[lane | (reg << 8) for reg in range(2)] for lane in range(32)]
    a, b = fragments_to_matrices(a_regs, b_regs)
    assert a.shape == (16, 32) and b.shape == (32, 8)
    owners = {pos for lane in range(32) for pos in c_positions(lane)}
    assert len(owners) == 16 * 8
    # the first byte of each register lands at the column (A) or row (B) the layout gives that lane
    for lane in range(32):
        g, q = lane // 4, lane % 4
        assert (a[g, 4 * q], a[g, 4 * q + 1], a[g + 8, 4 * q + 1], a[g + 8, 16 + 4 * q + 1]) == (lane, 0, 1, 3)
        assert (b[4 * q, g], b[4 * q + 1, g], b[16 + 4 * q + 1, g]) == (lane, 0, 1)


def test_one_warp_tf32_mma_equals_the_product_of_the_rounded_inputs():
    for seed in (0, 1):
        got, expected, bound = run_tf32(seed)
        assert np.all(np.abs(got - expected) <= bound)
        # the rounding matters: the unrounded product differs by more than fp32 accumulation would
        assert np.abs(got - expected).max() < 1e-5 < np.abs(got - _unrounded(seed)).max()


def _unrounded(seed):
    rng = np.random.default_rng(seed)
    a, b, c = (rng.normal(size=s).astype(np.float32).astype(np.float64) for s in ((16, 8), (8, 8), (16, 8)))
    return a @ b + c


def test_round_tf32_is_nearest_with_ties_away_from_zero():
    ulp = 2.0 ** -10  # TF32 spacing in [1, 2)
    cases = {1.0: 1.0, 1.0 + ulp / 4: 1.0, 1.0 + ulp / 2: 1.0 + ulp, -(1.0 + ulp / 2): -(1.0 + ulp),
             1.0 + 3 * ulp / 4: 1.0 + ulp, 1.5 * 2.0 ** -130: 1.5 * 2.0 ** -130,
             np.float32(np.finfo(np.float32).max): np.inf, np.inf: np.inf}
    for x, expected in cases.items():
        assert round_tf32(np.float32(x)) == np.float32(expected), x
    assert np.isnan(round_tf32(np.float32(np.nan)))
