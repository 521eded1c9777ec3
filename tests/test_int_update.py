"""The integer EGGROLL update (reference = twin = kernel is tests/test_kernel_ops.py): the z-test
gate, the Z = 0 rule and saturation behave as nano-egg's."""

import numpy as np
import pytest

from eggnog.kernels.egg.int_update import reference_int_update
from eggnog.kernels.noise.reference import gaussian_rows
from eggnog.runtime.errors import BadInput


def test_gate_is_the_z_test_on_the_accumulated_vote():
    rng = np.random.default_rng(1)
    theta = np.zeros((12, 10), dtype=np.int8)
    fitness = rng.integers(-1, 2, 64).astype(np.int8)
    noise = gaussian_rows(555, np.arange(64), 0, 22)
    z = (fitness[:, None] * noise[:, 10:]).T @ noise[:, :10]
    threshold = 20
    bound = threshold * 8 * 256  # isqrt(64 pairs) = 8, CLT scale 256
    new = theta.copy()
    reference_int_update(new, fitness, 555, "matrix", threshold, True)
    expected = np.where(np.abs(z) * 16 >= bound, np.where(z > 0, 1, -1), 0)
    assert np.array_equal(new, expected)
    assert 0 < np.count_nonzero(new) < new.size


def test_zero_vote_moves_down_when_threshold_is_zero():
    theta = np.array([5, -127, 0], dtype=np.int8)
    reference_int_update(theta, np.zeros(8, dtype=np.int8), 1, "vector", 0, True)
    assert theta.tolist() == [4, -127, -1]


def test_kind_must_match_the_shape():
    with pytest.raises(BadInput, match="kind 'vector'"):
        reference_int_update(np.zeros((2, 3), np.int8), np.zeros(4, np.int8), 1, "vector", 0, True)
