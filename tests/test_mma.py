"""The simulated int8 mma distributes fragments as the PTX ISA layout says: a warp that loads whole
matrices by that layout gets A @ B + C (wrapping in 32 bits), and the fragment helpers invert it."""

import numpy as np

from eggnog.kernels.mma import c_positions, fragments_to_matrices
from tests.mma_check import run_and_compare


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
