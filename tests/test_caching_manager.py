"""The exact device-allocation counter of training/memory.py over numba's real memory manager (not the
simulator's, which has none), with only the device calls replaced: memalloc hands back an owner over a
weak proxy, as on a GPU, and the counter must follow the pointer numba frees. Run in a process of its
own, since the real CUDA target cannot load beside the simulator."""

import os
import subprocess
import sys

from tests.helpers import ROOT

SCRIPT = """
import gc
import logging
import types
from numba.cuda.cudadrv import driver as numba_driver
from eggnog.training.memory import counting_manager

numba_driver.driver = types.SimpleNamespace(cuMemFree=lambda handle: None)  # no device to free on
numba_driver._logger = logging.getLogger("numba.cuda.cudadrv.driver")  # set when a driver loads


class WithoutDevice(numba_driver.NumbaCUDAMemoryManager):
    handle = 1 << 20

    def _attempt_allocation(self, allocator):  # a fresh number instead of cuMemAlloc
        WithoutDevice.handle += 1 << 20
        return WithoutDevice.handle


class Context:
    pass


context = Context()
manager = counting_manager(WithoutDevice)(context=context)
with manager.deallocations.disable():
    kept = manager.memalloc(100)
    temporary = manager.memalloc(400)
    assert (manager.live, manager.peak) == (500, 500), (manager.live, manager.peak)
    del temporary
    gc.collect()
    assert (manager.live, manager.peak) == (100, 500), (manager.live, manager.peak)
    del kept
    gc.collect()
    assert manager.live == 0, manager.live
print("ok")
"""


def test_counter_follows_the_pointer_numba_frees():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok" and not result.stderr.strip(), result.stderr
