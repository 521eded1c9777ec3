"""Properties of the fp32 layer kernels that the generated agreement tests (tests/test_kernel_ops.py)
cannot see: the references' gradients equal central finite differences (RMSNorm, GELU, sigmoid/tanh,
row softmax, cross-entropy), cross-entropy is in bits, a repeated token sums its embedding gradients,
and misshaped arguments are refused on every backend."""

import numpy as np
import pytest

from eggnog.kernels.core.registry import ops_for
from eggnog.kernels.layers.activations import (
    SIGMOID,
    TANH,
    reference_activation,
    reference_activation_backward,
    reference_gelu,
    reference_gelu_backward,
)
from eggnog.kernels.layers.losses import reference_cross_entropy
from eggnog.kernels.layers.norms import reference_rmsnorm, reference_rmsnorm_backward
from eggnog.kernels.layers.softmax_rows import reference_softmax_rows, reference_softmax_rows_backward
from eggnog.runtime.errors import BadInput

RNG = np.random.default_rng(11)
EPS = 1e-6


def numeric_gradient(loss, x, index):
    plus, minus = x.copy(), x.copy()
    plus[index] += EPS
    minus[index] -= EPS
    return (loss(plus) - loss(minus)) / (2 * EPS)


def test_rmsnorm_reference_gradient_by_finite_differences():
    x, w, dy = RNG.normal(size=(2, 6)), RNG.normal(size=6), RNG.normal(size=(2, 6))
    dx, dw = reference_rmsnorm_backward(dy, x, w, reference_rmsnorm(x, w)[1])
    for index in [(0, 0), (1, 4)]:
        numeric = numeric_gradient(lambda xx: float((reference_rmsnorm(xx, w)[0] * dy).sum()), x, index)
        assert dx[index] == pytest.approx(numeric, rel=1e-6, abs=1e-9)
    numeric = numeric_gradient(lambda ww: float((reference_rmsnorm(x, ww)[0] * dy).sum()), w, 3)
    assert dw[3] == pytest.approx(numeric, rel=1e-6, abs=1e-9)


def test_gelu_reference_gradient_by_finite_differences():
    x = RNG.normal(size=(4, 50)) * 3.0
    numeric = (reference_gelu(x + EPS) - reference_gelu(x - EPS)) / (2 * EPS)
    assert np.allclose(reference_gelu_backward(np.ones_like(x), x), numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("kind", [SIGMOID, TANH])
def test_activation_reference_gradient_from_the_output(kind):
    x = RNG.normal(size=(3, 7)) * 2.0
    numeric = (reference_activation(x + EPS, kind) - reference_activation(x - EPS, kind)) / (2 * EPS)
    slope = reference_activation_backward(np.ones_like(x), reference_activation(x, kind), kind)
    assert np.allclose(slope, numeric, rtol=1e-6, atol=1e-9)


def test_softmax_rows_reference_gradient_by_finite_differences():
    x, dp = RNG.normal(size=(3, 5)), RNG.normal(size=(3, 5))
    dx = reference_softmax_rows_backward(dp, reference_softmax_rows(x))
    assert np.allclose(reference_softmax_rows(x).sum(axis=1), 1.0)
    for index in [(0, 0), (2, 4), (1, 2)]:
        numeric = numeric_gradient(lambda xx: float((reference_softmax_rows(xx) * dp).sum()), x, index)
        assert dx[index] == pytest.approx(numeric, rel=1e-6, abs=1e-9)


def test_cross_entropy_is_in_bits_and_its_gradient_is_that_of_the_mean():
    uniform, _ = reference_cross_entropy(np.zeros((1, 256)), np.array([7], np.uint8))
    assert uniform[0] == pytest.approx(8.0)  # 256 equally likely bytes cost 8 bits
    logits = RNG.normal(size=(5, 256)) * 4.0
    targets = RNG.integers(0, 256, 5).astype(np.uint8)
    _, grad = reference_cross_entropy(logits, targets)
    for index in [(0, int(targets[0])), (3, int(np.argmax(logits[3])))]:  # gradients well above FD noise
        numeric = numeric_gradient(lambda z: float(reference_cross_entropy(z, targets)[0].mean()), logits, index)
        assert grad[index] == pytest.approx(numeric, rel=1e-5, abs=1e-8)


@pytest.mark.parametrize("backend", ["numpy", "cpu", "cuda"])
def test_a_repeated_token_sums_its_embedding_gradients(backend):
    ops = ops_for(backend)
    dout = RNG.normal(size=(6, 12)).astype(np.float32)
    tokens = np.array([3, 255, 3, 0, 9, 3], dtype=np.uint8)
    grad = ops.to_host(ops.embedding_backward(ops.to_device(dout), ops.to_device(tokens), 256))
    assert np.allclose(grad[3], dout[[0, 2, 5]].astype(np.float64).sum(axis=0), rtol=1e-6, atol=1e-6)
    assert np.array_equal(grad[255], dout[1]) and not grad[[1, 2, 4, 254]].any()


@pytest.mark.parametrize("backend", ["numpy", "cpu", "cuda"])
def test_misshaped_arguments_are_refused(backend):
    ops = ops_for(backend)
    logits = ops.to_device(np.zeros((4, 256), np.float32))
    table = ops.to_device(np.zeros((256, 8), np.float32))
    with pytest.raises(BadInput, match="cross_entropy: targets has rows = 3"):
        ops.cross_entropy(logits, ops.to_device(np.zeros(3, np.uint8)))
    with pytest.raises(BadInput, match="embedding: tokens must have 1 axes"):
        ops.embedding(table, ops.to_device(np.zeros((2, 3), np.uint8)))
    with pytest.raises(BadInput, match="embedding_backward: tokens has n = 4"):
        ops.embedding_backward(ops.to_device(np.zeros((5, 8), np.float32)), ops.to_device(np.zeros(4, np.uint8)), 256)
