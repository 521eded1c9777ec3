"""Properties of the MinGRU scan beyond the generated agreement tests (tests/test_kernel_ops.py):
accuracy over 65,536 steps (forward relative error <= 1e-5 against the float64 reference; gradients
within 1e-5 of the largest reference gradient), a carried state continues a sequence as is,
`scan_step` equals the parallel scan, the reference gradients equal finite differences, the CUDA
launchers write into given outputs without allocating or uploading anything (one launch a call, or
fold, carry and scan when T is cut into segments), and misshaped arguments are refused."""

import numpy as np
import pytest

from eggnog.kernels.core.cuda_api import cuda
from eggnog.kernels.core.device_counts import counting
from eggnog.kernels.core.placement import to_host
from eggnog.kernels.core.registry import ops_for
from eggnog.kernels.rnn.scan import reference_scan_backward, reference_scan_forward, reference_scan_step
from eggnog.kernels.rnn.scan_layout import plan
from eggnog.runtime.errors import BadInput

RNG = np.random.default_rng(2026)
BACKENDS = ("cpu", "cuda")


def inputs(batch, steps, channels, with_h0=True):
    k = RNG.normal(size=(batch, steps, channels)).astype(np.float32)
    u = RNG.normal(size=(batch, steps, channels)).astype(np.float32)
    h0 = np.abs(RNG.normal(size=(batch, channels))).astype(np.float32) if with_h0 else None
    return k, u, h0


def max_relative(got, ref):
    return float(np.max(np.abs(np.asarray(to_host(got), np.float64) - ref) / np.abs(ref)))


def max_scaled(got, ref):
    return float(np.max(np.abs(np.asarray(to_host(got), np.float64) - ref)) / np.max(np.abs(ref)))


@pytest.fixture(scope="module")
def long_sequence():
    """T = 65,536 inputs, an output gradient, and the float64 reference forward and backward."""
    k, u, _ = inputs(1, 65_536, 2, with_h0=False)
    grad_h = RNG.normal(size=k.shape).astype(np.float32)
    h = reference_scan_forward(k, u)
    return k, u, grad_h, h, reference_scan_backward(grad_h, k, u, h)


@pytest.mark.parametrize("backend", BACKENDS)
def test_long_sequence_accuracy(backend, long_sequence):
    ops = ops_for(backend)
    k, u, grad_h, ref, ref_grads = long_sequence
    h = ops.scan_forward(ops.to_device(k), ops.to_device(u))
    assert max_relative(h, ref) <= 1e-5
    got = ops.scan_backward(ops.to_device(grad_h), ops.to_device(k), ops.to_device(u), h)
    for g, r in zip(got, ref_grads):
        assert max_scaled(g, r) <= 1e-5


def test_a_carried_state_continues_the_sequence_as_is():
    ops = ops_for("cpu")
    k, u, _ = inputs(1, 256, 3, with_h0=False)
    first = ops.scan_forward(k[:, :100], u[:, :100])
    second = ops.scan_forward(np.ascontiguousarray(k[:, 100:]), np.ascontiguousarray(u[:, 100:]),
                              ops.last_step(first))  # positive state, no g() again
    assert max_relative(np.concatenate([first, second], axis=1), reference_scan_forward(k, u)) <= 1e-5


@pytest.mark.parametrize("backend", BACKENDS)
def test_step_by_step_equals_the_parallel_scan(backend):
    ops = ops_for(backend)
    k, u, h0 = inputs(2, 70, 4)
    parallel = to_host(ops.scan_forward(ops.to_device(k), ops.to_device(u), ops.to_device(h0)))
    state = None
    for t in range(k.shape[1] if backend == "cpu" else 3):
        k_t, u_t = (ops.to_device(np.ascontiguousarray(a[:, t])) for a in (k, u))
        state = ops.scan_step(k_t, u_t, ops.to_device(h0) if state is None else state)
        assert np.allclose(to_host(state), parallel[:, t], rtol=1e-5, atol=0)


