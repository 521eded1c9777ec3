"""The device counts (kernels/core/device_counts.py) on the simulator: each kind of request is counted
once, where it happens, and only inside a window; an allocation the device cache
(kernels/core/device_pool.py) serves from a freed block is none."""

import numpy as np
import pytest

from eggnog.kernels.core.cuda_api import SIMULATED, cuda
from eggnog.kernels.core.device_counts import counting
from eggnog.kernels.core.device_pool import SIMULATED_CACHE
from eggnog.kernels.optim.float_steps import sgd_step_cuda


@pytest.fixture(autouse=True)
def empty_cache():
    SIMULATED_CACHE.clear()  # blocks freed by earlier tests would serve the requests counted here


def _step(p, buf, grad):
    """A package kernel (launched with its registered signature): p -= grad, buf = grad."""
    sgd_step_cuda[1, 8](p, buf, grad, np.float32(1), np.float32(0), np.float32(0), True)


def test_every_request_is_counted_once():
    assert SIMULATED
    host = np.zeros(8, np.float32)
    with counting() as counts:
        device = cuda.to_device(host)  # an allocation and an upload
        empty = cuda.device_array((4, 2), np.float32)  # an allocation
        like = cuda.device_array_like(empty)  # an allocation
        cuda.to_device(host, to=device)  # an upload into an existing array
        grad = cuda.to_device(np.ones(8, np.float32))  # an allocation and an upload
        _step(device, empty.reshape(8), grad)
        _step(device, host, grad)  # a host array: allocated, uploaded, copied back (a wait)
        device.copy_to_host()  # a wait
        cuda.synchronize()  # a wait
    assert counts.as_dict() == {"launches": 2, "allocations": 5, "allocated_bytes": 5 * 256, "uploads": 4,
                                "uploaded_bytes": 4 * 32, "host_waits": 3, "by_kernel": {"sgd_step_cuda": 2}}
    np.testing.assert_array_equal(host, 1)
    np.testing.assert_array_equal(device.copy_to_host(), -2)
    assert like.shape == (4, 2)


def test_a_device_to_device_copy_is_no_upload():
    """Copying between device arrays moves nothing over the bus: not an upload, whichever call makes it."""
    source, target = cuda.to_device(np.arange(8, dtype=np.float32)), cuda.device_array(8, np.float32)
    with counting() as counts:
        target.copy_to_device(source)
        np.testing.assert_array_equal(target.copy_to_host(), np.arange(8))  # a wait
        cuda.to_device(source, to=target)
        copied = cuda.to_device(source)
    assert (counts.uploads, counts.uploaded_bytes, counts.host_waits) == (0, 0, 1), counts
    np.testing.assert_array_equal(copied.copy_to_host(), np.arange(8))
    with counting() as counts:  # the same calls from the host are uploads
        target.copy_to_device(np.ones(8, np.float32))
        cuda.to_device(np.ones(8, np.float32), to=target)
    assert (counts.uploads, counts.uploaded_bytes) == (2, 2 * 32), counts


def test_a_freed_block_serves_the_next_request_of_its_size():
    freed = cuda.device_array(64, np.float32)
    del freed
    with counting() as counts:
        reused = cuda.device_array((8, 8), np.float32)  # 256 bytes: the freed block
        reused[...] = 1
        bigger = cuda.to_device(np.zeros(65, np.float32))  # 260 bytes: a block of 512, new
    assert (counts.allocations, counts.allocated_bytes, counts.uploads) == (1, 512, 1)
    view = reused[2:]
    del reused
    with counting() as counts:
        other = cuda.device_array(64, np.float32)  # the view still holds the freed array's block
        other[...] = 2
    assert counts.allocations == 1
    np.testing.assert_array_equal(view.copy_to_host(), 1)
    np.testing.assert_array_equal(bigger.copy_to_host(), 0)


def test_windows_nest_and_count_only_while_open():
    with counting() as outer:
        cuda.device_array(4, np.int8)
        with counting() as inner:
            cuda.synchronize()
    cuda.synchronize()
    assert (outer.allocations, outer.host_waits) == (1, 1)
    assert (inner.allocations, inner.host_waits) == (0, 1)


def test_counts_need_the_simulator(monkeypatch):
    from eggnog.kernels.core import device_counts

    monkeypatch.setattr(device_counts, "_installed", False)
    with pytest.raises(RuntimeError, match="simulator"):
        with counting():
            pass


def test_a_trace_lists_each_launch_as_the_static_model_takes_it_and_each_wait():
    from eggnog.kernels.core.device_counts import tracing

    p, buf, grad = (cuda.to_device(np.full(8, v, np.float32)) for v in (0, 0, 1))
    with tracing() as launches:
        _step(p, buf, grad)
        p.copy_to_host()
    assert launches == [{"kernel": "eggnog.kernels.optim.float_steps.sgd_step_cuda", "grid": 1, "block": 8,
                         "shared": 0, "args": [{"shape": [8], "dtype": "float32"}] * 3 + [1.0, 0.0, 0.0, True]},
                        {"wait": True}]
    np.testing.assert_array_equal(p.copy_to_host(), -1)


def test_a_trace_that_runs_no_kernel_leaves_new_memory_zero_filled():
    from eggnog.kernels.core import device_pool
    from eggnog.kernels.core.device_counts import kernels_run, tracing

    grad, buf = cuda.to_device(np.ones(64, np.float32)), cuda.to_device(np.zeros(64, np.float32))
    old = cuda.to_device(np.full(64, np.nan, np.float32))
    del old  # its block, NaN-filled, serves the next request of its size
    with tracing(run=False) as launches, counting() as counts:
        p = cuda.device_array(64, np.float32)
        _step(p, buf, grad)
        assert not kernels_run() and device_pool.ZERO_FILLED
    assert kernels_run() and not device_pool.ZERO_FILLED
    assert len(launches) == 1 and counts.launches == 1 and counts.allocations == 0  # p: the freed block
    np.testing.assert_array_equal(p.copy_to_host(), 0)  # not run: neither NaN nor -1
    np.testing.assert_array_equal(buf.copy_to_host(), 0)


def test_a_launch_argument_the_model_cannot_take_is_refused():
    from eggnog.kernels.core.device_counts import _traced_argument

    assert _traced_argument(np.int32(3)) == 3 and _traced_argument(np.float32(0.5)) == 0.5
    with pytest.raises(TypeError, match="cannot be traced"):
        _traced_argument("text")
