"""Ask/tell CD-RGE and FDRAS (zorn/rge/search.py) on a user's loss: both minimise a quadratic, the members
follow the documented order and the seed, the update is the trainer's own (equal arrays, bit for bit,
since it is the same code), and tell refuses a wrong count or a non-finite fitness."""

import numpy as np
import pytest

from eggnog.kernels.core.backend import Backend
from eggnog.kernels.core.placement import kernels_for
from eggnog.kernels.noise.perturb import noise
from eggnog.models.lstm import LstmConfig, LstmModel
from eggnog.runtime.errors import BadInput
from eggnog.zorn.rge.search import RgeSearch
from eggnog.zorn.rge.trainer import RgeConfig, RgeTrainer, probe_keys
from eggnog.zorn.tasks import VOCAB, make_task

CPU = Backend("cpu")
TARGET = np.linspace(-1, 1, 32, dtype=np.float32)
START = np.zeros(32, np.float32)


def quadratic(x):
    return float(((np.asarray(x, np.float64) - TARGET) ** 2).sum())


class Quadratic:
    """The same loss as a model the trainer evaluates itself (the batch is unused)."""

    def loss(self, backend_name, params, batch):
        return quadratic(params)


def search(solver="cdrge", params=START, **settings):
    return RgeSearch(params, solver=solver, **{"probes": 16, "lr": 0.05, "seed": 3, "backend": CPU, **settings})


def minimise(opt, steps):
    for _ in range(steps):
        opt.tell([quadratic(m) for m in opt.ask()], maximize=False)
    return quadratic(opt.params)


@pytest.mark.parametrize("solver, settings, margin", [("cdrge", {}, 1e-3), ("fdras", {"sigma": 1e-3}, 1e-3),
                                                      ("cdrge", {"optimizer": "adam"}, 1e-2)])
def test_each_solver_minimises_a_quadratic(solver, settings, margin):
    # from 11.35 at theta = 0, 60 steps bring the loss below `margin` of it (measured over seeds 0-5:
    # SGD 4e-5 to 4e-4, Adam, which hovers about lr from the optimum, 0.019 to 0.029)
    opt = search(solver, **settings)
    start = quadratic(opt.params)
    assert minimise(opt, 60) < margin * start and opt.step == 60


def test_maximize_climbs_the_negated_loss():
    opt = search()
    for _ in range(60):
        opt.tell([-quadratic(m) for m in opt.ask()])
    assert quadratic(opt.params) < 1e-3 * quadratic(START)


@pytest.mark.parametrize("solver, population", [("cdrge", 32), ("fdras", 17)])
def test_members_follow_the_documented_order(solver, population):
    params = np.random.default_rng(0).standard_normal(32).astype(np.float32)
    opt = search(solver, params=params, sigma=0.25, distribution="normal", step=4)
    members = opt.ask()
    assert members.shape == (population, 32) and members.dtype == np.float32 and opt.population == population
    z = [noise(kernels_for("cpu"), key, 32, "normal") for key in probe_keys(3, 4, range(16))]
    if solver == "cdrge":
        plus, minus = members[0::2], members[1::2]
        assert np.allclose(plus, params + 0.25 * np.array(z), rtol=0, atol=1e-6)
        assert np.allclose(minus, params - 0.25 * np.array(z), rtol=0, atol=1e-6)
    else:
        assert np.array_equal(members[0], params)
        assert np.allclose(members[1:], params + 0.25 * np.array(z), rtol=0, atol=1e-6)


def test_fdras_antithetic_members_pair_up():
    members = search("fdras", antithetic=True).ask()
    assert np.array_equal(members[1] + members[2], 2 * START) and np.array_equal(members[3] + members[4], 2 * START)
    assert not np.array_equal(members[1], members[3])


def test_the_same_seed_asks_the_same_members():
    a, b, other = search(), search(), search(seed=4)
    assert np.array_equal(a.ask(), b.ask()) and np.array_equal(a.ask(), a.ask())
    assert not np.array_equal(a.ask(), other.ask())
    for opt in (a, b):
        opt.tell([quadratic(m) for m in opt.ask()], maximize=False)
    assert a.step == b.step == 1 and np.array_equal(a.params, b.params) and np.array_equal(a.ask(), b.ask())


