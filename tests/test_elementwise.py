"""Properties of the element-wise kernels beyond the generated agreement tests (tests/test_kernel_ops.py):
one fp32 operation is correctly rounded, so add, add_bias, accumulate and scale_rows equal the float64
result rounded to fp32 bit for bit (rounding the exact float64 sum or product of two fp32 numbers to
fp32 gives the fp32 result: 53 >= 2 * 24 + 2 bits); sums of small integers are exact; each population
member gets its own affine map; windows copy only themselves; misshaped arguments are refused."""

import numpy as np
import pytest

from eggnog.kernels.core.placement import to_host
from eggnog.kernels.core.registry import ops_for
from eggnog.runtime.errors import BadInput

RNG = np.random.default_rng(17)
BACKENDS = ("cpu", "cuda")


def f32(*shape, scale=1.0):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


def run(backend, name, *args):
    ops = ops_for(backend)
    return getattr(ops, name)(*(ops.to_device(a) if isinstance(a, np.ndarray) else a for a in args))


def host(result):
    got = np.asarray(to_host(result))
    assert got.dtype == np.float32
    return got


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_fp32_operation_is_correctly_rounded(backend):
    a, b = f32(3, 90, scale=3.0), f32(3, 90, scale=1e-3)  # mixed magnitudes: every result rounds
    scale, bias = f32(3, scale=1e-3), f32(90, scale=1e-3)
    exact = {"add": a.astype(np.float64) + b, "add_bias": a.astype(np.float64) + bias,
             "scale_rows": a.astype(np.float64) * scale[:, None]}
    assert np.array_equal(host(run(backend, "add", a, b)), exact["add"].astype(np.float32))
    assert np.array_equal(host(run(backend, "add", b, a)), exact["add"].astype(np.float32))
    assert np.array_equal(host(run(backend, "add_bias", a, bias)), exact["add_bias"].astype(np.float32))
    assert np.array_equal(host(run(backend, "scale_rows", a, scale)), exact["scale_rows"].astype(np.float32))
    ops = ops_for(backend)
    dst = ops.to_device(a)
    ops.accumulate(dst, ops.to_device(b))
    assert np.array_equal(host(dst), exact["add"].astype(np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_column_sum_of_integers_is_exact(backend):
    x = RNG.integers(-50, 50, size=(9, 260)).astype(np.float32)  # sums stay far below 2**24
    assert np.array_equal(host(run(backend, "column_sum", x)), x.astype(np.int64).sum(axis=0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_member_gets_its_own_affine_map(backend):
    members, steps, width = 3, 5, 7
    x = f32(members, steps, width, scale=4.0)
    ones, zeros = np.ones((members, width), np.float32), np.zeros((members, width), np.float32)
    assert np.array_equal(host(run(backend, "member_affine", x, ones, zeros)), x)  # identity
    shift = f32(members, width)
    constant = host(run(backend, "member_affine", x, zeros, shift))
    assert np.array_equal(constant, np.broadcast_to(shift[:, None, :], x.shape))
    scale = np.repeat(np.arange(1, members + 1, dtype=np.float32)[:, None], width, axis=1)
    scaled = host(run(backend, "member_affine", x, scale, zeros))
    assert np.array_equal(scaled, x * np.arange(1, members + 1, dtype=np.float32)[:, None, None])


@pytest.mark.parametrize("backend", BACKENDS)
def test_last_step_is_a_contiguous_copy_of_the_last_step(backend):
    h = f32(2, 5, 9)
    got = run(backend, "last_step", h)
    assert np.array_equal(host(got), h[:, 4]) and got.shape == (2, 9)
    if backend == "cpu":
        assert got.flags.c_contiguous


@pytest.mark.parametrize("backend", ["numpy", *BACKENDS])
def test_copy_window_writes_only_its_window(backend):
    ops = ops_for(backend)
    src, before = f32(6, 8), f32(5, 7)
    dst = ops.to_device(before)
    ops.copy_window(ops.to_device(src), dst, 1, 2, 3, 0, 2, 4)
    want = before.copy()
    want[3:5, 0:4] = src[1:3, 2:6]
    assert np.array_equal(np.asarray(ops.to_host(dst), np.float32), want)


@pytest.mark.parametrize("backend", ["numpy", *BACKENDS])
def test_misshaped_arguments_are_refused(backend):
    ops = ops_for(backend)
    d = ops.to_device
    refusals = [
        (lambda: ops.add(d(f32(4)), d(f32(3))), "add: b has shape"),
        (lambda: ops.add_bias(d(f32(2, 5)), d(f32(4))), "add_bias: bias has d = 4"),
        (lambda: ops.member_affine(d(f32(2, 3, 4)), d(f32(2, 4)), d(f32(3, 4))),
         "member_affine: shift has members = 3"),
        (lambda: ops.last_step(d(f32(2, 0, 3))), "last_step takes"),
        (lambda: ops.accumulate(d(f32(3, 4)), d(f32(4, 3))), "accumulate: src has shape"),
        (lambda: ops.scale_rows(d(f32(3, 4)), d(f32(4))), "scale_rows: scale has rows = 4"),
        (lambda: ops.copy_window(d(f32(4, 4)), d(f32(4, 4)), 0, 1, 0, 0, 2, 4), "does not fit"),
        (lambda: ops.copy_window(d(f32(4, 4)), d(f32(4, 4)), 0, 0, 3, 0, 2, 4), "does not fit"),
    ]
    for call, message in refusals:
        with pytest.raises(BadInput, match=message):
            call()
