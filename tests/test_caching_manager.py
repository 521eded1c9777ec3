"""The caching memory manager of kernels/core/device_pool.py over numba's real memory manager (not the
simulator's, which has none), with only the device calls replaced: a freed array's block is handed out
again instead of a new allocation, a view keeps its block leased, the live and peak bytes follow the
arrays, and running out of memory empties the cache before the one retry. Run in a process of its own,
since the real CUDA target cannot load beside the simulator."""

import os
import subprocess
import sys

from tests.helpers import ROOT

SCRIPT = """
import gc
import logging
import types
from numba.cuda.cudadrv import driver as numba_driver
from eggnog.kernels.core.device_pool import caching_manager_class

numba_driver.driver = types.SimpleNamespace(cuMemFree=lambda handle: None)  # no device to free on
numba_driver._logger = logging.getLogger("numba.cuda.cudadrv.driver")  # set when a driver loads
OOM = numba_driver.binding.CUresult.CUDA_ERROR_OUT_OF_MEMORY


class WithoutDevice(numba_driver.NumbaCUDAMemoryManager):
    handle, allocated, fail = 1 << 20, 0, False

    def _attempt_allocation(self, allocator):  # a fresh number instead of cuMemAlloc
        if WithoutDevice.fail:
            WithoutDevice.fail = False
            raise numba_driver.CudaAPIError(OOM, "out of memory")
        WithoutDevice.handle += 1 << 20
        WithoutDevice.allocated += 1
        return WithoutDevice.handle


class Context:
    pass


def address(memory):
    return int(memory.device_pointer)


manager = caching_manager_class(WithoutDevice)(context=Context())
with manager.deallocations.disable():
    kept = manager.memalloc(100)
    temporary = manager.memalloc(400)
    first = address(temporary)
    assert (manager.live, manager.peak, WithoutDevice.allocated) == (768, 768, 2)
    del temporary
    gc.collect()
    assert (manager.live, manager.peak, manager.cache.cached_bytes) == (256, 768, 512)
    again = manager.memalloc(300)  # rounded up to the freed block's 512 bytes: that block
    assert (address(again), WithoutDevice.allocated, manager.cache.hits) == (first, 2, 1)
    view = again.view(8, 64)
    del again
    gc.collect()
    assert manager.cache.cached_bytes == 0 and manager.live == 768  # the view keeps the block leased
    del view
    gc.collect()
    assert manager.cache.cached_bytes == 512 and manager.live == 256
    WithoutDevice.fail = True
    bigger = manager.memalloc(4096)  # out of memory once: the cache is emptied, then it is allocated
    assert (manager.cache.cached_bytes, WithoutDevice.allocated, manager.live) == (0, 3, 256 + 4096)
    del kept, bigger
    gc.collect()
    assert manager.live == 0
print("ok")
"""


def test_freed_blocks_are_reused_and_counted():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok" and not result.stderr.strip(), result.stderr
