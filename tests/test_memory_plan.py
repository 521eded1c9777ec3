"""The MinGRU BPTT memory estimate: recomputation gives the same gradients bit for bit and holds one
layer's activations instead of all; a run that cannot fit stops before allocating, with exit status 2
and one sentence that names what it needs."""

import numpy as np
import pytest

from eggnog.kernels.core.registry import ops_for
from eggnog.models.mingru import MinGruConfig, MinGruModel
from eggnog.runtime.errors import BadInput
from eggnog.training import memory_plan
from tests.helpers import assert_user_error, run_script


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_recomputed_gradients_are_identical(backend):
    model = MinGruModel(MinGruConfig(32, 3))
    ops = ops_for(backend)
    flat = model.init_params(0) + np.random.default_rng(1).normal(0, 0.02, model.n_params).astype(np.float32)
    p = model.views(ops.to_device(flat))
    rng = np.random.default_rng(2)
    inputs, targets = rng.integers(0, 256, (2, 2, 20), dtype=np.uint8)
    states = [ops.to_device(np.abs(rng.normal(size=(2, model.cfg.dim_inner))).astype(np.float32)) for _ in range(3)]
    plain = model.loss_and_grad(ops, p, inputs, targets, states)
    again = model.loss_and_grad(ops, p, inputs, targets, states, recompute=True)
    assert plain[0] == again[0]
    assert np.array_equal(model.flatten(plain[1], ops), model.flatten(again[1], ops))
    for a, b in zip(plain[2], again[2]):
        assert np.array_equal(ops.to_host(a), ops.to_host(b))


def test_recomputation_keeps_one_layer_of_activations():
    cfg = MinGruConfig(1024, 24)
    full = memory_plan.bptt_memory(cfg, 10**9, 2048, "sf-adamw", False)
    light = memory_plan.bptt_memory(cfg, 10**9, 2048, "sf-adamw", True)
    layer = 4 * 1024 + 3 * cfg.dim_inner + 2 * cfg.ff_inner + 2
    saved = full["backend"]["activations"] - light["backend"]["activations"]
    assert saved == 4 * 2048 * (24 * layer - (24 * 1024 + layer))
    assert light["host"] == full["host"] and sum(light["host"].values()) == 0  # one rank: the step stays there
    assert light["backend"]["parameters and optimiser state"] == 3 * 4 * 10**9
    spread = memory_plan.bptt_memory(cfg, 10**9, 2048, "sgd", True, ranks=4)
    assert spread["host"]["allreduce buffers"] == 2 * 4 * 10**9
    assert spread["backend"]["parameters and optimiser state"] == 2 * 4 * 10**9


def test_a_plan_over_the_free_memory_is_refused():
    plan = memory_plan.bptt_memory(MinGruConfig(512, 8), 50_000_000, 4096, "adamw", False)
    need = sum(plan["backend"].values())
    memory_plan.check_fits(plan, host_free=10 * need, device_free=2 * need, recompute=False)
    with pytest.raises(BadInput, match="GiB of GPU memory.*--recompute"):
        memory_plan.check_fits(plan, host_free=10 * need, device_free=need, recompute=False)
    with pytest.raises(BadInput, match="GiB of host memory"):  # CPU backend: both needs on the host
        memory_plan.check_fits(plan, host_free=need, device_free=None, recompute=True)


def test_a_run_too_big_for_this_machine_exits_2_before_allocating(tmp_path):
    result = run_script("train_bptt.py", "--params", "64g", "--steps", "1", "--run-dir", str(tmp_path / "run"),
                        "--backend", "cpu")
    assert_user_error(result, "GiB of host memory", "--recompute")
    assert not (tmp_path / "run").exists()
