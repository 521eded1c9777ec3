"""Low-rank member-specific products (EGGROLL): project (x B), project_rows (row gather for a one-hot
input) and expand (y + coef * xb A^T), CPU twin and CUDA kernel (simulator) against float64
references, shapes off the 256-thread block (one partial block and two blocks, the second partial).

Tolerance. project_rows is a gather and must be bit-exact. project and expand are checked per
element: |got - ref| <= 1e-6 * mag, where mag is the same computation on absolute values
(|x| |B|, |y| + |coef| |xb| |A|^T); fp32's worst case for a length-n dot product plus k further
roundings is about (n + k) * 6e-8 * mag, and n + k <= 14 here. The check against explicitly built
perturbed matrices chains fp32 project and expand, so it allows the sum of both (in + rank + 3 <= 12
roundings, still under 1e-6 * mag).
"""

import numpy as np
import pytest

from eggnog.kernels import lowrank as lr
from tests import helpers
from tests.helpers import host32

RNG = np.random.default_rng(23)
RTOL = 1e-6
IMPLEMENTATIONS = ("cpu", "cuda")


def f32(*shape, scale=1.0):
    return helpers.f32(RNG, *shape, scale=scale)


def close(got, ref, mag):
    helpers.close_scaled(got, ref, mag, RTOL)


def impl(prefix, name):
    return getattr(lr, f"{prefix}_{name}")


def tokens_with_extremes(members, steps):
    tokens = RNG.integers(0, 256, size=(members, steps)).astype(np.uint8)
    tokens.flat[0] = 255
    tokens.flat[-1] = 0
    tokens[-1, 0] = 255
    tokens.flat[tokens.size // 2] = 128
    return tokens


@pytest.mark.parametrize("prefix", IMPLEMENTATIONS)
@pytest.mark.parametrize("members,steps,d_in,rank", [(3, 5, 7, 2), (4, 23, 12, 3), (1, 1, 1, 1)])
def test_project(prefix, members, steps, d_in, rank):
    x, b = f32(members, steps, d_in, scale=2.0), f32(members, d_in, rank)
    ref = lr.reference_project(x, b)
    assert ref.shape == (members, steps, rank)
    close(impl(prefix, "project")(x, b), ref, lr.reference_project(np.abs(x), np.abs(b)))


@pytest.mark.parametrize("prefix", IMPLEMENTATIONS)
@pytest.mark.parametrize("members,steps,rank", [(3, 5, 2), (4, 23, 3), (1, 1, 1)])
def test_project_rows(prefix, members, steps, rank):
    tokens, b = tokens_with_extremes(members, steps), f32(members, 256, rank)
    ref = lr.reference_project_rows(tokens, b)
    explicit = np.empty((members, steps, rank))
    for m in range(members):
        for t in range(steps):
            explicit[m, t] = b[m, int(tokens[m, t])]  # member m's own table, never another's
    assert np.array_equal(ref, explicit)
    got = host32(impl(prefix, "project_rows")(tokens, b))
    assert got.shape == ref.shape and np.array_equal(got, ref.astype(np.float32))


@pytest.mark.parametrize("prefix", IMPLEMENTATIONS)
def test_project_rows_is_project_of_one_hot(prefix):
    members, steps, rank = 2, 5, 3
    tokens, b = tokens_with_extremes(members, steps), f32(members, 256, rank)
    one_hot = np.zeros((members, steps, 256), np.float32)
    one_hot[np.arange(members)[:, None], np.arange(steps)[None, :], tokens] = 1.0
    rows = host32(impl(prefix, "project_rows")(tokens, b))
    dense = host32(impl(prefix, "project")(one_hot, b))  # one nonzero term per dot product: exact
    assert np.array_equal(rows, dense)


@pytest.mark.parametrize("prefix", IMPLEMENTATIONS)
@pytest.mark.parametrize("members,steps,width,rank", [(3, 5, 7, 2), (3, 7, 13, 2), (2, 3, 50, 4), (1, 1, 1, 1)])
def test_expand(prefix, members, steps, width, rank):
    y, xb, a = f32(members, steps, width), f32(members, steps, rank, scale=2.0), f32(members, width, rank)
    coef = f32(members, scale=0.5)
    ref = lr.reference_expand(y, xb, a, coef)
    mag = lr.reference_expand(np.abs(y), np.abs(xb), np.abs(a), np.abs(coef))
    close(impl(prefix, "expand")(y, xb, a, coef), ref, mag)


@pytest.mark.parametrize("prefix", IMPLEMENTATIONS)
def test_expand_with_zero_coef_leaves_y_and_antithetic_pairs_cancel(prefix):
    steps, width, rank = 5, 7, 2
    y0, xb0, a0 = f32(steps, width), f32(steps, rank), f32(width, rank)
    y = np.ascontiguousarray(np.stack([y0, y0, y0]))
    xb, a = np.ascontiguousarray(np.stack([xb0] * 3)), np.ascontiguousarray(np.stack([a0] * 3))
    coef = np.array([0.0, 0.75, -0.75], np.float32)  # member 0 unperturbed, members 1 and 2 a +- pair
    got = host32(impl(prefix, "expand")(y, xb, a, coef))
    assert np.array_equal(got[0], y0)
    # the same |delta| rounded either way: (y + d) + (y - d) = 2y within the rounding of the two sums
    mag = np.abs(y0) + 0.75 * (np.abs(xb0) @ np.abs(a0).T)
    assert np.all(np.abs(got[1].astype(np.float64) + got[2] - 2 * y0) <= 2 * RTOL * mag)
    assert not np.array_equal(got[1], y0)


@pytest.mark.parametrize("prefix", IMPLEMENTATIONS)
def test_project_then_expand_equals_explicit_perturbed_matrix(prefix):
    """x (W + coef A B^T)^T, the perturbed matrix built for each member, is what the low-rank path
    computes without ever forming it."""
    members, steps, d_in, d_out, rank = 3, 5, 7, 9, 2
    x, w = f32(members, steps, d_in), f32(d_out, d_in)
    b, a, coef = f32(members, d_in, rank), f32(members, d_out, rank), f32(members)
    y = np.matmul(x.astype(np.float64), w.T.astype(np.float64)).astype(np.float32)  # shared product
    xb = impl(prefix, "project")(x, b)
    got = impl(prefix, "expand")(y, xb, a, coef)
    want, mag = np.empty((members, steps, d_out)), np.empty((members, steps, d_out))
    for m in range(members):
        x64, b64, a64 = x[m].astype(np.float64), b[m].astype(np.float64), a[m].astype(np.float64)
        perturbed = w.astype(np.float64) + float(coef[m]) * (a64 @ b64.T)  # (out, in)
        want[m] = x64 @ perturbed.T
        low_rank = np.abs(x64) @ np.abs(b64) @ np.abs(a64).T
        mag[m] = np.abs(x64) @ np.abs(w.astype(np.float64)).T + abs(float(coef[m])) * low_rank
    close(got, want, mag)


def test_cuda_launchers_refuse_mismatched_shapes():
    with pytest.raises(ValueError, match="shape mismatch"):
        lr.cuda_project(f32(2, 3, 5), f32(2, 4, 1))
    with pytest.raises(ValueError, match="shape mismatch"):
        lr.cuda_project_rows(np.zeros((2, 3), np.uint8), f32(2, 100, 1))
    with pytest.raises(ValueError, match="shape mismatch"):
        lr.cuda_expand(f32(2, 3, 5), f32(2, 3, 1), f32(2, 5, 2), f32(2))
