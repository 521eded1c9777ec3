"""Float EGGROLL: fitness shaping, the update against its formula written out with full matrices,
the estimate pointing along the true gradient (more so with a larger population), the noise
being independent of the rank slice, and bad configurations."""

import math

import numpy as np
import pytest

from eggnog.evolution.float_eggroll import FloatEggroll, FloatEggrollConfig, zscore_fitness
from eggnog.kernels.core.registry import ops_for
from eggnog.models.mingru import MinGruConfig, MinGruModel
from eggnog.runtime.errors import BadInput
from eggnog.training.optimizers import make_optimizer

RNG = np.random.default_rng(3)
MODEL = MinGruModel(MinGruConfig(4, 1, 1.5, 2.0))


def strategy(population, flat=None, backend="cpu", **overrides):
    cfg = FloatEggrollConfig(**{"population": population, "group_size": 2, "sigma": 0.01, **overrides})
    flat = MODEL.init_params(1) + RNG.normal(0, 0.1, MODEL.n_params).astype(np.float32) if flat is None else flat
    ops = ops_for(backend)
    return FloatEggroll(MODEL, cfg, ops, make_optimizer("sgd", ops.to_device(flat), 1.0, momentum=0.0), 5)


def test_zscore_fitness_global_and_group():
    losses = np.array([1.0, 2.0, 3.0, 6.0])
    f = zscore_fitness(losses, 2, "global")
    assert np.allclose(f, -(losses - 3.0) / np.std(losses))
    g = zscore_fitness(losses, 2, "group")
    centred = np.array([0.5, -0.5, 1.5, -1.5])
    assert np.allclose(g, centred / np.std(centred))
    assert not zscore_fitness(np.full(4, 2.5), 2, "global").any()


