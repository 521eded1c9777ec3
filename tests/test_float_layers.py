"""fp32 layer kernels against float64 references: CPU twin and CUDA kernel (simulator).
Tolerance: |twin - reference| <= 1e-5 * max|reference| + 1e-6 * |reference| per array; gradients
of the references are checked against finite differences."""

import numpy as np
import pytest

from eggnog.kernels import float_layers as fl
from eggnog.kernels import norms
from eggnog.kernels.backend import to_host

RNG = np.random.default_rng(11)


def close(got, ref):
    got, ref = np.asarray(to_host(got), np.float64), np.asarray(ref, np.float64)
    assert got.shape == ref.shape
    assert np.all(np.abs(got - ref) <= 1e-5 * np.abs(ref).max() + 1e-6 * np.abs(ref)), np.abs(got - ref).max()


def f32(*shape, scale=1.0):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


@pytest.mark.parametrize("rows,dim", [(3, 40), (2, 200)])
def test_rmsnorm_forward_and_backward(rows, dim):
    x, w, dy = f32(rows, dim, scale=3.0), f32(dim), f32(rows, dim)
    y, rstd = norms.reference_rmsnorm(x, w)
    dx, dw = norms.reference_rmsnorm_backward(dy, x, w, rstd)
    for forward, backward in ((norms.cpu_rmsnorm, norms.cpu_rmsnorm_backward), (norms.cuda_rmsnorm, norms.cuda_rmsnorm_backward)):
        got_y, got_rstd = forward(x, w)
        close(got_y, y)
        close(got_rstd, rstd)
        got_dx, got_dw = backward(dy, x, w, rstd.astype(np.float32))
        close(got_dx, dx)
        close(got_dw, dw)


def test_rmsnorm_reference_gradient_by_finite_differences():
    x, w, dy = f32(2, 6).astype(np.float64), f32(6).astype(np.float64), f32(2, 6).astype(np.float64)
    _, rstd = norms.reference_rmsnorm(x, w)
    dx, dw = norms.reference_rmsnorm_backward(dy, x, w, rstd)
    loss = lambda xx, ww: float((norms.reference_rmsnorm(xx, ww)[0] * dy).sum())  # noqa: E731
    eps = 1e-6
    for index in [(0, 0), (1, 4)]:
        plus, minus = x.copy(), x.copy()
        plus[index] += eps
        minus[index] -= eps
        assert dx[index] == pytest.approx((loss(plus, w) - loss(minus, w)) / (2 * eps), rel=1e-6, abs=1e-9)
    plus, minus = w.copy(), w.copy()
    plus[3] += eps
    minus[3] -= eps
    assert dw[3] == pytest.approx((loss(x, plus) - loss(x, minus)) / (2 * eps), rel=1e-6, abs=1e-9)


def test_gelu_forward_and_backward():
    x, dy = f32(4, 50, scale=3.0), f32(4, 50)
    ref_y, ref_dx = fl.reference_gelu(x), fl.reference_gelu_backward(dy, x)
    close(fl.cpu_gelu(x), ref_y)
    close(fl.cuda_gelu(x), ref_y)
    close(fl.cpu_gelu_backward(dy, x), ref_dx)
    close(fl.cuda_gelu_backward(dy, x), ref_dx)
    eps = 1e-6
    x64 = x.astype(np.float64)
    numeric = (fl.reference_gelu(x64 + eps) - fl.reference_gelu(x64 - eps)) / (2 * eps)
    assert np.allclose(fl.reference_gelu_backward(np.ones_like(x64), x64), numeric, rtol=1e-6, atol=1e-8)


def test_cross_entropy_bits_and_gradient():
    logits = f32(5, 256, scale=4.0)
    targets = RNG.integers(0, 256, 5).astype(np.uint8)
    loss, grad = fl.reference_cross_entropy(logits, targets)
    uniform, _ = fl.reference_cross_entropy(np.zeros((1, 256)), np.array([7]))
    assert uniform[0] == pytest.approx(8.0)  # 256 equally likely bytes cost 8 bits
    for fn in (fl.cpu_cross_entropy, fl.cuda_cross_entropy):
        got_loss, got_grad = fn(logits, targets)
        close(got_loss, loss)
        close(got_grad, grad)
    eps = 1e-6
    x64 = logits.astype(np.float64)
    for index in [(0, int(targets[0])), (3, int(np.argmax(logits[3])))]:  # gradients well above FD noise
        plus, minus = x64.copy(), x64.copy()
        plus[index] += eps
        minus[index] -= eps
        numeric = (fl.reference_cross_entropy(plus, targets)[0].mean()
                   - fl.reference_cross_entropy(minus, targets)[0].mean()) / (2 * eps)
        assert grad[index] == pytest.approx(numeric, rel=1e-5, abs=1e-8)


def test_embedding_gather_and_scatter_add():
    table, dout = f32(256, 12), f32(6, 12)
    tokens = np.array([3, 255, 3, 0, 9, 3], dtype=np.uint8)  # repeats must accumulate
    ref = fl.reference_embedding(table, tokens)
    close(fl.cpu_embedding(table, tokens), ref)
    close(fl.cuda_embedding(table, tokens), ref)
    grad = fl.reference_embedding_backward(dout, tokens, 256)
    assert np.allclose(grad[3], dout[[0, 2, 5]].sum(axis=0))
    close(fl.cpu_embedding_backward(dout, tokens, 256), grad)
    close(fl.cuda_embedding_backward(dout, tokens, 256), grad)
