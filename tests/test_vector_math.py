"""The CPU twins' vectorisable exp, sigmoid, tanh and normal CDF against float64, with the bounds their
module states."""

import math

import numba
import numpy as np
import pytest

from eggnog.kernels.core.cpu_vector_math import exp32, normal_cdf32, sigmoid32, tanh32


def _loop(function):
    @numba.njit(error_model="numpy")
    def apply(x, out):
        for i in range(x.size):
            out[i] = function(x[i])

    def run(x):
        out = np.empty_like(x)
        apply(x, out)
        return out

    return run


def _grid(lo, hi):
    rng = np.random.default_rng(5)
    return np.concatenate([np.linspace(lo, hi, 400_001), rng.uniform(lo, hi, 100_000),
                           np.linspace(-1e-3, 1e-3, 2001), [0.0, -0.0]]).astype(np.float32)


def _relative(got, want):
    return np.abs(got.astype(np.float64) - want) / np.maximum(np.abs(want), 1e-300)


@pytest.mark.parametrize("name, function, reference, lo, hi", [
    ("exp", exp32, np.exp, -87.0, 88.0),
    ("sigmoid", sigmoid32, lambda x: 1.0 / (1.0 + np.exp(-x)), -80.0, 80.0),
    ("tanh", tanh32, np.tanh, -40.0, 40.0),
])
def test_relative_error_at_most_2e_7(name, function, reference, lo, hi):
    x = _grid(lo, hi)
    error = _relative(_loop(function)(x), reference(x.astype(np.float64)))
    assert error.max() <= 2e-7, f"{name}: worst relative error {error.max():.3g} at x = {x[error.argmax()]}"


def test_normal_cdf_within_its_stated_bound():
    x = np.concatenate([np.linspace(-12.0, 12.0, 200_001), np.linspace(-1e-3, 1e-3, 2001)]).astype(np.float32)
    want = np.array([0.5 * math.erfc(-float(v) / math.sqrt(2.0)) for v in x])
    error = _relative(_loop(normal_cdf32)(x), want)
    bound = 6e-7 * (1.0 + x.astype(np.float64) ** 2 / 4.0)
    assert np.all(error <= bound), f"worst relative error {error.max():.3g} at x = {x[(error / bound).argmax()]}"
    assert error[np.abs(x) < 1.0].max() > 1e-8  # an fp32 computation, not a float64 one


def test_ends_of_the_range_and_nan():
    x = np.array([-np.inf, -1e30, 100.0, np.inf, np.nan], np.float32)
    sig, tanh, exp, cdf = _loop(sigmoid32)(x), _loop(tanh32)(x), _loop(exp32)(x), _loop(normal_cdf32)(x)
    assert np.all(sig[:2] < 1e-37) and np.all(sig[2:4] == 1.0)
    assert list(tanh[:4]) == [-1.0, -1.0, 1.0, 1.0]
    assert exp[0] < 2e-38 and np.isfinite(exp[3]) and exp[3] > 1e38
    assert np.all(cdf[:2] < 1e-37) and np.all(cdf[2:4] == 1.0)
    assert np.isnan(sig[4]) and np.isnan(tanh[4]) and np.isnan(exp[4]) and np.isnan(cdf[4])
