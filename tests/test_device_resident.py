"""A step on the CUDA backend keeps its work on the device: what comes back to the host is one number
per probe, member or batch (the losses, reduced by weighted_row_sums), never rows of per-token
losses, gradients or parameters. Checked on the simulator, where every device-to-host copy goes
through FakeCUDAArray.copy_to_host: each test records the sizes copied during one step.
"""

import numpy as np
import pytest
from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

from eggnog.evolution.float_eggroll import FloatEggroll, FloatEggrollConfig
from eggnog.kernels.core.backend import Backend
from eggnog.kernels.core.registry import ops_for
from eggnog.models.lstm import LstmConfig, LstmModel
from eggnog.models.mingru import MinGruConfig, MinGruModel
from eggnog.runtime.world import init_world
from eggnog.training.optimizers import make_optimizer
from eggnog.zorn.rge.run import RgeRun, RgeRunConfig
from eggnog.zorn.rge.trainer import RgeConfig, RgeTrainer
from eggnog.zorn.tasks import VOCAB, make_task

DEVICE = Backend("cuda", simulated=True)
TINY = dict(hidden_size=4, num_heads=2, input_size=2, memory_size=2, batch_size=2, lr=0.05, steps=1, min_seq_len=2,
            max_seq_len=2, validate_every=0, solver="bptt", optimizer="momentum", head_size=2, dim=4,
            depth=1)  # the simulator is slow


@pytest.fixture
def copies(monkeypatch):
    """Sizes (elements) of every device-to-host copy made while the test runs."""
    seen = []
    original = FakeCUDAArray.copy_to_host

    def recording(self, *args, **kwargs):
        seen.append(self.size)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(FakeCUDAArray, "copy_to_host", recording)
    return seen


@pytest.mark.parametrize("probe_batch", [1, 2, 4])
def test_a_cdrge_step_copies_its_losses_once_when_batched(copies, probe_batch):
    model = LstmModel(LstmConfig(VOCAB, 2, 4, 2))
    batch = make_task("copy", 2, 2, seed=1).batch(0, 2)
    rge = RgeTrainer(model, RgeConfig(probes=2, lr=0.05, sigma=0.01, probe_batch=probe_batch), DEVICE,
                     model.init_params(2), 9, world=init_world())
    before = rge.host_params()
    copies.clear()
    rge.train_step(batch)
    assert copies == ([1, 1, 1, 1] if probe_batch == 1 else [4])  # per-token rows would be 6 a probe
    assert not np.array_equal(rge.host_params(), before)  # the update ran, on the device


@pytest.mark.parametrize("model", ["lstm", "dnc", "mingru"])
def test_the_bptt_baseline_steps_on_the_device(copies, model):
    run = RgeRun(RgeRunConfig(**TINY, model=model), init_world(), DEVICE)
    assert hasattr(run.optimizer.train_params(), "copy_to_host")
    before = run.host_params()
    batch = run.task.batch(0, 2)
    copies.clear()
    loss = run.train_step(batch)
    assert copies == [1] and np.isfinite(loss)
    cpu = RgeRun(RgeRunConfig(**TINY, model=model), init_world(), Backend("cpu"))
    assert loss == pytest.approx(cpu.train_step(batch), rel=1e-5)
    np.testing.assert_allclose(run.host_params(), cpu.host_params(), rtol=1e-4, atol=1e-5)
    assert not np.array_equal(run.host_params(), before)


def test_float_eggroll_brings_back_one_loss_per_member(copies):
    model = MinGruModel(MinGruConfig(4, 1, 1.5, 2.0))
    ops = ops_for("cuda")
    es = FloatEggroll(model, FloatEggrollConfig(population=4, group_size=2, sigma=0.01, perturbation_rank=2), ops,
                      make_optimizer("sgd", ops.to_device(model.init_params(1)), 1.0, momentum=0.0), 5)
    windows = np.random.default_rng(0).integers(0, 256, (4, 6)).astype(np.uint8)
    copies.clear()
    losses = es.evaluate(windows)
    assert copies == [4] and losses.shape == (4,)
