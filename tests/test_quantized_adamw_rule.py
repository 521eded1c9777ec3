"""d-eggs' quantized AdamW on hand-worked elements, for the NumPy reference and the CPU twin alike: the moments
take (1 - beta) of the new vote, eps keeps a tiny second moment from blowing the step up, an accumulator that
reaches +-1 exactly steps its weight by one and keeps the rest, and a saturated weight pins its accumulator
at +-1. (test_kernel_ops.py checks that the twin and the kernel agree with the reference; this checks the
rule itself.)"""

import numpy as np
import pytest

from eggnog.kernels.core.registry import all_ops

OP = all_ops()["quantized_adamw_"]


def run(implementation, theta, votes, m, v, acc, lr=1.0, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.0):
    arrays = [np.array(theta, np.int8), np.array(votes, np.int64), np.array(m, np.float32), np.array(v, np.float32),
              np.array(acc, np.float32)]
    getattr(OP, implementation)(*arrays, lr, beta1, beta2, eps, weight_decay)
    return arrays[0], arrays[2], arrays[3], arrays[4]


@pytest.mark.parametrize("implementation", ["numpy", "cpu"])
def test_the_moments_take_one_minus_beta_of_the_vote(implementation):
    _, m, v, acc = run(implementation, [0], [3], [0.0], [0.0], [0.0], lr=1e-3)
    np.testing.assert_allclose(m, [-0.1 * 3], rtol=1e-6)  # the gradient is minus the vote
    np.testing.assert_allclose(v, [0.05 * 9], rtol=1e-6)
    np.testing.assert_allclose(acc, [-1e-3 * -0.3 / np.sqrt(0.45)], rtol=1e-5)


@pytest.mark.parametrize("implementation", ["numpy", "cpu"])
def test_eps_bounds_the_step_where_the_second_moment_is_tiny(implementation):
    # vote 0: m = 0.9 * 2e-8 = 1.8e-8, v = 0.95 * 1e-16, sqrt(v) ~ 9.7e-9; with eps: a step of about 0.92
    theta, m, v, acc = run(implementation, [0], [0], [2e-8], [1e-16], [0.0])
    assert theta[0] == 0 and -1 < acc[0] < -0.9


@pytest.mark.parametrize("implementation", ["numpy", "cpu"])
def test_an_accumulator_at_plus_or_minus_one_steps_its_weight(implementation):
    theta, _, _, acc = run(implementation, [5, 5, 5, 5], [0] * 4, [0.0] * 4, [0.0] * 4, [1.0, -1.0, 0.99, -0.99])
    assert theta.tolist() == [6, 4, 5, 5] and acc.tolist() == pytest.approx([0.0, 0.0, 0.99, -0.99])
    theta, _, _, acc = run(implementation, [5, 5], [0, 0], [0.0, 0.0], [0.0, 0.0], [2.5, -2.5])
    assert theta.tolist() == [6, 4] and acc.tolist() == [1.5, -1.5]  # one step per update, the rest carried


@pytest.mark.parametrize("implementation", ["numpy", "cpu"])
def test_a_saturated_weight_pins_its_accumulator(implementation):
    theta, _, _, acc = run(implementation, [127, -127, 127, -127], [0] * 4, [0.0] * 4, [0.0] * 4,
                           [1.5, -1.5, -1.5, 1.5])
    assert theta.tolist() == [127, -127, 126, -126] and acc.tolist() == [1.0, -1.0, -0.5, 0.5]


@pytest.mark.parametrize("implementation", ["numpy", "cpu"])
def test_weight_decay_pulls_toward_zero(implementation):
    theta, _, _, acc = run(implementation, [100, -100], [0, 0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], lr=0.5,
                           weight_decay=0.01)
    assert theta.tolist() == [100, -100] and acc.tolist() == pytest.approx([-0.5, 0.5])
