"""Properties of the low-rank population products (EGGROLL) beyond the generated agreement tests
(tests/test_kernel_ops.py): the row gather reads each member's own table and equals the projection of
a one-hot input, a zero coefficient leaves y alone and an antithetic pair cancels, project-then-expand
equals the explicitly perturbed matrix, and misshaped arguments are refused on every backend.

Tolerance of the comparisons with explicitly built matrices: |got - want| <= 1e-6 * mag per element,
mag the same computation on absolute values; fp32's worst case for a dot product of n terms plus k
further roundings is about (n + k) * 6e-8 * mag, and n + k <= 12 here.
"""

import numpy as np
import pytest

from eggnog.kernels.core.placement import to_host
from eggnog.kernels.core.registry import ops_for
from eggnog.kernels.layers.lowrank import reference_lowrank_project_rows
from eggnog.runtime.errors import BadInput
from tests import helpers

RNG = np.random.default_rng(23)
RTOL = 1e-6
BACKENDS = ("cpu", "cuda")


def f32(*shape, scale=1.0):
    return helpers.f32(RNG, *shape, scale=scale)


def run(backend, name, *args):
    ops = ops_for(backend)
    return np.asarray(to_host(getattr(ops, name)(*(ops.to_device(a) for a in args))))


def tokens_with_extremes(members, steps):
    tokens = RNG.integers(0, 256, size=(members, steps)).astype(np.uint8)
    tokens.flat[0], tokens.flat[-1], tokens[-1, 0] = 255, 0, 255
    return tokens


def test_project_rows_reads_each_members_own_table():
    members, steps, rank = 3, 5, 2
    tokens, b = tokens_with_extremes(members, steps), f32(members, 256, rank)
    explicit = np.empty((members, steps, rank))
    for m in range(members):
        for t in range(steps):
            explicit[m, t] = b[m, int(tokens[m, t])]
    assert np.array_equal(reference_lowrank_project_rows(tokens, b), explicit)


@pytest.mark.parametrize("backend", BACKENDS)
def test_project_rows_is_project_of_one_hot(backend):
    members, steps, rank = 2, 5, 3
    tokens, b = tokens_with_extremes(members, steps), f32(members, 256, rank)
    one_hot = np.zeros((members, steps, 256), np.float32)
    one_hot[np.arange(members)[:, None], np.arange(steps)[None, :], tokens] = 1.0
    rows = run(backend, "lowrank_project_rows", tokens, b)
    assert np.array_equal(rows, run(backend, "lowrank_project", one_hot, b))  # one nonzero term: exact


@pytest.mark.parametrize("backend", BACKENDS)
def test_expand_with_zero_coef_leaves_y_and_antithetic_pairs_cancel(backend):
    steps, width, rank = 5, 7, 2
    y0, xb0, a0 = f32(steps, width), f32(steps, rank), f32(width, rank)
    y, xb, a = (np.ascontiguousarray(np.stack([v] * 3)) for v in (y0, xb0, a0))
    coef = np.array([0.0, 0.75, -0.75], np.float32)  # member 0 unperturbed, members 1 and 2 a +- pair
    got = run(backend, "lowrank_expand", y, xb, a, coef)
    assert np.array_equal(got[0], y0)
    # the same |delta| rounded either way: (y + d) + (y - d) = 2y within the rounding of the two sums
    mag = np.abs(y0) + 0.75 * (np.abs(xb0) @ np.abs(a0).T)
    assert np.all(np.abs(got[1].astype(np.float64) + got[2] - 2 * y0) <= 2 * RTOL * mag)
    assert not np.array_equal(got[1], y0)


@pytest.mark.parametrize("backend", ["numpy", *BACKENDS])
def test_project_then_expand_equals_explicit_perturbed_matrix(backend):
    """x (W + coef A B^T)^T, the perturbed matrix built for each member, is what the low-rank path
    computes without ever forming it."""
    members, steps, d_in, d_out, rank = 3, 5, 7, 9, 2
    x, w = f32(members, steps, d_in), f32(d_out, d_in)
    b, a, coef = f32(members, d_in, rank), f32(members, d_out, rank), f32(members)
    y = np.matmul(x.astype(np.float64), w.T.astype(np.float64)).astype(np.float32)  # shared product
    ops = ops_for(backend)
    xb = ops.lowrank_project(ops.to_device(x), ops.to_device(b))
    got = np.asarray(to_host(ops.lowrank_expand(ops.to_device(y), xb, ops.to_device(a), ops.to_device(coef))))
    want, mag = np.empty((members, steps, d_out)), np.empty((members, steps, d_out))
    for m in range(members):
        x64, b64, a64 = x[m].astype(np.float64), b[m].astype(np.float64), a[m].astype(np.float64)
        perturbed = w.astype(np.float64) + float(coef[m]) * (a64 @ b64.T)  # (out, in)
        want[m] = x64 @ perturbed.T
        mag[m] = np.abs(x64) @ np.abs(w.astype(np.float64)).T + abs(float(coef[m])) * (np.abs(x64) @ np.abs(b64)
                                                                                     @ np.abs(a64).T)
    assert np.all(np.abs(got - want) <= RTOL * mag)


@pytest.mark.parametrize("backend", ["numpy", *BACKENDS])
def test_misshaped_arguments_are_refused(backend):
    ops = ops_for(backend)

    def d(*shape, dtype=np.float32):
        return ops.to_device(np.zeros(shape, dtype))

    with pytest.raises(BadInput, match="lowrank_project: b has d_in = 4"):
        ops.lowrank_project(d(2, 3, 5), d(2, 4, 1))
    with pytest.raises(BadInput, match="256 or more rows"):
        ops.lowrank_project_rows(d(2, 3, dtype=np.uint8), d(2, 100, 1))
    with pytest.raises(BadInput, match="lowrank_expand: a has rank = 2"):
        ops.lowrank_expand(d(2, 3, 5), d(2, 3, 1), d(2, 5, 2), d(2))