def test_update_equals_the_formula_with_full_matrices():
    es = strategy(6, perturbation_rank=2, fitness="group", group_size=2)
    losses = RNG.normal(size=6)
    got = es.gradient(losses)
    f = zscore_fitness(losses, 2, "group")
    expected = {}
    for name, (shape, kind) in es.kinds.items():
        total = np.zeros(shape)
        for member in range(6):
            sign, pair = (1.0, -1.0)[member % 2], np.array([member // 2])
            if kind == "matrix":
                a, b = es.pair_noise(name, pair)
                noise = a[0].astype(np.float64) @ b[0].T / math.sqrt(2)
            else:
                noise = es.pair_noise(name, pair)[0]
            total += f[member] * sign * noise
        expected[name] = -total / (6 * 0.01)
    want = MODEL.flatten(expected, ops_for("numpy"))
    # float32 sums of terms as large as the result: the error scales with the largest component
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6 * np.abs(want).max())


def cosine(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_estimate_points_along_the_true_gradient_more_so_with_more_members():
    rng = np.random.default_rng(8)
    flat = (MODEL.init_params(1) + rng.normal(0, 0.3, MODEL.n_params)).astype(np.float32)
    window = np.repeat(rng.integers(0, 256, (1, 9)).astype(np.uint8), 4096, axis=0)
    ops = ops_for("cpu")
    _, grads, _ = MODEL.loss_and_grad(ops, MODEL.views(flat), window[:1, :-1], window[:1, 1:])
    true = MODEL.flatten(grads, ops)
    similarity = {}
    for population in (64, 4096):
        es = strategy(population, flat.copy(), sigma=1e-3, freeze_vectors=False, group_size=population)
        similarity[population] = cosine(es.gradient(es.evaluate(window[:population])), true)
    # 2,208 parameters: about sqrt(N / (N + d)) for full-rank ES; seeds 3-5 gave 0.09-0.17 and 0.66-0.68
    assert similarity[64] > 0.02 and similarity[4096] > 0.55 and similarity[4096] > similarity[64] + 0.3


def test_a_slice_of_the_population_sees_the_same_noise():
    whole = strategy(8)
    part = FloatEggroll(MODEL, whole.cfg, ops_for("cpu"), whole.optimizer, 5, first_member=4, members=4)
    full, mine = whole.perturbation(), part.perturbation()
    for name in ("blocks.0.gru_hidden", "head"):
        for a, b in zip(full.matrix(name)[:2], mine.matrix(name)[:2]):
            assert np.array_equal(a[4:], b)
    assert np.array_equal(full.vector("norm")[4:], mine.vector("norm"))


def test_the_noise_changes_with_the_epoch_unless_reused():
    es = strategy(4, noise_reuse=2)
    first = es.pair_noise("head", np.array([0]))[0]
    es.step = 1
    assert np.array_equal(es.pair_noise("head", np.array([0]))[0], first)
    es.step = 2
    assert not np.array_equal(es.pair_noise("head", np.array([0]))[0], first)


@pytest.mark.parametrize("overrides,ranks,message", [
    ({"perturbation_rank": 0}, 1, "--perturbation-rank must be positive"),
    ({"sigma": 0.0}, 1, "sigma must be a positive"),
    ({"sigma": float("nan")}, 1, "sigma must be a positive"),
    ({"group_size": 3}, 1, "group size must be even"),
    ({"population": 10, "group_size": 4}, 1, "multiple of the group size"),
    ({"population": 12, "group_size": 2}, 4, "equal slices of whole antithetic pairs"),
    ({"forward_precision": "fp16"}, 1, "unknown --forward-precision"),
    ({"fitness": "rank"}, 1, "unknown fitness"),
    ({"tokens_per_update": 0}, 1, "tokens per update"),
])
def test_bad_configurations(overrides, ranks, message):
    with pytest.raises(BadInput, match=message):
        FloatEggrollConfig(**{"population": 8, "group_size": 2, **overrides}).check(ranks)


def test_noise_perturbation_and_update_on_the_device_match_the_cpu():
    """The device path (simulated here) draws, perturbs and sums on the backend: only the per-pair
    weights go up and nothing but the losses comes down."""
    flat = MODEL.init_params(2) + RNG.normal(0, 0.1, MODEL.n_params).astype(np.float32)
    host, device = (strategy(4, flat.copy(), backend, perturbation_rank=2) for backend in ("cpu", "cuda"))
    mine, theirs = device.perturbation(), host.perturbation()
    for name in ("blocks.0.gru_hidden", "head"):
        for a, b in zip(mine.matrix(name), theirs.matrix(name)):
            assert hasattr(a, "copy_to_host")
            np.testing.assert_allclose(a.copy_to_host(), b, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(mine.vector("norm").copy_to_host(), theirs.vector("norm"), rtol=1e-6, atol=1e-6)
    losses = RNG.normal(size=4)
    for es in (host, device):
        es.tell(losses, maximize=False)
    assert hasattr(device.params, "copy_to_host")
    np.testing.assert_allclose(device.params.copy_to_host(), host.params, rtol=1e-5, atol=1e-5)
    assert not np.allclose(host.params, flat)


@pytest.mark.parametrize("precision, backend, tf32", [("auto", "cpu", False), ("auto", "cuda", True),
                                                      ("tf32", "cpu", True), ("fp32", "cuda", False)])
def test_forward_precision_chooses_the_population_products(precision, backend, tf32):
    assert FloatEggrollConfig(forward_precision=precision).uses_tf32(backend) is tf32


def test_tf32_moves_member_losses_by_tf32_rounding_only():
    flat = MODEL.init_params(3) + RNG.normal(0, 0.1, MODEL.n_params).astype(np.float32)
    window = np.repeat(RNG.integers(0, 256, (1, 17)).astype(np.uint8), 8, axis=0)
    fp32, tf32 = (strategy(8, flat.copy(), forward_precision=p).evaluate(window) for p in ("fp32", "tf32"))
    moved = np.abs(tf32 - fp32)
    assert moved.max() > 0 and moved.max() < 1e-3 * fp32.mean()
