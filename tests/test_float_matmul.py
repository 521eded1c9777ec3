"""fp32 linear-layer products: forward and both backward products, CPU twin and tiled CUDA kernel
(simulator) against float64; tolerance 1e-5 of the largest reference entry. Shapes off the tile."""

import numpy as np
import pytest

from eggnog.kernels import float_matmul as fm
from eggnog.kernels.backend import to_host

RNG = np.random.default_rng(5)


def close(got, ref):
    got = np.asarray(to_host(got), np.float64)
    assert got.shape == ref.shape and np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()


@pytest.mark.parametrize("rows,d_in,d_out", [(5, 20, 17), (16, 16, 16), (3, 40, 33)])
def test_forward_and_backward_products(rows, d_in, d_out):
    x = RNG.normal(size=(rows, d_in)).astype(np.float32)
    w = RNG.normal(size=(d_out, d_in)).astype(np.float32)
    dy = RNG.normal(size=(rows, d_out)).astype(np.float32)
    y = fm.reference_forward(x, w)
    dx, dw = fm.reference_backward(dy, x, w)
    for forward, backward in ((fm.cpu_forward, fm.cpu_backward), (fm.cuda_forward, fm.cuda_backward)):
        close(forward(x, w), y)
        got_dx, got_dw = backward(dy, x, w)
        close(got_dx, dx)
        close(got_dw, dw)


def test_backward_is_the_gradient_of_the_forward():
    x, w = RNG.normal(size=(4, 6)), RNG.normal(size=(3, 6))
    dy = RNG.normal(size=(4, 3))
    dx, dw = fm.reference_backward(dy, x, w)
    eps = 1e-6
    plus, minus = w.copy(), w.copy()
    plus[2, 5] += eps
    minus[2, 5] -= eps
    numeric = ((fm.reference_forward(x, plus) - fm.reference_forward(x, minus)) * dy).sum() / (2 * eps)
    assert dw[2, 5] == pytest.approx(numeric, rel=1e-6)
    plus, minus = x.copy(), x.copy()
    plus[1, 0] += eps
    minus[1, 0] -= eps
    numeric = ((fm.reference_forward(plus, w) - fm.reference_forward(minus, w)) * dy).sum() / (2 * eps)
    assert dx[1, 0] == pytest.approx(numeric, rel=1e-6)
