"""Device counts and traces at their edges (test_device_counts.py has the main cases): a launch's dynamic
shared memory in its trace whatever the launch configuration gives, mapped (pinned) host memory counted as an
allocation and not an upload, and launches counted by a kernel's own name."""

import numpy as np
import pytest

from eggnog.kernels.core.cuda_api import cuda
from eggnog.kernels.core.device_counts import counting, note_launch, tracing
from eggnog.kernels.core.device_pool import SIMULATED_CACHE
from eggnog.kernels.optim.float_steps import sgd_step_cuda


@pytest.fixture(autouse=True)
def empty_cache():
    SIMULATED_CACHE.clear()


def arrays():
    return [cuda.to_device(np.full(8, v, np.float32)) for v in (0, 0, 1)]


@pytest.mark.parametrize("config, shared", [((1, 8), 0), ((1, 8, 0), 0), ((1, 8, 0, 64), 64)])
def test_a_trace_gives_the_launchs_dynamic_shared_memory(config, shared):
    p, buf, grad = arrays()
    with tracing() as launches:
        sgd_step_cuda[config](p, buf, grad, np.float32(1), np.float32(0), np.float32(0), True)
    assert [launch["shared"] for launch in launches] == [shared]
    np.testing.assert_array_equal(p.copy_to_host(), -1)


def test_mapped_host_memory_is_an_allocation_not_an_upload():
    with counting() as counts:
        mapped = cuda.mapped_array(16, np.float32)
    assert mapped.shape == (16,)
    assert (counts.allocations, counts.allocated_bytes, counts.uploads, counts.uploaded_bytes) == (1, 64, 0, 0)


def test_launches_are_counted_by_the_kernels_own_name():
    with counting() as counts:
        note_launch("plain", [], (1, 1))
        note_launch("package.module.fused", [], (1, 1))
    assert counts.by_kernel == {"plain": 1, "fused": 1} and counts.launches == 2
