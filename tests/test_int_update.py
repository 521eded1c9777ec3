"""The integer EGGROLL update: reference, CPU twin and CUDA kernel (simulator) bit-identical; the
z-test gate, the Z = 0 rule and saturation behave as nano-egg's."""

import numpy as np
import pytest

from eggnog.kernels import int_update
from eggnog.kernels.backend import Backend, to_host
from eggnog.kernels.rng_reference import gaussian_rows

SIM = Backend("cuda", simulated=True)


def three_ways(theta, fitness, kind, threshold, use_clt):
    ref = int_update.reference(theta, fitness, 555, kind, threshold, use_clt)
    cpu = int_update.cpu(theta, fitness, 555, kind, threshold, use_clt)
    sim = int_update.cuda_launch(SIM.to_device(theta.copy()), SIM.to_device(fitness), 555, kind, threshold, use_clt)
    return ref, cpu, to_host(sim)


@pytest.mark.parametrize("kind,shape", [("matrix", (18, 21)), ("matrix", (40, 8)), ("vector", (45,))])
@pytest.mark.parametrize("threshold,use_clt", [(0, True), (18, True), (24, False)])
def test_update_three_ways(kind, shape, threshold, use_clt):
    rng = np.random.default_rng(threshold)
    theta = rng.integers(-127, 128, shape).astype(np.int8)
    theta.flat[:2] = [127, -127]
    fitness = rng.integers(-1, 2, 36).astype(np.int8)
    ref, cpu, sim = three_ways(theta, fitness, kind, threshold, use_clt)
    assert np.array_equal(ref, cpu) and np.array_equal(ref, sim)
    assert np.all(np.abs(ref.astype(int) - theta) <= 1) and np.any(ref != theta)


def test_gate_is_the_z_test_on_the_accumulated_vote():
    rng = np.random.default_rng(1)
    theta = np.zeros((12, 10), dtype=np.int8)
    fitness = rng.integers(-1, 2, 64).astype(np.int8)
    noise = gaussian_rows(555, np.arange(64), 0, 22)
    z = (fitness[:, None] * noise[:, 10:]).T @ noise[:, :10]
    threshold = 20
    bound = threshold * 8 * 256  # isqrt(64 pairs) = 8, CLT scale 256
    new = int_update.reference(theta, fitness, 555, "matrix", threshold, True)
    expected = np.where(np.abs(z) * 16 >= bound, np.where(z > 0, 1, -1), 0)
    assert np.array_equal(new, expected)
    assert 0 < np.count_nonzero(new) < new.size


def test_zero_vote_moves_down_when_threshold_is_zero():
    theta = np.array([5, -127, 0], dtype=np.int8)
    new = int_update.reference(theta, np.zeros(8, dtype=np.int8), 1, "vector", 0, True)
    assert new.tolist() == [4, -127, -1]
