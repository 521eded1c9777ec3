"""Float EGGROLL's ask/tell on a fitness of one's own (evolution/float_eggroll_search.py, the strategy's
ask / shape / update in evolution/float_eggroll.py): it optimises, its members are keyed by the seed
alone, tell refuses what it cannot use, and a member from `ask` is what the model's low-rank forward
evaluates for that member."""

import numpy as np
import pytest

from eggnog.evolution.float_eggroll import FloatEggroll, FloatEggrollConfig, zscore_fitness
from eggnog.evolution.float_eggroll_search import FloatEggrollSearch
from eggnog.kernels.core.placement import kernels_for
from eggnog.models.mingru import MinGruConfig, MinGruModel
from eggnog.runtime.errors import BadInput
from eggnog.training.optimizers import make_optimizer

OPS = kernels_for("cpu")
TARGET = np.linspace(-1.0, 1.0, 8)


def quadratic(x):
    return float(((np.asarray(x, np.float64) - TARGET) ** 2).sum())


def search(steps, maximize=True, **options):
    es = FloatEggrollSearch(np.zeros(8, np.float32), population=32, seed=0, sigma=0.1, lr=0.05, **options)
    for _ in range(steps):
        losses = [quadratic(m) for m in es.ask()]
        es.tell(losses if not maximize else [-v for v in losses], maximize=maximize)
    return es


@pytest.mark.parametrize("shaping", ["zscore", "group_zscore"])
def test_a_float_vector_descends_a_quadratic(shaping):
    es = search(60, shaping=shaping)
    assert es.step == 60
    assert quadratic(es.host_params()) < quadratic(np.zeros(8)) / 4, quadratic(es.host_params())


def test_losses_told_with_maximize_false_move_as_their_negated_fitness():
    np.testing.assert_array_equal(search(5, maximize=False).host_params(), search(5).host_params())


def test_adamw_descends_the_quadratic_too():
    assert quadratic(search(60, optimizer="adamw").host_params()) < quadratic(np.zeros(8)) / 4


def test_a_matrix_and_a_vector_move_toward_theirs():
    rng = np.random.default_rng(2)
    goal = {"w": rng.normal(size=(3, 5)), "b": rng.normal(size=4)}

    def far(views):
        return sum(float(((views[k] - goal[k]) ** 2).sum()) for k in goal)

    es = FloatEggrollSearch({"w": np.zeros((3, 5), np.float32), "b": np.zeros(4, np.float32)}, population=32,
                            seed=1, sigma=0.1, lr=0.05, rank=2)
    start = far(es.views(es.host_params()))
    for _ in range(60):
        es.tell([far(es.views(m)) for m in es.ask()], maximize=False)
    assert far(es.views(es.host_params())) < start / 4


def test_members_are_keyed_by_the_seed_and_the_step():
    one, same, other = (FloatEggrollSearch(np.zeros(6, np.float32), population=8, seed=s) for s in (5, 5, 6))
    first = one.ask()
    assert first.shape == (8, 6) and first.dtype == np.float32
    np.testing.assert_array_equal(first, same.ask())
    np.testing.assert_array_equal(first, one.ask())
    assert not np.array_equal(first, other.ask())
    np.testing.assert_array_equal(first[0::2], -first[1::2])  # antithetic around zero parameters
    one.tell(np.arange(8.0))
    assert one.step == 1 and not np.array_equal(one.ask() - one.host_params(), first)


def test_tell_refuses_a_wrong_count_and_a_value_that_is_not_finite():
    es = FloatEggrollSearch(np.zeros(4, np.float32), population=8, seed=0)
    with pytest.raises(BadInput, match=r"one fitness per member asked \(8\)"):
        es.tell(np.zeros(9))
    with pytest.raises(BadInput, match="not finite"):
        es.tell([0, 1, 2, 3, np.inf, 5, 6, 7])
    with pytest.raises(BadInput, match=r"one shaped fitness per member \(8\)"):
        es.update(np.zeros(4))
    assert es.step == 0


@pytest.mark.parametrize("params, options, message", [
    (np.zeros(4, np.int8), {}, "float32"), (np.array([1.0, np.nan], np.float32), {}, "not finite"),
    (np.zeros(4, np.float32), {"shaping": "ranks"}, "unknown shaping"),
    (np.zeros(4, np.float32), {"population": 5}, "population 5"), (np.zeros(4, np.float32), {"sigma": 0}, "sigma")])
def test_a_search_refuses_what_it_cannot_use(params, options, message):
    with pytest.raises(BadInput, match=message):
        FloatEggrollSearch(params, **options)


def test_tell_is_update_of_the_zscored_fitness():
    fitness = np.random.default_rng(0).normal(size=8)
    es, ref = (FloatEggrollSearch(np.zeros(5, np.float32), population=8, seed=1) for _ in range(2))
    np.testing.assert_array_equal(es.shape(fitness), zscore_fitness(-fitness, 2, "global"))
    es.tell(fitness)
    ref.update(zscore_fitness(-fitness, 2, "global"))
    np.testing.assert_array_equal(es.host_params(), ref.host_params())


def test_a_member_from_ask_is_what_the_low_rank_forward_evaluates():
    model = MinGruModel(MinGruConfig(4, 1, 1.5, 2.0))
    flat = model.init_params(1)
    cfg = FloatEggrollConfig(population=4, group_size=2, sigma=0.2, perturbation_rank=2)
    es = FloatEggroll(model, cfg, OPS, make_optimizer("sgd", flat.copy(), 1.0, momentum=0.0), 5, step=1)
    tokens = np.random.default_rng(4).integers(0, 256, (4, 6)).astype(np.uint8)
    together, _, _ = model.forward(OPS, model.views(flat), tokens, perturbation=es.perturbation())
    together = np.asarray(together).reshape(4, 6, -1)
    plain, _, _ = model.forward(OPS, model.views(flat), tokens)
    assert np.abs(np.asarray(plain).reshape(4, 6, -1) - together).max() > 1e-2  # the noise matters
    for m, member in enumerate(es.ask()):
        alone, _, _ = model.forward(OPS, model.views(member), tokens[m:m + 1])
        np.testing.assert_allclose(np.asarray(alone).reshape(6, -1), together[m], rtol=1e-4, atol=1e-4)
