"""On a real GPU, IMMA.16832 gives what the simulated mma gives: the fragment layout the fused EGG
kernel and its simulator tests rely on is the hardware's."""

import numpy as np

from tests.mma_check import run_and_compare, run_tf32


def test_tensor_core_mma_matches_the_layout():
    for seed in (0, 1, 2):
        got, expected = run_and_compare(seed)
        np.testing.assert_array_equal(got, expected)


def test_tf32_mma_matches_the_layout():
    for seed in (0, 1, 2):
        got, expected, bound = run_tf32(seed)
        assert np.all(np.abs(got - expected) <= bound)
