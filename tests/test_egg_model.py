"""The EGG model: parameter layout and count, and the CPU twin equal to the NumPy reference over
several tokens with carried state and document resets (test_fixtures_egg.py checks the forward
against nano-egg's own outputs)."""

import numpy as np
import pytest

from eggnog.kernels.core.registry import ops_for
from eggnog.models.egg import EggConfig, EggModel
from eggnog.runtime.errors import BadInput

TEXT = np.frombuffer(b"def f(x):\n\0ret", dtype=np.uint8)


@pytest.mark.parametrize("layers,dim", [(6, 256), (1, 64), (2, 16), (3, 100)])
def test_parameter_count(layers, dim):
    assert EggModel(EggConfig(layers, dim)).n_params == 513 * dim + layers * (4 * dim + 12 * dim * dim)


def test_nano_egg_size():
    assert EggModel(EggConfig(6, 256)).n_params == 4_856_064


def test_bad_sizes():
    with pytest.raises(BadInput):
        EggConfig(0, 16)


def test_init_is_seeded_and_fixed_point():
    model = EggModel(EggConfig(1, 32))
    a, b = model.init_params(1), model.init_params(1)
    assert np.array_equal(a, b) and not np.array_equal(a, model.init_params(2))
    views = model.views(a)
    assert np.all(views["layers.0.ln1"] == 16) and np.all(views["layers.0.gru.bf"] == 0)
    assert 14 < views["layers.0.mlp.up"].std() < 18


def run(backend, model, flat, members=4, first=0, perturbed=True):
    windows = np.stack([np.roll(TEXT, k) for k in range(members)])
    ops = ops_for(backend)
    params, prefixes = model.views(flat), model.prefixes(0, 3)
    vectors = model.member_vectors(ops, params, prefixes, first, members, 4, perturbed)
    states = [np.zeros((members, model.cfg.n_embd), np.int8) for _ in range(model.cfg.n_layer)]
    total = np.zeros(members, dtype=np.int64)
    for t in range(windows.shape[1] - 1):
        logits = model.step(ops, params, vectors, np.ascontiguousarray(windows[:, t]), states, prefixes, first, 4,
                            perturbed)
        total += ops.egg_loglik(logits, np.ascontiguousarray(windows[:, t + 1]))
    return total, logits, np.stack(states)


@pytest.mark.parametrize("first,perturbed", [(0, True), (6, True), (0, False)])
def test_cpu_twin_equals_reference(first, perturbed):
    model = EggModel(EggConfig(2, 24))
    flat = model.init_params(5)
    ref = run("numpy", model, flat, members=6, first=first, perturbed=perturbed)
    cpu = run("cpu", model, flat, members=6, first=first, perturbed=perturbed)
    for a, b in zip(ref, cpu):
        assert np.array_equal(a, b)
    if not perturbed:
        assert len(set(map(bytes, ref[2][:, 0]))) > 1  # members differ only by data here


def test_architecture_table():
    arch = EggModel(EggConfig(6, 256)).architecture()
    assert arch["total_params"] == 4_856_064
    assert arch["config"]["depth"] == 6 and arch["config"]["dim"] == 256
    assert sum(t["params"] for t in arch["tensors"]) == arch["total_params"]
    assert arch["tensors"][0] == {"name": "embedding", "shape": [256, 256], "kind": "embedding", "params": 65536}


def test_simulated_cuda_path_equals_reference():
    """The whole model on the CUDA kernels (simulator), tiny enough for it: bit-identical."""
    from eggnog.kernels.core.backend import Backend
    from eggnog.kernels.core.placement import to_host

    model = EggModel(EggConfig(1, 8))
    flat = model.init_params(2)
    sim = Backend("cuda", simulated=True)
    ops = ops_for("cuda")
    params, prefixes = model.views(sim.to_device(flat)), model.prefixes(0, 1)
    vectors = model.member_vectors(ops, params, prefixes, 2, 2, 4, True)
    states = [sim.zeros((2, 8), np.int8)]
    windows = np.array([[0, 65, 66], [10, 67, 0]], dtype=np.uint8)
    total = np.zeros(2, dtype=np.int64)
    for t in range(2):
        logits = model.step(ops, params, vectors, sim.to_device(np.ascontiguousarray(windows[:, t])), states,
                            prefixes, 2, 4, True)
        total += to_host(ops.egg_loglik(logits, sim.to_device(np.ascontiguousarray(windows[:, t + 1]))))
    ref_ops = ops_for("numpy")
    ref_params = model.views(flat)
    ref_vectors = model.member_vectors(ref_ops, ref_params, prefixes, 2, 2, 4, True)
    ref_states = [np.zeros((2, 8), np.int8)]
    ref_total = np.zeros(2, dtype=np.int64)
    for t in range(2):
        ref_logits = model.step(ref_ops, ref_params, ref_vectors, np.ascontiguousarray(windows[:, t]), ref_states,
                                prefixes, 2, 4, True)
        ref_total += ref_ops.egg_loglik(ref_logits, np.ascontiguousarray(windows[:, t + 1]))
    assert np.array_equal(total, ref_total) and np.array_equal(to_host(logits), ref_logits)
    assert np.array_equal(to_host(states[0]), ref_states[0])
