"""Integer EGGROLL's ask/tell on a fitness of one's own (evolution/int_eggroll_search.py, the strategy's
ask / shape / update in evolution/eggroll.py): it optimises, its members are keyed by the seed alone,
tell refuses what it cannot use, and a member from `ask` carries the noise the EGG's kernels use."""

import numpy as np
import pytest

from eggnog.evolution.eggroll import IntEggroll, IntEggrollConfig
from eggnog.evolution.fitness import pair_signs, pair_zscores
from eggnog.evolution.int_eggroll_search import IntEggrollSearch
from eggnog.evolution.int_members import member_signs, noise_rows
from eggnog.kernels.core.backend import Backend
from eggnog.kernels.core.placement import kernels_for
from eggnog.kernels.egg.int_math import FIXED_POINT, matmul_divisor
from eggnog.kernels.egg.int_matmul import int_matmul
from eggnog.kernels.egg.member_ops import egg_embedding, egg_vector
from eggnog.models.egg import EggConfig, EggModel
from eggnog.runtime.errors import BadInput

OPS = kernels_for("cpu")
TARGET = np.random.default_rng(1).integers(-20, 21, 16)


def distance(params):
    return int(np.abs(np.asarray(params, np.int64) - TARGET).sum())


def search_toward_target(steps, maximize=True, **options):
    es = IntEggrollSearch(np.zeros(16, np.int8), population=32, seed=0, **options)
    for _ in range(steps):
        members = es.ask()
        scores = [-distance(m) for m in members]
        es.tell(scores if maximize else [-s for s in scores], maximize=maximize)
    return es


@pytest.mark.parametrize("shaping", ["pair_signs", "pair_zscores"])
def test_an_int8_vector_moves_toward_a_target_vector(shaping):
    start = distance(np.zeros(16))
    es = search_toward_target(40, shaping=shaping)
    assert es.step == 40
    assert distance(es.params) < start / 4, (start, distance(es.params))


def test_the_fitness_of_losses_is_told_with_maximize_false():
    assert np.array_equal(search_toward_target(10, maximize=False).params, search_toward_target(10).params)


def test_adamw_moves_toward_the_target_too():
    start = distance(np.zeros(16))
    assert distance(search_toward_target(40, optimizer="adamw", lr=0.5).params) < start / 2


def test_named_tensors_a_matrix_and_a_vector_move_toward_theirs():
    rng = np.random.default_rng(2)
    goal = {"w": rng.integers(-15, 16, (3, 5)), "b": rng.integers(-15, 16, 4)}

    def far(views):
        return sum(int(np.abs(views[k].astype(np.int64) - goal[k]).sum()) for k in goal)

    es = IntEggrollSearch({"w": np.zeros((3, 5), np.int8), "b": np.zeros(4, np.int8)}, population=32, seed=4)
    start = far(es.views(es.host_params()))
    for _ in range(40):
        es.tell([-far(es.views(m)) for m in es.ask()])
    assert set(es.views(es.host_params())) == {"w", "b"}
    assert far(es.views(es.host_params())) < start / 2


def test_members_are_keyed_by_the_seed_and_the_step():
    one, same, other = (IntEggrollSearch(np.zeros(16, np.int8), population=8, seed=s) for s in (5, 5, 6))
    first = one.ask()
    assert first.shape == (8, 16) and first.dtype == np.int8
    assert np.array_equal(first, same.ask()) and np.array_equal(first, one.ask())
    assert not np.array_equal(first, other.ask())
    one.tell(np.arange(8.0))
    assert one.step == 1 and not np.array_equal(one.ask(), first)


def test_members_come_in_antithetic_pairs():
    es = IntEggrollSearch(np.zeros(64, np.int8), population=8, seed=3, sigma_shift=0)
    members = es.ask().astype(np.int64)
    assert (np.abs(members[0::2] + members[1::2]) <= 1).all()  # -x >> k and x >> k differ by the floor only
    assert np.abs(members).max() > 1


def test_tell_refuses_a_wrong_count_and_a_value_that_is_not_finite():
    es = IntEggrollSearch(np.zeros(4, np.int8), population=8, seed=0)
    with pytest.raises(BadInput, match=r"one fitness per member asked \(8\)"):
        es.tell(np.zeros(7))
    with pytest.raises(BadInput, match="not finite"):
        es.tell([0, 1, 2, np.nan, 4, 5, 6, 7])
    with pytest.raises(BadInput, match="one shaped fitness per pair"):
        es.update(np.zeros(3, np.int8))
    assert es.step == 0


