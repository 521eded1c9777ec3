"""On a real GPU, at sizes the simulator cannot reach: the MinGRU, LSTM and DNC losses and gradients
agree with their CPU twins (fp32 both, FMA contraction on the GPU: 1e-4 of the largest gradient),
the scan (approximate reciprocal in its gates) holds its accuracy at T = 65,536 and its backward
matches the reference, and the CD-RGE perturbation kernels match the twins
(Rademacher bit for bit)."""

import numpy as np
import pytest

from eggnog.kernels.core.backend import select_backend
from eggnog.kernels.core.placement import to_host
from eggnog.kernels.noise import perturb
from eggnog.kernels.noise.scalar_math import stream_key
from eggnog.kernels.rnn import scan
from eggnog.models.dnc import DncConfig, DncModel
from eggnog.models.lstm import LstmConfig, LstmModel
from eggnog.models.mingru import MinGruConfig
from eggnog.zorn.mingru_task import MinGruTaskModel
from eggnog.zorn.tasks import make_task

BATCH = make_task("copy", 4, 16, seed=3).batch(0, 32)


def relative(got, ref):
    return float(np.abs(np.asarray(got, np.float64) - ref).max() / np.abs(ref).max())


@pytest.mark.parametrize("model", [MinGruTaskModel(MinGruConfig(256, 3)), LstmModel(LstmConfig(100, 64, 512, 8)),
                                   DncModel(DncConfig(100, 32, 128, 64, 64, 2))], ids=["mingru", "lstm", "dnc"])
def test_model_loss_and_gradient_match_the_cpu_twin(model):
    assert not select_backend("cuda").simulated
    flat = model.init_params(1) + np.random.default_rng(0).normal(0, 0.02, model.n_params).astype(np.float32)
    cpu_loss, cpu_grad = model.loss_and_grad("cpu", flat, BATCH)
    gpu_loss, gpu_grad = model.loss_and_grad("cuda", flat, BATCH)
    assert gpu_loss == pytest.approx(cpu_loss, rel=1e-5)
    assert relative(gpu_grad, cpu_grad.astype(np.float64)) <= 1e-4


def test_scan_accuracy_at_64k_steps():
    rng = np.random.default_rng(4)
    k, u = (rng.normal(size=(8, 65_536, 64)).astype(np.float32) for _ in range(2))
    ref = scan.reference_scan_forward(k[:1, :, :4], u[:1, :, :4])
    got = to_host(scan.cuda_scan_forward(k, u))[:1, :, :4]
    assert float(np.max(np.abs(got - ref) / np.abs(ref))) <= 1e-5


def test_scan_backward_with_approximate_gates_matches_the_reference():
    rng = np.random.default_rng(5)
    k, u, grad_h = (rng.normal(size=(2, 1000, 300)).astype(np.float32) for _ in range(3))
    h0 = np.abs(rng.normal(size=(2, 300))).astype(np.float32)
    h = scan.reference_scan_forward(k, u, h0).astype(np.float32)
    expected = scan.reference_scan_backward(grad_h, k, u, h, h0)
    got = scan.cuda_scan_backward(grad_h, k, u, h, h0)
    rtol, atol = scan.BACKWARD_TOLERANCE
    for g, e in zip(got, expected):
        assert np.all(np.abs(to_host(g) - e) <= atol * np.abs(e).max() + rtol * np.abs(e))


@pytest.mark.parametrize("distribution", ["rademacher", "normal", "uniform"])
def test_perturbation_kernels_match_the_cpu_twin(distribution):
    theta = np.random.default_rng(5).normal(size=10_000_019).astype(np.float32)
    key = stream_key(7, 1, 2, 3)
    out_cpu = np.empty_like(theta)
    perturb.cpu_perturbed_copy(theta, out_cpu, key, 0.01, distribution)
    backend = select_backend("cuda")
    out_gpu = to_host(perturb.cuda_perturbed_copy(backend.to_device(theta), backend.empty(theta.shape, np.float32),
                                                  key, 0.01, distribution))
    if distribution == "rademacher":
        assert np.array_equal(out_gpu, out_cpu)
    else:
        assert np.all(np.abs(out_gpu - out_cpu) <= 8 * np.finfo(np.float32).eps * np.maximum(np.abs(theta), 0.05))
