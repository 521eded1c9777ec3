"""fp32 element-wise pieces (residual add, bias add, column sum, per-member affine, last scan step):
CPU twin and CUDA kernel (simulator) against the float64 references, shapes off the 256-thread block
(one partial block and two blocks, the second partial).

Tolerance. add, add_bias and last_step must be bit-exact: a copy is exact, one fp32 add is correctly
rounded, and rounding the float64 sum of two fp32 numbers to fp32 gives that same value (53 >= 2*24+2
bits, so the double rounding is innocuous). member_affine and column_sum are checked per element:
|got - ref| <= 1e-6 * mag, where mag is the same computation on absolute values (|x|*|scale| + |shift|,
sum of |x| down a column); fp32's worst case for n roundings is about n * 6e-8 * mag, and n <= 12 here.
"""

import numpy as np
import pytest

from eggnog.kernels import float_elementwise as fe
from tests import helpers
from tests.helpers import host32
from eggnog.kernels.cuda_api import cuda

RNG = np.random.default_rng(17)
RTOL = 1e-6
IMPLEMENTATIONS = ("cpu", "cuda")


def f32(*shape, scale=1.0):
    return helpers.f32(RNG, *shape, scale=scale)


def exact(got, ref):
    got = host32(got)
    assert got.shape == ref.shape
    assert np.array_equal(got, np.asarray(ref).astype(np.float32)), np.abs(got - ref).max()


def close(got, ref, mag):
    helpers.close_scaled(got, ref, mag, RTOL)


def impl(prefix, name):
    return getattr(fe, f"{prefix}_{name}")


@pytest.mark.parametrize("prefix", IMPLEMENTATIONS)
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 50), (1,)])
def test_add(prefix, shape):
    a, b = f32(*shape, scale=3.0), f32(*shape, scale=1e-3)  # mixed magnitudes: the add must round
    ref = fe.reference_add(a, b)
    exact(impl(prefix, "add")(a, b), ref)
    exact(impl(prefix, "add")(b, a), ref)


def test_cuda_add_takes_device_arrays():
    a, b = f32(3, 4, 5), f32(3, 4, 5)
    out = fe.cuda_add(cuda.to_device(a), cuda.to_device(b))
    exact(out, fe.reference_add(a, b))


@pytest.mark.parametrize("prefix", IMPLEMENTATIONS)
@pytest.mark.parametrize("rows,cols", [(3, 7), (13, 23), (1, 1)])
def test_add_bias(prefix, rows, cols):
    x, bias = f32(rows, cols, scale=2.0), f32(cols)
    ref = fe.reference_add_bias(x, bias)
    got = impl(prefix, "add_bias")(x, bias)
    exact(got, ref)
    if rows > 1:  # the same bias on every row, the column's own one
        diff = host32(got).astype(np.float64) - x
        assert np.allclose(diff, diff[0][None, :], rtol=0, atol=1e-6 * np.abs(x).max())
        assert np.allclose(diff[0], bias, rtol=0, atol=1e-6 * np.abs(x).max())


@pytest.mark.parametrize("prefix", IMPLEMENTATIONS)
@pytest.mark.parametrize("rows,cols", [(5, 7), (4, 300), (12, 3), (1, 1)])
def test_column_sum(prefix, rows, cols):
    x = f32(rows, cols, scale=5.0)
    ref = fe.reference_column_sum(x)
    close(impl(prefix, "column_sum")(x), ref, fe.reference_column_sum(np.abs(x)))


@pytest.mark.parametrize("prefix", IMPLEMENTATIONS)
def test_column_sum_of_integers_is_exact(prefix):
    x = RNG.integers(-50, 50, size=(9, 260)).astype(np.float32)  # sums stay far below 2**24
    exact(impl(prefix, "column_sum")(x), x.astype(np.int64).sum(axis=0))


@pytest.mark.parametrize("prefix", IMPLEMENTATIONS)
@pytest.mark.parametrize("members,steps,width", [(3, 5, 7), (2, 11, 13), (1, 1, 1)])
def test_member_affine(prefix, members, steps, width):
    x, scale, shift = f32(members, steps, width, scale=2.0), f32(members, width), f32(members, width)
    ref = fe.reference_member_affine(x, scale, shift)
    mag = fe.reference_member_affine(np.abs(x), np.abs(scale), np.abs(shift))
    close(impl(prefix, "member_affine")(x, scale, shift), ref, mag)


@pytest.mark.parametrize("prefix", IMPLEMENTATIONS)
def test_member_affine_identity_and_constant(prefix):
    members, steps, width = 3, 5, 7
    x = f32(members, steps, width, scale=4.0)
    ones, zeros = np.ones((members, width), np.float32), np.zeros((members, width), np.float32)
    fn = impl(prefix, "member_affine")
    exact(fn(x, ones, zeros), x)  # scale 1, shift 0: identity
    shift = f32(members, width)
    exact(fn(x, zeros, shift), np.broadcast_to(shift[:, None, :], x.shape))  # scale 0: each member's shift
    # each member uses its own scale and no other's: member m scaled by m + 1
    scale = np.repeat(np.arange(1, members + 1, dtype=np.float32)[:, None], width, axis=1)
    exact(fn(x, scale, zeros), x * np.arange(1, members + 1, dtype=np.float32)[:, None, None])


@pytest.mark.parametrize("prefix", IMPLEMENTATIONS)
@pytest.mark.parametrize("batch,steps,width", [(3, 5, 7), (2, 3, 150), (4, 1, 2)])
def test_last_step(prefix, batch, steps, width):
    h = f32(batch, steps, width)
    ref = fe.reference_last_step(h)
    assert np.array_equal(ref, h[:, -1])
    got = impl(prefix, "last_step")(h)
    exact(got, ref)
    assert np.array_equal(host32(got), h[:, steps - 1, :])
    if prefix == "cpu":
        assert got.flags.c_contiguous


def test_cuda_launchers_refuse_mismatched_shapes():
    with pytest.raises(ValueError, match="shape mismatch"):
        fe.cuda_add(f32(4), f32(3))
    with pytest.raises(ValueError, match="shape mismatch"):
        fe.cuda_add_bias(f32(2, 5), f32(4))
    with pytest.raises(ValueError, match="shape mismatch"):
        fe.cuda_member_affine(f32(2, 3, 4), f32(2, 4), f32(3, 4))
    with pytest.raises(ValueError, match="shape mismatch"):
        fe.cuda_last_step(f32(2, 0, 3))