@pytest.mark.parametrize("params, options, message", [
    (np.zeros(4, np.float32), {}, "int8"), ({}, {}, "no tensors"), (np.zeros(4, np.int8), {"shaping": "ranks"},
                                                                     "unknown shaping"),
    (np.zeros(4, np.int8), {"population": 7}, "population 7"), (np.zeros(4, np.int8), {"sigmaa": 1}, "option")])
def test_a_search_refuses_what_it_cannot_use(params, options, message):
    with pytest.raises(BadInput, match=message):
        IntEggrollSearch(params, **options)


def test_tell_is_update_of_shape():
    fitness = np.random.default_rng(0).normal(size=8)
    es, ref = (IntEggrollSearch(np.zeros(12, np.int8), population=8, seed=1) for _ in range(2))
    assert np.array_equal(es.shape(fitness), pair_signs(fitness))
    es.tell(fitness)
    ref.update(pair_signs(fitness))
    assert np.array_equal(es.params, ref.params)
    zs = IntEggrollSearch(np.zeros(12, np.int8), population=8, seed=1, shaping="pair_zscores")
    assert np.array_equal(zs.shape(-fitness, maximize=False), pair_zscores(fitness))


def test_a_vectors_member_is_the_kernels_perturbed_vector():
    theta = np.random.default_rng(5).integers(-100, 101, 37).astype(np.int8)
    es = IntEggrollSearch(theta, population=10, seed=9, sigma_shift=1)
    es.step = 3
    prefix = es.model.prefixes(9, 3)["params"]
    assert np.array_equal(es.ask(), egg_vector(OPS, theta, prefix, 0, 10, 1))


def egg_strategy(**options):
    model = EggModel(EggConfig(1, 8))
    cfg = IntEggrollConfig(population=6, sigma_shift=0, **options)
    return IntEggroll(model, cfg, Backend("cpu"), model.init_params(2), 11, step=2)


def test_an_eggs_members_are_the_kernels_members():
    """Vectors and embedding rows bit for bit; a matrix's noise rows make the fused matmul's output."""
    es = egg_strategy()
    model, params = es.model, es.host_params()
    prefixes = model.prefixes(11, 2)
    members = es.ask()
    member_views = [model.views(m) for m in members]
    for name, values in model.member_vectors(OPS, model.views(params), prefixes, 0, 6, 0, True).items():
        assert np.array_equal(np.stack([v[name] for v in member_views]), values), name
    tokens = np.array([0, 255, 7, 7, 100, 3], np.uint8)  # one token per member
    rows = egg_embedding(OPS, tokens, model.views(params)["embedding"], prefixes["embedding"], 0, 0)
    assert np.array_equal(np.stack([v["embedding"][t] for v, t in zip(member_views, tokens)]), rows)
    t = next(t for t in model.tensors if t.kind == "matrix")
    w = model.views(params)[t.name].astype(np.int64)
    x = np.random.default_rng(0).integers(-60, 61, (6, w.shape[1])).astype(np.int8)
    a, b = noise_rows(model, t, prefixes[t.name], member_signs(0, 6)[0])
    signs = member_signs(0, 6)[1]
    acc = x @ w.T + (((x.astype(np.int64) * b).sum(1)[:, None] * signs[:, None] * a) >> FIXED_POINT)
    expected = np.clip(acc // matmul_divisor(w.shape[1]), -127, 127)
    assert np.array_equal(int_matmul(OPS, x, model.views(params)[t.name], prefixes[t.name], 0, 0), expected)
    dense = np.stack([v[t.name] for v in member_views]).astype(np.int64)
    assert np.array_equal(dense, np.clip(w + ((signs[:, None, None] * a[:, :, None] * b[:, None, :]) >> FIXED_POINT),
                                         -127, 127))


def test_an_eggs_members_with_adaptive_noise_carry_the_gains():
    es = egg_strategy(adaptive_noise=True)
    overlay = np.random.default_rng(1).integers(-10, 80, es.overlay.size).astype(np.int8)
    es.set_overlay(overlay)
    model, params, prefixes = es.model, es.host_params(), es.model.prefixes(11, 2)
    members = es.ask()
    gains = np.clip(overlay, 0, 64).astype(np.uint8)
    at = 0
    for t in model.tensors:
        width = t.shape[0] if t.kind == "vector" else t.shape[0] + t.shape[-1]
        if t.kind == "vector":
            want = egg_vector(OPS, model.views(params)[t.name], prefixes[t.name], 0, 6, 0, True, gains[at:at + width])
            assert np.array_equal(members[:, t.offset:t.offset + t.size], want), t.name
        at += width
    assert not np.array_equal(members, egg_strategy().ask())
