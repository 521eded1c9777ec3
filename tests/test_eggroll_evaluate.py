"""IntEggroll.evaluate (one egg_epoch call) returns what the per-step sum of the NumPy per-op model
gives, on the CPU twin and on the CUDA kernel (simulator), perturbed or not, with the states carried
in one (n_layer, members, D) array."""

import numpy as np
import pytest

from eggnog.evolution.eggroll import IntEggroll, IntEggrollConfig
from eggnog.kernels.core.backend import Backend
from eggnog.kernels.core.placement import to_host
from eggnog.kernels.core.registry import ops_for
from eggnog.models.egg import EggConfig, EggModel

WINDOWS = np.array([[0, 65, 66, 10], [10, 67, 0, 32], [97, 98, 99, 0], [1, 2, 3, 4]], dtype=np.uint8)


def reference(model, flat, perturbed, first):
    ops = ops_for("numpy")
    params, prefixes = model.views(flat), model.prefixes(0, 0)
    members = WINDOWS.shape[0]
    vectors = model.member_vectors(ops, params, prefixes, first, members, 4, perturbed)
    states = [np.zeros((members, model.cfg.n_embd), np.int8) for _ in range(model.cfg.n_layer)]
    total = np.zeros(members, np.int64)
    for t in range(WINDOWS.shape[1] - 1):
        logits = model.step(ops, params, vectors, np.ascontiguousarray(WINDOWS[:, t]), states, prefixes, first, 4,
                            perturbed)
        total += ops.egg_loglik(logits, np.ascontiguousarray(WINDOWS[:, t + 1]))
    return total, states


@pytest.mark.parametrize("backend", [Backend("cpu"), Backend("cuda", simulated=True)], ids=["cpu", "simulator"])
@pytest.mark.parametrize("perturbed", [True, False])
def test_evaluate_equals_the_reference_sum(backend, perturbed):
    model = EggModel(EggConfig(1, 8))
    flat = model.init_params(2)
    first = 2
    strategy = IntEggroll(model, IntEggrollConfig(population=8, sigma_shift=4), backend, flat, 0, first_member=first,
                          members=WINDOWS.shape[0])
    states = backend.zeros((1, WINDOWS.shape[0], 8), np.int8)
    scores = strategy.evaluate(WINDOWS, states, perturbed=perturbed)
    expected, expected_states = reference(model, flat, perturbed, first)
    assert scores.dtype == np.int64 and np.array_equal(scores, expected)
    assert np.array_equal(to_host(states), np.stack(expected_states))