@pytest.mark.parametrize("shape", [(2, 70, 33), (1, 260, 5)])  # one launch; two segments of several tiles
def test_cuda_launchers_fill_given_outputs_without_allocating_or_uploading(shape):
    ops = ops_for("cuda")
    batch, steps, channels = shape
    k, u, h0 = inputs(*shape)
    grad_h = RNG.normal(size=shape).astype(np.float32)
    k_d, u_d, h0_d, grad_d, k0_d, u0_d = (cuda.to_device(np.ascontiguousarray(a))
                                          for a in (k, u, h0, grad_h, k[:, 0], u[:, 0]))
    h, dk, du = (cuda.device_array(shape, np.float32) for _ in range(3))
    dh0, step = (cuda.device_array((batch, channels), np.float32) for _ in range(2))
    with counting() as counts:
        got_h = ops.scan_forward(k_d, u_d, h0_d, out=h)
        got = ops.scan_backward(grad_d, k_d, u_d, h, h0_d, out=(dk, du, dh0))
        got_step = ops.scan_step(k0_d, u0_d, h0_d, out=step)
    assert got_h is h and got[0] is dk and got[1] is du and got[2] is dh0 and got_step is step
    segmented = plan(*shape)[2] > 1
    assert counts.allocations == counts.uploads == 0 and counts.launches == (7 if segmented else 3)
    ref = reference_scan_forward(k, u, h0)
    assert max_relative(h, ref) <= 1e-5
    for g, r in zip((dk, du, dh0), reference_scan_backward(grad_h, k, u, ref.astype(np.float32), h0)):
        assert max_scaled(g, r) <= 1e-5
    assert max_relative(step, reference_scan_step(k[:, 0], u[:, 0], h0)) <= 1e-5


def finite_difference(k, u, h0, weights, which, index, eps=1e-6):
    def loss(kk, uu, hh):
        return float((reference_scan_forward(kk, uu, hh) * weights).sum())

    args = [k.astype(np.float64), u.astype(np.float64), h0.astype(np.float64)]
    plus, minus = [a.copy() for a in args], [a.copy() for a in args]
    plus[which][index] += eps
    minus[which][index] -= eps
    return (loss(*plus) - loss(*minus)) / (2 * eps)


def test_reference_gradients_match_finite_differences():
    k, u, h0 = inputs(2, 40, 3)
    u[0, 7, 1], u[1, 8, 2] = 0.3, -0.3  # both branches of g
    weights = RNG.normal(size=k.shape)
    h = reference_scan_forward(k, u, h0)
    dk, du, dh0 = reference_scan_backward(weights, k, u, h, h0)
    for index in [(0, 0, 0), (0, 7, 1), (1, 8, 2), (1, 39, 0), (0, 20, 2)]:
        assert dk[index] == pytest.approx(finite_difference(k, u, h0, weights, 0, index), rel=1e-5, abs=1e-8)
        assert du[index] == pytest.approx(finite_difference(k, u, h0, weights, 1, index), rel=1e-5, abs=1e-8)
    for index in [(0, 0), (1, 2)]:
        assert dh0[index] == pytest.approx(finite_difference(k, u, h0, weights, 2, index), rel=1e-5, abs=1e-8)


@pytest.mark.parametrize("backend", ["numpy", *BACKENDS])
def test_misshaped_arguments_are_refused(backend):
    ops = ops_for(backend)

    def d(*shape):
        return ops.to_device(np.zeros(shape, np.float32))

    with pytest.raises(BadInput, match="scan_forward: u has channels"):
        ops.scan_forward(d(2, 5, 3), d(2, 5, 4))
    with pytest.raises(BadInput, match="scan_forward: h0 has batch"):
        ops.scan_forward(d(2, 5, 3), d(2, 5, 3), d(3, 2))
    with pytest.raises(BadInput, match="scan_backward: k has steps"):
        ops.scan_backward(d(2, 4, 3), d(2, 5, 3), d(2, 5, 3), d(2, 5, 3))
    with pytest.raises(BadInput, match="scan_step: k must have 2 axes"):
        ops.scan_step(d(2, 1, 3), d(2, 1, 3))
    with pytest.raises(BadInput, match="scan_forward: out has channels"):
        ops.scan_forward(d(2, 5, 3), d(2, 5, 3), out=d(2, 5, 4))
    with pytest.raises(BadInput, match="the scan writes"):
        ops.scan_backward(d(2, 5, 3), d(2, 5, 3), d(2, 5, 3), d(2, 5, 3), out=(d(2, 5, 3), d(2, 5, 3)))
