"""CD-RGE and FDRAS on a tiny multi-head LSTM: the estimate lines up with the BPTT gradient more as
the probe count grows (about sqrt(n / (n + d)), as theory says for random directions), the master
parameters come back bit for bit, the fused SGD step is theta - lr g, seeds and reduce modes agree,
a non-finite loss stops before the update, and bad settings are refused."""

import math

import numpy as np
import pytest

from eggnog.kernels.core.backend import Backend
from eggnog.models.lstm import LstmConfig, LstmModel
from eggnog.runtime.errors import BadInput
from eggnog.runtime.world import init_world
from eggnog.zorn.rge.trainer import NonFiniteLoss, RgeConfig, RgeTrainer
from eggnog.zorn.tasks import VOCAB, make_task

CPU = Backend("cpu")
MODEL = LstmModel(LstmConfig(VOCAB, 4, 8, 2))
BATCH = make_task("copy", 2, 4, seed=1).batch(0, 8)


class NotANumber:
    def loss(self, backend_name, params, batch):
        return float("nan")


def trainer(params=None, model=MODEL, step=0, **overrides):
    cfg = RgeConfig(**{"probes": 8, "lr": 0.05, "sigma": 1e-3, **overrides})
    return RgeTrainer(model, cfg, CPU, MODEL.init_params(2) if params is None else params, 9, step, init_world())


def cosine(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_estimate_aligns_with_bptt_more_as_probes_grow():
    params = MODEL.init_params(2)
    _, true = MODEL.loss_and_grad("numpy", params.astype(np.float64), BATCH)
    d = MODEL.n_params
    for solver in ("cdrge", "fdras"):
        seen = []
        for n in (16, 128, 1024):
            similarity = cosine(trainer(params.copy(), probes=n, solver=solver).estimate(BATCH), true)
            theory = math.sqrt(n / (n + d - 1))
            assert 0.5 * theory < similarity < min(1.0, 1.6 * theory), (solver, n, similarity, theory)
            seen.append(similarity)
        assert seen[0] < seen[1] < seen[2]


def test_master_parameters_come_back_bit_for_bit():
    t = trainer(distribution="normal", step=3)
    before = t.host_params()
    t.evaluate(BATCH)
    assert np.array_equal(t.host_params(), before)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_seeds_and_reduce_take_the_same_step(optimizer):
    seeds, reduce = trainer(optimizer=optimizer), trainer(optimizer=optimizer, dist_mode="reduce")
    g = trainer().estimate(BATCH)
    loss = seeds.train_step(BATCH)
    assert reduce.train_step(BATCH) == loss and seeds.step == reduce.step == 1
    assert np.allclose(seeds.host_params(), reduce.host_params(), rtol=0, atol=1e-6)
    if optimizer == "sgd":
        assert np.allclose(seeds.host_params(), MODEL.init_params(2) - 0.05 * g, rtol=0, atol=1e-6)


def test_antithetic_pairs_share_a_direction_with_opposite_signs():
    t = trainer(probes=4, antithetic=True, solver="fdras")
    keys, signs = t._signed_keys(5)
    assert np.array_equal(keys[0], keys[1]) and np.array_equal(keys[2], keys[3]) and list(signs) == [1, -1, 1, -1]


def test_a_non_finite_loss_stops_before_the_update():
    t = trainer(model=NotANumber())
    before = t.host_params()
    with pytest.raises(NonFiniteLoss):
        t.train_step(BATCH)
    assert np.array_equal(t.host_params(), before)


@pytest.mark.parametrize("overrides", [{}, {"solver": "fdras"}, {"antithetic": True, "distribution": "normal"}])
def test_probes_batched_in_passes_take_the_step_of_probes_one_at_a_time(overrides):
    """Passes of 3 evaluations (the last one short) as extra heads of one LSTM: the same losses, so
    the same step; the model's batched losses are checked against single ones in tests/test_lstm.py."""
    one = trainer(probes=5 if not overrides.get("antithetic") else 4, step=4, **overrides)
    batched = trainer(probes=one.cfg.probes, probe_batch=3, step=4, **overrides)
    assert one.train_step(BATCH) == batched.train_step(BATCH)
    assert np.array_equal(one.host_params(), batched.host_params())


@pytest.mark.parametrize("overrides,ranks,message", [
    ({"probe_batch": -1}, 1, "--probe-batch must be 0"),
    ({"sigma": 0.0}, 1, "--sigma must be a positive"),
    ({"lr": -1.0}, 1, "--lr must be a positive"),
    ({"probes": 6}, 4, "cannot be split evenly over 4 ranks"),
    ({"probes": 4, "antithetic": True}, 4, "antithetic probes come in pairs"),
    ({"distribution": "cauchy"}, 1, "unknown --distribution"),
    ({"dist_mode": "ring"}, 1, "unknown --dist-mode"),
    ({"optimizer": "lion"}, 1, "unknown --optimizer"),
])
def test_bad_settings(overrides, ranks, message):
    with pytest.raises(BadInput, match=message):
        RgeConfig(**overrides).check(ranks)
