"""The integer EGGROLL update's CPU twin equals its NumPy reference bit for bit on the registered cases (both
kinds, with and without the CLT scale, saturated weights, a zero threshold, each noise kind), without the
simulator: the fast check of the twin that trains on every CPU (test_kernel_ops.py adds the CUDA kernel)."""

import zlib

import numpy as np
import pytest

from eggnog.kernels.core.registry import all_ops


@pytest.mark.parametrize("name", ["int_update", "int_vote"])
def test_the_cpu_twin_is_the_reference(name):
    entry = all_ops()[name]
    cases = list(entry.cases(np.random.default_rng(zlib.crc32(name.encode()))))
    assert len(cases) == 8
    for i, args in enumerate(cases):
        ref = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        twin = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        expected, got = entry.numpy(*ref), entry.cpu(*twin)
        if name == "int_vote":
            assert got.dtype == np.int64 and np.array_equal(got, expected), f"case {i}"
        else:
            assert np.array_equal(twin[0], ref[0]) and not np.array_equal(twin[0], args[0]), f"case {i}"


@pytest.mark.parametrize("shape, kind", [((5, 7), "matrix"), ((9,), "vector")])
def test_a_zero_vote_moves_down_when_the_threshold_is_zero(shape, kind):
    theta = np.arange(-127, -127 + int(np.prod(shape))).astype(np.int8).reshape(shape)  # -127 stays
    got = theta.copy()
    all_ops()["int_update"].cpu(got, np.zeros(6, np.int8), 555, kind, 0, True)
    assert np.array_equal(got, np.maximum(theta.astype(np.int16) - 1, -127))
    again = theta.copy()
    all_ops()["int_update"].cpu(again, np.zeros(6, np.int8), 555, kind, 1, True)
    assert np.array_equal(again, theta)  # a threshold above zero stops a zero vote


@pytest.mark.parametrize("shape, kind", [((5, 7), "matrix"), ((9,), "vector")])
@pytest.mark.parametrize("threshold", [0, 16, 17])
def test_votes_of_one_pair_without_the_clt_move_at_the_gates_edge(shape, kind, threshold):
    """One pair, noise as signs: every vote is +-1, so |Z| * 16 = 16 meets a threshold of 16 exactly (the
    bound is the threshold times isqrt(1) = 1) and falls short of 17."""
    theta = np.zeros(shape, np.int8)
    fitness = np.array([1], np.int8)
    votes = all_ops()["int_vote"].cpu(theta, fitness, 77, kind, False)
    assert set(np.unique(votes)) == {-1, 1}
    got, expected = theta.copy(), theta.copy()
    all_ops()["int_update"].cpu(got, fitness, 77, kind, threshold, False)
    all_ops()["int_update"].numpy(expected, fitness, 77, kind, threshold, False)
    assert np.array_equal(got, expected)
    assert np.array_equal(got, votes if threshold <= 16 else theta)