@pytest.mark.parametrize("settings", [
    {"solver": "cdrge"}, {"solver": "fdras"}, {"solver": "fdras", "antithetic": True},
    {"solver": "cdrge", "optimizer": "momentum", "distribution": "uniform"},
    {"solver": "fdras", "optimizer": "adam", "sigma": 0.01}])
def test_tell_is_the_trainers_update(settings):
    # the same code path, so the arrays are equal bit for bit (tolerance 0), over two steps so that the
    # optimiser's state carries
    params = np.random.default_rng(1).standard_normal(32).astype(np.float32)
    opt = search(params=params, **settings)
    cfg = RgeConfig(**{"probes": 16, "lr": 0.05, **settings})
    trainer = RgeTrainer(Quadratic(), cfg, CPU, params, 3)
    for _ in range(2):
        opt.tell([quadratic(m) for m in opt.ask()], maximize=False)
        trainer.train_step(None)
        assert np.array_equal(opt.params, trainer.host_params()) and opt.step == trainer.step
    assert opt.optimizer_state().keys() == trainer.host_optimizer_state().keys()
    for name, array in trainer.host_optimizer_state().items():
        assert np.array_equal(opt.optimizer_state()[name], array)


def test_tell_matches_the_trainer_on_a_model_scored_by_the_caller():
    model, batch = LstmModel(LstmConfig(VOCAB, 4, 8, 2)), make_task("copy", 2, 4, seed=1).batch(0, 8)
    params = model.init_params(2)
    opt = search(params=params, lr=0.05, sigma=1e-3)
    trainer = RgeTrainer(model, RgeConfig(probes=16, lr=0.05, sigma=1e-3), CPU, params, 3)
    losses = [model.loss("cpu", m, batch) for m in opt.ask()]
    assert np.array_equal(np.stack([np.arange(16), losses[0::2], losses[1::2]], axis=1), trainer.evaluate(batch))
    opt.tell(losses, maximize=False)
    trainer.train_step(batch)
    assert np.array_equal(opt.params, trainer.host_params())


@pytest.mark.parametrize("fitness, words", [
    ([1.0] * 31, r"one fitness per member asked \(32\)"), ([[1.0] * 32], r"one fitness per member asked \(32\)"),
    ([1.0] * 31 + [float("nan")], "not finite"), ([1.0] * 31 + [float("inf")], "not finite"),
    ("abc", "one number per member")])
def test_tell_refuses_a_wrong_count_or_a_non_finite_value(fitness, words):
    opt = search()
    before = opt.params
    with pytest.raises(BadInput, match=words) as refused:
        opt.tell(fitness)
    message = str(refused.value)
    assert message.count(". ") == 0 and "\n" not in message
    assert opt.step == 0 and np.array_equal(opt.params, before)


@pytest.mark.parametrize("params, settings, words", [
    (np.zeros((4, 8), np.float32), {}, "params must be a non-empty 1-D array"),
    (np.zeros(0, np.float32), {}, "params must be a non-empty 1-D array"),
    (np.array(["a"]), {}, "params must be a non-empty 1-D array"),
    (np.array([1.0, np.inf]), {}, "params must be finite"),
    (START, {"probes": 0}, "probes must be at least 1"),
    (START, {"probes": 2.5}, "probes must be a whole number"),
    (START, {"seed": -1}, "seed must be in"),
    (START, {"lr": "fast"}, "lr must be a number"),
    (START, {"solver": "sgd"}, "unknown --solver"),
    (START, {"solver": "fdras", "antithetic": True, "probes": 3}, "antithetic probes come in pairs"),
    (START, {"backend": "cpu"}, "backend must be an eggnog Backend")])
def test_bad_settings_are_refused(params, settings, words):
    with pytest.raises(BadInput, match=words):
        search(params=params, **settings)
