"""On a real GPU, at the sizes integer EGGROLL trains at (EGG 6 x 256, population 4096): every kernel
of the integer path gives its CPU twin's bits (int_matmul on each matrix shape of the model,
int_update for both kinds with sign and z-scored fitness, every egg_* op), and so does a whole epoch
of IntEggroll: the members' log-likelihoods, their carried states and the updated parameters."""

import numpy as np
import pytest

from eggnog.evolution.eggroll import IntEggroll, IntEggrollConfig
from eggnog.evolution.fitness import Z_SCALE, pair_signs
from eggnog.kernels.core.backend import Backend, select_backend
from eggnog.kernels.core.placement import to_host
from eggnog.kernels.core.registry import ops_for
from eggnog.kernels.noise.scalar_math import prefix_key
from eggnog.models.egg import EggConfig, EggModel

LAYERS, DIM, POPULATION = 6, 256, 4096
TOKENS = 16  # bytes per member in the epoch test (the kernels do not depend on it)
EPOCH = 100  # a non-zero z-test threshold, so the update gate matters
SEED = 2026
RNG = np.random.default_rng(20)


@pytest.fixture(scope="module")
def gpu():
    backend = select_backend("cuda")
    assert not backend.simulated
    return backend


def int8(shape, scale):
    return np.clip(np.rint(RNG.normal(0, scale, shape)), -127, 127).astype(np.int8)


def run(backend, name, *args):
    """Host copies of what op `name` returns, then of its array arguments after the call."""
    ops = ops_for(backend)
    given = [ops.to_device(a.copy()) if isinstance(a, np.ndarray) else a for a in args]
    result = getattr(ops, name)(*given)
    outputs = list(result) if isinstance(result, tuple) else ([] if result is None else [result])
    outputs += [g for g, a in zip(given, args) if isinstance(a, np.ndarray)]
    return [np.asarray(to_host(o)) for o in outputs]


def assert_same_bits(name, *args):
    cpu, gpu = run("cpu", name, *args), run("cuda", name, *args)
    assert len(cpu) == len(gpu)
    for k, (c, g) in enumerate(zip(cpu, gpu)):
        assert c.dtype == g.dtype and c.shape == g.shape, f"{name} output {k}"
        np.testing.assert_array_equal(g, c, err_msg=f"{name} output {k}")


def tokens_with_resets(count):
    tokens = RNG.integers(0, 256, count).astype(np.uint8)
    tokens[::97] = 0  # document starts
    return tokens


MATRICES = {"square": (DIM, DIM), "mlp.up": (4 * DIM, DIM), "mlp.down": (DIM, 4 * DIM)}


@pytest.mark.parametrize("shape", MATRICES.values(), ids=MATRICES.keys())
@pytest.mark.parametrize("first,perturbed", [(0, True), (3 * POPULATION + 1, True), (0, False)])
def test_int_matmul(gpu, shape, first, perturbed):
    x, w = int8((POPULATION, shape[1]), 40), int8(shape, 40)
    assert_same_bits("int_matmul", x, w, prefix_key(SEED, 3, 7), first, 4, perturbed)


FITNESS = {"signs": lambda pairs: RNG.integers(-1, 2, pairs).astype(np.int8),
           "z-scores": lambda pairs: int8(pairs, Z_SCALE)}


@pytest.mark.parametrize("fitness", FITNESS.keys())
@pytest.mark.parametrize("use_clt", [True, False])
@pytest.mark.parametrize("shape", [*MATRICES.values(), (DIM,)], ids=[*MATRICES.keys(), "vector"])
def test_int_update(gpu, shape, use_clt, fitness):
    theta = RNG.integers(-127, 128, shape).astype(np.int8)
    theta.flat[:2] = [127, -127]
    fast = fitness == "signs"
    threshold = IntEggrollConfig(use_clt=use_clt, fast_fitness=fast).threshold_at(EPOCH)
    kind = "vector" if len(shape) == 1 else "matrix"
    assert_same_bits("int_update", theta, FITNESS[fitness](POPULATION // 2), prefix_key(SEED, 5, 9), kind,
                     threshold, use_clt)


FIRST = 2 * POPULATION + 2


@pytest.mark.parametrize("perturbed", [True, False])
def test_egg_vector(gpu, perturbed):
    assert_same_bits("egg_vector", int8(DIM, 60), prefix_key(SEED, 1, 2), FIRST, POPULATION, 4, perturbed)


@pytest.mark.parametrize("perturbed", [True, False])
def test_egg_embedding(gpu, perturbed):
    assert_same_bits("egg_embedding", tokens_with_resets(POPULATION), int8((256, DIM), 60), prefix_key(SEED, 0, 2),
                     FIRST, 4, perturbed)


def test_egg_l1_norm(gpu):
    x = int8((POPULATION, DIM), 30)
    x[1] = 0
    x[2] = 0
    x[2, :3] = 1  # mean |x| < 1 with non-zero products: nano-egg's -2
    x[3] = 127
    assert_same_bits("egg_l1_norm", x, int8((POPULATION, DIM), 30))


def test_egg_gru_forget_and_output(gpu):
    xf, sf, bf, s, xh, fhh, bh = (int8((POPULATION, DIM), 60) for _ in range(7))
    s[0] = 127
    assert_same_bits("egg_gru_forget", xf, sf, bf, s)
    f, _ = run("cpu", "egg_gru_forget", xf, sf, bf, s)[:2]
    assert_same_bits("egg_gru_output", xh, fhh, bh, f, s)


def test_egg_clip_add(gpu):
    assert_same_bits("egg_clip_add", int8((POPULATION, DIM), 80), int8((POPULATION, DIM), 80))


def test_egg_reset(gpu):
    assert_same_bits("egg_reset", int8((POPULATION, DIM), 40), tokens_with_resets(POPULATION))


def test_egg_loglik(gpu):
    logits = int8((POPULATION, 256), 40)
    logits[0], logits[1] = 127, -127
    assert_same_bits("egg_loglik", logits, RNG.integers(0, 256, POPULATION).astype(np.uint8))


def eggroll_epoch(backend, model, cfg, params, windows, states):
    """One epoch as the trainer runs it on one rank: evaluate, sign fitness, update."""
    strategy = IntEggroll(model, cfg, backend, params, SEED, step=EPOCH)
    carried = backend.to_device(states.copy())
    scores = strategy.evaluate(windows, carried)
    fitness = pair_signs(scores)
    moved = strategy.update(fitness)
    return scores, to_host(carried), strategy.host_params(), fitness, moved


def test_eggroll_epoch(gpu):
    model = EggModel(EggConfig(LAYERS, DIM))
    cfg = IntEggrollConfig(population=POPULATION, tokens_per_update=TOKENS)
    params = model.init_params(SEED)
    windows = tokens_with_resets(POPULATION * (TOKENS + 1)).reshape(POPULATION, TOKENS + 1)
    states = int8((LAYERS, POPULATION, DIM), 30)
    scores, carried, after, fitness, moved = eggroll_epoch(gpu, model, cfg, params, windows, states)
    ref_scores, ref_carried, ref_after, _, ref_moved = eggroll_epoch(Backend("cpu"), model, cfg, params, windows,
                                                                     states)
    np.testing.assert_array_equal(scores, ref_scores)
    np.testing.assert_array_equal(carried, ref_carried)
    np.testing.assert_array_equal(after, ref_after)
    assert moved == ref_moved
    # the epoch did something to compare: members differ, the gate let some but not all parameters move
    assert np.count_nonzero(fitness) > POPULATION // 4
    assert 0 < moved < 1
