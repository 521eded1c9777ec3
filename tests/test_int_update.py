"""The integer EGGROLL update (reference = twin = kernel is tests/test_kernel_ops.py): the z-test
gate, the Z = 0 rule and saturation behave as nano-egg's."""

import numpy as np
import pytest

from eggnog.kernels.egg.int_update import gate_bound, reference_int_update
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


def test_the_gate_bound_takes_int8_theta_of_its_kinds_rank_and_a_known_noise():
    fitness = np.zeros(16, np.int8)  # isqrt(16 pairs) = 4
    assert gate_bound(np.zeros((2, 3), np.int8), fitness, "matrix", 5, True) == 5 * 4 * 256
    assert gate_bound(np.zeros(3, np.int8), fitness, "vector", 5, False) == 5 * 4
    for theta, kind, says in ((np.zeros(3, np.int8), "matrix", "kind 'matrix' must be a 2-D int8"),
                              (np.zeros((1, 3), np.int8), "vector", "kind 'vector' must be a 1-D int8"),
                              (np.zeros((2, 3), np.int16), "matrix", "got 2-D int16"),
                              (np.zeros((2, 3), np.int8), "row", "kind must be 'matrix' or 'vector'")):
        with pytest.raises(BadInput, match=says):
            gate_bound(theta, fitness, kind, 5, True)
    with pytest.raises(BadInput, match="noise must be one of"):
        gate_bound(np.zeros(3, np.int8), fitness, "vector", 5, True, noise=-1)


def test_a_pytorch_int8_theta_passes_the_gate_bounds_checks():
    torch = pytest.importorskip("torch")
    theta = torch.zeros((2, 3), dtype=torch.int8)  # its dtype reads "torch.int8"
    assert gate_bound(theta, np.zeros(16, np.int8), "matrix", 5, True) == 5 * 4 * 256
