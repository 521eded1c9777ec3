"""The CPU twin of egg_epoch beyond the registered cases: widths off the 16-lane and 2-k steps of its
products, three layers, slices that start at an odd member and end inside a tile, several tiles,
perturbed or not; the float quotient it uses for EGG_LN, over every input it can see; and a whole
IntEggroll evaluation on the CPU against the per-op model step of the NumPy backend."""

import numpy as np
import pytest

from eggnog.evolution.eggroll import IntEggroll, IntEggrollConfig
from eggnog.kernels.core.backend import Backend
from eggnog.kernels.core.registry import ops_for
from eggnog.kernels.egg import epoch_cpu
from eggnog.kernels.egg.epoch import _case, cpu_egg_epoch, reference_egg_epoch
from eggnog.models.egg import EggConfig, EggModel


def run(fn, args):
    """What `fn` returns, and the states it leaves, on copies of the arguments."""
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    return fn(*copies), copies[2]


@pytest.mark.parametrize("n_layer,dim,members,steps,first,sigma_shift,perturbed", [
    (3, 48, 13, 3, 7, 2, True),  # width a multiple of 16 but not a power of two: the divisor is divided
    (2, 40, 9, 2, 1, 0, True),  # width off the 16-lane step: the scalar rest of each dot product
    (1, 33, 7, 3, 5, 3, True),  # odd width: the products read one zero k past the end
    (3, 48, 13, 3, 4, 4, False),
])
def test_twin_equals_the_reference(n_layer, dim, members, steps, first, sigma_shift, perturbed):
    args = _case(np.random.default_rng(dim + members), n_layer, dim, members, steps, first, sigma_shift, perturbed)
    expected, expected_states = run(reference_egg_epoch, args)
    got, got_states = run(cpu_egg_epoch, args)
    assert got.dtype == np.int64 and got.shape == (members,)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got_states, expected_states)


@pytest.mark.parametrize("perturbed", [True, False])
def test_tiles_do_not_change_the_result(monkeypatch, perturbed):
    """40 members in tiles of 12 (three full, one of 4) give what one tile per thread gives."""
    args = _case(np.random.default_rng(3), 2, 32, 40, 2, 3, 4, perturbed)
    expected, expected_states = run(reference_egg_epoch, args)
    monkeypatch.setattr(epoch_cpu, "TILE", 12)
    assert epoch_cpu.tile_size(40) == 12
    got, got_states = run(cpu_egg_epoch, args)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got_states, expected_states)


def test_states_must_be_updatable_in_place():
    params, windows, states, prefixes, first, sigma_shift, perturbed = _case(np.random.default_rng(4), 1, 16, 4, 2, 0,
                                                                              4, True)
    with pytest.raises(ValueError, match="C-contiguous int8"):
        cpu_egg_epoch(params, windows, np.asfortranarray(states), prefixes, first, sigma_shift, perturbed)


def test_l1_norm_quotient_is_exact():
    """floor(p * (1/d) + nudge) == p // d for every product of two int8 values and every mean |x|
    an int8 row can have (1..128)."""
    p = np.arange(-2**14, 2**14 + 1, dtype=np.int64)
    for d in range(1, 129):
        q = np.floor(p * (1.0 / d) + epoch_cpu.QUOTIENT_NUDGE).astype(np.int64)
        np.testing.assert_array_equal(q, p // d, err_msg=f"d = {d}")


@pytest.mark.parametrize("perturbed", [True, False])
def test_evaluate_equals_the_per_op_model_step(perturbed):
    """IntEggroll.evaluate (one egg_epoch call on the CPU) against EggModel.step of the NumPy ops,
    byte by byte, from non-zero states, with documents starting inside the window."""
    model, members, first, steps = EggModel(EggConfig(2, 24)), 14, 5, 4
    flat = model.init_params(9)
    rng = np.random.default_rng(8)
    windows = rng.integers(1, 256, (members, steps + 1)).astype(np.uint8)
    windows[::4, 2] = 0
    start = rng.integers(-60, 61, (2, members, 24)).astype(np.int8)
    cfg = IntEggrollConfig(population=32, sigma_shift=3)
    strategy = IntEggroll(model, cfg, Backend("cpu"), flat, 11, step=6, first_member=first, members=members)
    states = start.copy()
    scores = strategy.evaluate(windows, states, perturbed=perturbed)

    ops = ops_for("numpy")
    params, prefixes = model.views(flat), model.prefixes(11, cfg.noise_epoch(6))
    vectors = model.member_vectors(ops, params, prefixes, first, members, 3, perturbed)
    per_layer = [start[layer].copy() for layer in range(2)]
    expected = np.zeros(members, np.int64)
    for t in range(steps):
        logits = model.step(ops, params, vectors, np.ascontiguousarray(windows[:, t]), per_layer, prefixes, first, 3,
                            perturbed)
        expected += ops.egg_loglik(logits, np.ascontiguousarray(windows[:, t + 1]))
    np.testing.assert_array_equal(scores, expected)
    np.testing.assert_array_equal(states, np.stack(per_layer))
