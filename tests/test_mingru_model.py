"""The MinGRU LM on its three backends (float64 NumPy reference, CPU twins, CUDA on the simulator):
forward and gradients agree (fp32 vs float64: 1e-5 relative to the largest entry, 1e-4 for
gradients, which pass through ~20 fp32 kernels), gradients equal finite differences, chunked
TBPTT forward equals one pass, step-by-step equals the parallel scan, the population forward with
low-rank perturbations equals each member's explicitly perturbed weights, and gruboros sizing."""

import math

import numpy as np
import pytest

from eggnog.evolution.float_eggroll import FloatEggroll, FloatEggrollConfig
from eggnog.kernels.core.placement import to_host
from eggnog.kernels.core.registry import ops_for
from eggnog.models.mingru import MinGruConfig, MinGruModel
from eggnog.models.mingru_sizing import parse_size, solve_dims
from eggnog.runtime.errors import BadInput
from eggnog.training.optimizers import make_optimizer

RNG = np.random.default_rng(11)


def tiny_model(dim=8, depth=2, expansion=1.5, ff=2.0):
    return MinGruModel(MinGruConfig(dim, depth, expansion, ff))


def noisy_params(model, scale=0.2):
    """Initial parameters plus noise, so the zero-initialised projections carry gradient too."""
    return (model.init_params(0) + RNG.normal(0, scale, model.n_params)).astype(np.float32)


def tokens(batch, steps):
    return RNG.integers(0, 256, (batch, steps + 1)).astype(np.uint8)


def loss_and_flat_grad(model, backend, flat, window, states=None):
    ops = ops_for(backend)
    p = model.views(ops.to_device(flat))
    loss, grads, new_states = model.loss_and_grad(ops, p, window[:, :-1], window[:, 1:], states)
    return loss, model.flatten(grads, ops), [ops.to_host(s) for s in new_states]


def relative(got, ref):
    return float(np.abs(np.asarray(got, np.float64) - ref).max() / np.abs(ref).max())


def test_forward_and_gradients_agree_on_all_backends():
    model = tiny_model(dim=4, depth=1)
    flat = noisy_params(model)
    window = tokens(1, 3)
    ref_loss, ref_grad, ref_states = loss_and_flat_grad(model, "numpy", flat.astype(np.float64), window)
    for backend in ("cpu", "cuda"):
        loss, grad, states = loss_and_flat_grad(model, backend, flat, window)
        assert loss == pytest.approx(ref_loss, rel=1e-5)
        assert relative(grad, ref_grad) <= 1e-4
        assert relative(states[0], ref_states[0]) <= 1e-5


def test_gradients_match_finite_differences_in_every_tensor():
    model = tiny_model()
    flat = noisy_params(model).astype(np.float64)
    window = tokens(2, 6)
    ops = ops_for("numpy")

    def loss_at(f):
        logits, _, _ = model.forward(ops, model.views(f), window[:, :-1])
        return float(np.mean(ops.cross_entropy(logits, window[:, 1:].reshape(-1))[0]))

    _, grad, _ = loss_and_flat_grad(model, "numpy", flat, window)
    for name, (start, shape) in model.offsets.items():
        for index in RNG.choice(math.prod(shape), 2, replace=False):
            i = start + int(index)
            step = np.zeros_like(flat)
            step[i] = 1e-6
            numeric = (loss_at(flat + step) - loss_at(flat - step)) / 2e-6
            assert grad[i] == pytest.approx(numeric, rel=1e-4, abs=1e-7), name


def test_chunks_with_carried_states_equal_one_pass():
    model = tiny_model()
    flat = noisy_params(model)
    ops = ops_for("cpu")
    p = model.views(flat)
    window = tokens(3, 40)[:, :-1]
    whole, _, _ = model.forward(ops, p, window)
    first, states, _ = model.forward(ops, p, window[:, :17])
    second, _, _ = model.forward(ops, p, window[:, 17:], states)
    chunked = np.concatenate([first.reshape(3, 17, -1), second.reshape(3, 23, -1)], axis=1).reshape(whole.shape)
    assert relative(chunked, whole.astype(np.float64)) <= 1e-5


