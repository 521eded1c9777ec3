"""MinGRU scan: float64 sequential reference, fp32 CPU twin and chunked CUDA kernels (simulator).
Tolerances: forward relative error <= 1e-5 against the float64 reference (any T up to 65,536);
gradients within 1e-5 of the largest reference gradient."""

import numpy as np
import pytest

from eggnog.kernels import scan
from eggnog.kernels.backend import to_host

RNG = np.random.default_rng(2026)


def inputs(batch, steps, channels, with_h0=True):
    k = RNG.normal(size=(batch, steps, channels)).astype(np.float32)
    u = RNG.normal(size=(batch, steps, channels)).astype(np.float32)
    h0 = np.abs(RNG.normal(size=(batch, channels))).astype(np.float32) if with_h0 else None
    return k, u, h0


def max_relative(got, ref):
    return float(np.max(np.abs(np.asarray(got, np.float64) - ref) / np.abs(ref)))


def max_scaled(got, ref):
    return float(np.max(np.abs(np.asarray(got, np.float64) - ref)) / np.max(np.abs(ref)))


def test_long_sequence_accuracy_all_implementations():
    k, u, _ = inputs(1, 65_536, 2, with_h0=False)
    ref = scan.reference_forward(k, u)
    assert max_relative(scan.cpu_forward(k, u), ref) <= 1e-5
    assert max_relative(to_host(scan.cuda_forward(k, u)), ref) <= 1e-5


@pytest.mark.parametrize("steps", [1, 63, 64, 65, 200])
def test_any_length_with_carried_state(steps):
    k, u, h0 = inputs(2, steps, 3)
    ref = scan.reference_forward(k, u, h0)
    assert max_relative(scan.cpu_forward(k, u, h0), ref) <= 1e-5
    assert max_relative(to_host(scan.cuda_forward(k, u, h0)), ref) <= 1e-5


def test_parallel_equals_step_by_step():
    k, u, h0 = inputs(2, 130, 4)
    parallel = scan.cpu_forward(k, u, h0)
    state_cpu, state_gpu = h0, h0
    for t in range(k.shape[1]):
        state_cpu = scan.cpu_step(k[:, t], u[:, t], state_cpu)
        assert np.allclose(state_cpu, parallel[:, t], rtol=1e-5, atol=0)
    for t in range(3):
        state_gpu = to_host(scan.cuda_step(np.ascontiguousarray(k[:, t]), np.ascontiguousarray(u[:, t]), state_gpu))
        assert np.allclose(state_gpu, parallel[:, t], rtol=1e-5, atol=0)
    assert np.allclose(scan.reference_step(k[:, 0], u[:, 0]), scan.reference_forward(k[:, :1], u[:, :1])[:, 0])


def test_chunked_continuation_uses_the_state_as_is():
    k, u, _ = inputs(1, 256, 3, with_h0=False)
    whole = scan.reference_forward(k, u)
    first = scan.cpu_forward(k[:, :100], u[:, :100])
    second = scan.cpu_forward(k[:, 100:], u[:, 100:], first[:, -1])  # positive state, no g() again
    assert max_relative(np.concatenate([first, second], axis=1), whole) <= 1e-5


def finite_difference(k, u, h0, weights, which, index, eps=1e-6):
    def loss(kk, uu, hh):
        return float((scan.reference_forward(kk, uu, hh) * weights).sum())

    args = [k.astype(np.float64), u.astype(np.float64), h0.astype(np.float64)]
    plus, minus = [a.copy() for a in args], [a.copy() for a in args]
    plus[which][index] += eps
    minus[which][index] -= eps
    return (loss(*plus) - loss(*minus)) / (2 * eps)


def test_reference_gradients_match_finite_differences():
    k, u, h0 = inputs(2, 40, 3)
    u[0, 7, 1], u[1, 8, 2] = 0.3, -0.3  # both branches of g
    weights = RNG.normal(size=k.shape)
    h = scan.reference_forward(k, u, h0)
    dk, du, dh0 = scan.reference_backward(weights, k, u, h, h0)
    for index in [(0, 0, 0), (0, 7, 1), (1, 8, 2), (1, 39, 0), (0, 20, 2)]:
        assert dk[index] == pytest.approx(finite_difference(k, u, h0, weights, 0, index), rel=1e-5, abs=1e-8)
        assert du[index] == pytest.approx(finite_difference(k, u, h0, weights, 1, index), rel=1e-5, abs=1e-8)
    for index in [(0, 0), (1, 2)]:
        assert dh0[index] == pytest.approx(finite_difference(k, u, h0, weights, 2, index), rel=1e-5, abs=1e-8)


@pytest.mark.parametrize("steps,channels,with_h0", [(150, 3, True), (64, 2, False), (65_536, 1, False)])
def test_twin_gradients_match_reference(steps, channels, with_h0):
    k, u, h0 = inputs(1, steps, channels, with_h0)
    grad_h = RNG.normal(size=k.shape).astype(np.float32)
    h32 = scan.cpu_forward(k, u, h0)
    ref = scan.reference_backward(grad_h, k, u, scan.reference_forward(k, u, h0), h0)
    cpu = scan.cpu_backward(grad_h, k, u, h32, h0)
    sim = [to_host(x) for x in scan.cuda_backward(grad_h, k, u, h32, h0)]
    for r, c, s in zip(ref, cpu, sim):
        assert max_scaled(c, r) <= 1e-5 and max_scaled(s, r) <= 1e-5
