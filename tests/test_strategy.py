"""The three strategies (integer EGGROLL, float EGGROLL, CD-RGE) conform to one protocol
(training/strategy.py): the same constructor arguments in the same order, and one driver that knows
nothing of which it holds trains each of them: evaluate, gather, tell, with the step advancing, the
parameters moving, and a strategy rebuilt from (host parameters, optimiser state, step) giving what
the continued one gives."""

import inspect

import numpy as np
import pytest

from eggnog.evolution.eggroll import IntEggroll, IntEggrollConfig
from eggnog.evolution.float_eggroll import FloatEggroll, FloatEggrollConfig
from eggnog.kernels.core.backend import Backend
from eggnog.models.egg import EggConfig, EggModel
from eggnog.models.lstm import LstmConfig, LstmModel
from eggnog.models.mingru import MinGruConfig, MinGruModel
from eggnog.runtime.world import world_without_mpi
from eggnog.training.optimizers import make_optimizer
from eggnog.training.strategy import STRATEGY_ARGUMENTS, Strategy
from eggnog.zorn.rge.trainer import RgeConfig, RgeTrainer
from eggnog.zorn.tasks import VOCAB, make_task

CPU = Backend("cpu")
RNG = np.random.default_rng(0)


def int_eggroll(params=None, step=0, state=None):
    model = EggModel(EggConfig(1, 8))
    cfg = IntEggrollConfig(population=8, sigma_shift=4, optimizer="adamw", lr=0.5)
    params = model.init_params(1) if params is None else params
    return IntEggroll(model, cfg, CPU, params, 3, step, optimizer_state=state)


def int_batch(strategy, step):
    windows = np.random.default_rng(step).integers(1, 256, (8, 5)).astype(np.uint8)
    return windows, CPU.zeros((1, 8, 8), np.int8)


def float_eggroll(params=None, step=0, state=None):
    model = MinGruModel(MinGruConfig(4, 1, 1.5, 2.0))
    params = model.init_params(1) if params is None else params
    optimizer = make_optimizer("sgd", params.copy(), 1.0, momentum=0.0)
    return FloatEggroll(model, FloatEggrollConfig(population=4, group_size=2, sigma=0.01), CPU, optimizer, 5, step)


def float_batch(strategy, step):
    return (np.random.default_rng(step).integers(0, 256, (4, 6)).astype(np.uint8),)


LSTM = LstmModel(LstmConfig(VOCAB, 4, 8, 2))


def rge(params=None, step=0, state=None):
    params = LSTM.init_params(2) if params is None else params
    trainer = RgeTrainer(LSTM, RgeConfig(probes=4, lr=0.05, sigma=1e-3, optimizer="adam"), CPU, params, 9, step,
                         world_without_mpi())
    if state:
        trainer.optimizer.load_state(state, {"k": step})  # Adam's step count: every step told
    return trainer


def rge_batch(strategy, step):
    return (make_task("copy", 2, 4, seed=1).batch(step, 4),)


# (make, batch of a step, how the caller tells the gathered results: EGGROLL's scores are fitness, its
# float losses are told with maximize=False)
STRATEGIES = {"int_eggroll": (int_eggroll, int_batch, lambda strategy, scores: strategy.tell(scores)),
              "float_eggroll": (float_eggroll, float_batch,
                                lambda strategy, losses: strategy.tell(losses, maximize=False)),
              "rge": (rge, rge_batch, lambda strategy, rows: strategy.tell(rows))}


@pytest.mark.parametrize("cls", [IntEggroll, FloatEggroll, RgeTrainer], ids=lambda c: c.__name__)
def test_the_constructors_take_the_same_arguments(cls):
    names = list(inspect.signature(cls).parameters)
    assert tuple(names[:len(STRATEGY_ARGUMENTS)]) == STRATEGY_ARGUMENTS, names


def train(strategy, batch, tell, steps):
    """The one driver: nothing in it knows which strategy it holds (one rank: gathering is the identity)."""
    for _ in range(steps):
        results = strategy.evaluate(*batch(strategy, strategy.step))
        tell(strategy, results)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_one_driver_trains_every_strategy(name):
    make, batch, tell = STRATEGIES[name]
    strategy = make()
    assert isinstance(strategy, Strategy)
    start = strategy.host_params()
    train(strategy, batch, tell, 2)
    assert strategy.step == 2 and not np.array_equal(strategy.host_params(), start)
    state = strategy.host_optimizer_state()
    assert all(isinstance(a, np.ndarray) and a.size for a in state.values()), state
    again = make(strategy.host_params(), strategy.step, state)
    train(strategy, batch, tell, 1)
    train(again, batch, tell, 1)
    assert again.step == strategy.step == 3
    assert np.allclose(again.host_params(), strategy.host_params(), rtol=0, atol=1e-6)


@pytest.mark.parametrize("config", [IntEggrollConfig, FloatEggrollConfig, RgeConfig], ids=lambda c: c.__name__)
def test_algorithm_configs_are_free_of_command_line_concerns(config):
    """Plain dataclasses: the flags' help, aliases and resume rules live in the run configs that extend
    them (training/run/config.py:described), and the algorithm's module imports nothing of the CLI."""
    import dataclasses
    import sys

    assert all(not f.metadata for f in dataclasses.fields(config)), config
    source = inspect.getsource(sys.modules[config.__module__])
    assert "training.run.config" not in source and "typer" not in source