def test_step_by_step_equals_the_parallel_pass():
    model = tiny_model()
    flat = noisy_params(model)
    ops = ops_for("cpu")
    p = model.views(flat)
    window = tokens(2, 12)[:, :-1]
    parallel, _, _ = model.forward(ops, p, window)
    parallel = parallel.reshape(2, 12, -1)
    states = None
    for t in range(12):
        logits, states = model.step(ops, p, window[:, t], states)
        assert relative(logits, parallel[:, t].astype(np.float64)) <= 1e-5


def test_initialisation_makes_every_block_the_identity():
    model = tiny_model(dim=16, depth=3)
    flat = model.init_params(5)
    views = model.views(flat)
    zeroed = [n for n in views if n.endswith(("gru_out", "ff_out", "ff_out_bias"))]
    assert len(zeroed) == 3 * 3 and not any(views[n].any() for n in zeroed), zeroed  # three a block
    assert np.std(views["embed"]) == pytest.approx(0.02 / 4, rel=0.1)
    ops = ops_for("numpy")
    window = tokens(2, 5)[:, :-1]
    logits, _, _ = model.forward(ops, views, window)
    x = views["embed"].astype(np.float64)[window.reshape(-1)]
    expected = ops.matmul(ops.rmsnorm(x, views["norm"])[0], views["head"])
    assert np.allclose(logits, expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize("backend,freeze", [("numpy", False), ("cpu", True), ("cuda", False)])
def test_population_forward_equals_explicitly_perturbed_members(backend, freeze):
    model = tiny_model(dim=4, depth=1)
    flat = noisy_params(model)
    cfg = FloatEggrollConfig(population=4, perturbation_rank=2, sigma=0.05, group_size=2, freeze_vectors=freeze)
    strategy = FloatEggroll(model, cfg, ops_for(backend), make_optimizer("sgd", flat.copy(), 0.1), 7, step=3)
    ops = ops_for(backend)
    window = tokens(4, 3)[:, :-1]
    together, _, _ = model.forward(ops, model.views(ops.to_device(flat)), window,
                                   perturbation=strategy.perturbation())
    together = ops.to_host(together).reshape(4, 3, -1)
    reference = ops_for("numpy")
    for member in range(4):
        sign, pair = (1.0, -1.0)[member % 2], np.array([member // 2])
        own = model.views(flat.astype(np.float64).copy())
        for name, (_shape, kind) in strategy.kinds.items():
            if kind == "matrix":
                a, b = (to_host(f) for f in strategy.pair_noise(name, pair))  # drawn on the backend
                own[name] += sign * cfg.sigma / math.sqrt(cfg.perturbation_rank) * (a[0].astype(np.float64) @ b[0].T)
            elif not freeze:
                own[name] += sign * cfg.sigma * to_host(strategy.pair_noise(name, pair))[0]
        alone, _, _ = model.forward(reference, own, window[member:member + 1])
        assert relative(together[member], alone) <= 1e-5


def test_gruboros_sizing():
    assert parse_size("1g") == 1 << 30 and parse_size("100k") == 102_400 and parse_size("2048") == 2048
    assert solve_dims(parse_size("1g"), dim=1024, expansion=3.0, ff_mult=1.5) == (1024, 85)
    assert solve_dims(parse_size("1g")) == (1024, 82)
    assert solve_dims(parse_size("100m")) == (512, 32)
    model = MinGruModel(MinGruConfig(1024, 85, 3.0, 1.5))
    d, e, f = 1024, 3072, 1536
    per_block = 2 * e * d + d * e + 2 * d + 2 * f * d + f + d
    assert model.n_params == 2 * 256 * d + d + 85 * per_block == 1_070_464_512


@pytest.mark.parametrize("call,message", [
    (lambda: parse_size("12x"), "is not a size"),
    (lambda: parse_size("0"), "must be positive"),
    (lambda: solve_dims(1024), "cannot be met"),
    (lambda: solve_dims(None, dim=64), "give --params"),
    (lambda: solve_dims(10**6, dim=-1), "--dim must be positive"),
    (lambda: MinGruConfig(0, 2).check(), "must be positive"),
    (lambda: MinGruConfig(64, 2, expansion_factor=0.001).check(), "zero-width"),
    (lambda: MinGruConfig(64, 2, ff_mult=0.0).check(), "must be positive"),
])
def test_bad_sizes_are_refused(call, message):
    with pytest.raises(BadInput, match=message):
        call()
