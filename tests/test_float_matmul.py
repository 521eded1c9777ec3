"""Properties of the fp32 matrix products beyond the generated agreement tests
(tests/test_kernel_ops.py): the reference backward is the gradient of the forward (finite
differences), the batched product's transposes mean what they say, and misshaped arguments are
refused on every backend."""

import numpy as np
import pytest

from eggnog.kernels.core.registry import ops_for
from eggnog.kernels.layers.matmul import reference_bmm, reference_matmul, reference_matmul_backward
from eggnog.runtime.errors import BadInput

RNG = np.random.default_rng(5)


def test_backward_is_the_gradient_of_the_forward():
    x, w, dy = RNG.normal(size=(4, 6)), RNG.normal(size=(3, 6)), RNG.normal(size=(4, 3))
    dx, dw = reference_matmul_backward(dy, x, w)
    eps = 1e-6
    for grad, which, index in ((dw, "w", (2, 5)), (dx, "x", (1, 0))):
        plus, minus = {"x": x.copy(), "w": w.copy()}, {"x": x.copy(), "w": w.copy()}
        plus[which][index] += eps
        minus[which][index] -= eps
        numeric = ((reference_matmul(**plus) - reference_matmul(**minus)) * dy).sum() / (2 * eps)
        assert grad[index] == pytest.approx(numeric, rel=1e-6)


def test_bmm_transposes_each_operand_of_each_batch_entry():
    a, b = RNG.normal(size=(2, 3, 4)), RNG.normal(size=(2, 4, 5))
    a_t, b_t = np.ascontiguousarray(a.transpose(0, 2, 1)), np.ascontiguousarray(b.transpose(0, 2, 1))
    for n in range(2):
        want = a[n] @ b[n]
        assert np.allclose(reference_bmm(a, b)[n], want)
        assert np.allclose(reference_bmm(a_t, b, transpose_a=True)[n], want)
        assert np.allclose(reference_bmm(a, b_t, transpose_b=True)[n], want)
        assert np.allclose(reference_bmm(a_t, b_t, True, True)[n], want)


@pytest.mark.parametrize("backend", ["numpy", "cpu", "cuda"])
def test_misshaped_arguments_are_refused(backend):
    ops = ops_for(backend)

    def d(*shape):
        return ops.to_device(np.zeros(shape, np.float32))

    with pytest.raises(BadInput, match="matmul: w has d_in = 6"):
        ops.matmul(d(4, 5), d(3, 6))
    with pytest.raises(BadInput, match="matmul_backward: w has d_out = 3"):
        ops.matmul_backward(d(4, 2), d(4, 5), d(3, 5))
    with pytest.raises(BadInput, match="batch or inner sizes differ"):
        ops.bmm(d(2, 3, 4), d(2, 3, 5))
    with pytest.raises(BadInput, match="bmm: b has batch = 1"):
        ops.bmm(d(2, 3, 4), d(1, 4, 5))
