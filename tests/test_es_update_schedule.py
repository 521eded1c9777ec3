"""Integer EGGROLL's update schedule and `update`, against nano-egg's and d-eggs' formulas written out here: the
learning rate's 4x / 2x warm-up and linear decay, the z-test level's decay, the gate threshold, the noise
epoch, and what `update` returns and moves."""

from statistics import NormalDist

import numpy as np
import pytest

from eggnog.evolution.eggroll import IntEggroll, IntEggrollConfig
from eggnog.evolution.es_trainer import EsRunConfig
from eggnog.kernels.core.backend import Backend
from eggnog.models.egg import EggConfig, EggModel
from eggnog.runtime.errors import BadInput

CPU = Backend("cpu")


@pytest.mark.parametrize("step, factor", [(0, 4), (99, 4), (100, 2), (199, 2), (200, 1), (5000, 1)])
def test_the_learning_rate_is_four_then_two_then_one_times_lr(step, factor):
    assert IntEggrollConfig(lr=0.5).lr_at(step) == 0.5 * factor


def test_linear_decay_runs_from_step_200_to_the_last_and_stops_at_zero():
    cfg = EsRunConfig(lr=0.5, lr_decay="linear", steps=600)
    assert [cfg.lr_at(s) for s in (150, 200, 300, 500, 600, 700)] == [1.0, 0.5, 0.375, 0.125, 0.0, 0.0]
    assert EsRunConfig(lr=0.5, lr_decay="linear", steps=200).lr_at(300) == 0.5  # no longer than the warm-up
    assert EsRunConfig(lr=0.5, steps=600).lr_at(300) == 0.5  # no decay unless asked


def test_the_z_test_level_is_constant_below_one_and_decays_from_one_up():
    assert IntEggrollConfig(alpha=0.3).alpha_at(10_000) == 0.3
    cfg = IntEggrollConfig(alpha=1.0, alpha_decay_timestep=100)
    assert [cfg.alpha_at(s) for s in (0, 100, 300)] == [1.0, 0.5, 0.25]
    cfg = IntEggrollConfig(alpha=3.0, alpha_decay_timestep=10)
    assert [cfg.alpha_at(s) for s in (0, 5, 20)] == [1.0, 1 / 4.5, 1 / 15]


def test_the_gate_threshold_is_sixteen_times_the_two_sided_normal_quantile():
    cfg = IntEggrollConfig(alpha=4.0, alpha_decay_timestep=10)
    quantile = NormalDist().inv_cdf(1 - (1 / 16) / 2)  # level at step 10: 1 / (15 + 1)
    assert cfg.threshold_at(10) == int(quantile * 16) == 29
    assert cfg.threshold_at(0) == 0  # level 1: every vote passes
    assert IntEggrollConfig(alpha=0.2).threshold_at(3) == int(NormalDist().inv_cdf(0.9) * 16) == 20
    z_scored = IntEggrollConfig(alpha=0.2, fast_fitness=False)
    assert z_scored.threshold_at(3) == 20 * 16  # z-scored fitness: 16 per standard deviation


def test_noise_reuse_shares_one_epoch_between_steps():
    assert [IntEggrollConfig(noise_reuse=3).noise_epoch(s) for s in (0, 2, 3, 7)] == [0, 0, 1, 2]
    assert IntEggrollConfig(noise_reuse=0).noise_epoch(50) == 0


def strategy(step=0, noise_reuse=1, adaptive_noise=False):
    model = EggModel(EggConfig(1, 8))
    cfg = IntEggrollConfig(population=16, sigma_shift=4, alpha=0.2, noise_reuse=noise_reuse,
                           adaptive_noise=adaptive_noise)
    return IntEggroll(model, cfg, CPU, model.init_params(1), 3, step)


FITNESS = np.array([1, -1, 1, 1, -1, 0, 1, -1], np.int8)


@pytest.mark.parametrize("adaptive_noise", [False, True])
def test_update_returns_the_fraction_of_parameters_moved_and_advances_the_step(adaptive_noise):
    s = strategy(adaptive_noise=adaptive_noise)
    before = s.host_params()
    moved = s.update(FITNESS)
    after = s.host_params()
    assert s.step == 1 and 0 < moved < 1
    assert moved == np.count_nonzero(after != before) / s.model.n_params
    assert s.update(np.zeros(8, np.int8)) == 0.0 and s.step == 2 and np.array_equal(s.host_params(), after)
    with pytest.raises(BadInput, match=r"update takes one shaped fitness per pair \(8\), got 7"):
        s.update(FITNESS[:7])


def test_update_moves_by_the_noise_of_its_steps_epoch():
    def delta(step, reuse):
        s = strategy(step, reuse)
        before = s.host_params().astype(np.int16)
        s.update(FITNESS)
        return s.host_params().astype(np.int16) - before

    assert np.array_equal(delta(0, 2), delta(1, 2))  # steps 0 and 1 share epoch 0
    assert not np.array_equal(delta(0, 1), delta(1, 1))
    reversed_delta = strategy().host_params().astype(np.int16)
    s = strategy()
    s.update(-FITNESS)
    assert np.array_equal(s.host_params() - reversed_delta, -delta(0, 1))  # the update's sign is the fitness's
