"""Properties of the MinGRU scan beyond the generated agreement tests (tests/test_kernel_ops.py):
accuracy over 65,536 steps (forward relative error <= 1e-5 against the float64 reference; gradients
within 1e-5 of the largest reference gradient), a carried state continues a sequence as is,
`scan_step` equals the parallel scan, the reference gradients equal finite differences, and misshaped
arguments are refused."""

import numpy as np
import pytest

from eggnog.kernels.core.backend import to_host
from eggnog.kernels.core.registry import ops_for
from eggnog.kernels.rnn.scan import reference_scan_backward, reference_scan_forward
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

    with pytest.raises(BadInput, match="arrays of one shape with 3 axes"):
        ops.scan_forward(d(2, 5, 3), d(2, 5, 4))
    with pytest.raises(BadInput, match="state is"):
        ops.scan_forward(d(2, 5, 3), d(2, 5, 3), d(3, 2))
    with pytest.raises(BadInput, match="arrays of one shape"):
        ops.scan_backward(d(2, 4, 3), d(2, 5, 3), d(2, 5, 3), d(2, 5, 3))
    with pytest.raises(BadInput, match="arrays of one shape with 2 axes"):
        ops.scan_step(d(2, 1, 3), d(2, 1, 3))
