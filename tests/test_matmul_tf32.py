"""matmul_tf32 beyond the registered cases (which check reference = twin = simulated kernel): its error
against the fp32 product of the unrounded inputs is within the bound its module states and is of TF32
size, not fp32 size; shapes that do not match are refused."""

import numpy as np
import pytest

from eggnog.kernels.layers.matmul_tf32 import cpu_matmul_tf32, cuda_matmul_tf32
from eggnog.runtime.errors import BadInput


def bound(x, w):
    k = x.shape[1]
    return (2.0 ** -10 + 2.0 ** -22 + k * 2.0 ** -24) * (np.abs(x.astype(np.float64)) @ np.abs(w.astype(np.float64)).T)


def exact(x, w):
    return x.astype(np.float64) @ w.astype(np.float64).T


def test_twin_error_is_within_the_stated_bound_and_of_tf32_size():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(64, 1536)).astype(np.float32)
    w = (rng.normal(size=(48, 1536)) / 40).astype(np.float32)
    err = np.abs(cpu_matmul_tf32(x, w) - exact(x, w))
    assert np.all(err <= bound(x, w))
    rms = lambda a: np.sqrt(np.mean(a ** 2))  # noqa: E731
    assert 1e-4 < rms(err) / rms(exact(x, w)) < 1e-3  # TF32 (about 4e-4), not fp32 (about 1e-7)


def test_kernel_error_is_within_the_stated_bound():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(20, 96)).astype(np.float32)
    w = rng.normal(size=(12, 96)).astype(np.float32) * np.float32(1000)
    y = cuda_matmul_tf32(x, w)
    err = np.abs(np.asarray(y.copy_to_host()) - exact(x, w))
    assert np.all(err <= bound(x, w)) and err.max() > 0


@pytest.mark.parametrize("x_shape, w_shape", [((3, 4), (5, 6)), ((4,), (5, 4)), ((2, 3, 4), (5, 4))])
def test_mismatched_shapes_are_refused(x_shape, w_shape):
    x, w = np.zeros(x_shape, np.float32), np.zeros(w_shape, np.float32)
    for fn in (cpu_matmul_tf32, cuda_matmul_tf32):
        with pytest.raises(BadInput, match="linear layer"):
            fn(x, w)
