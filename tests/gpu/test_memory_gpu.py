"""On a real GPU, the memory meter's own figure follows the device arrays exactly, through the caching
memory manager (kernels/core/device_pool.py): the peak of a window sees an array freed inside it, a
reset forgets it, and a freed array's block serves the next array of its size."""

import os
import subprocess
import sys

from tests.helpers import ROOT

SCRIPT = """
import gc
import numpy as np
from eggnog.kernels.core.backend import select_backend
from eggnog.kernels.core.cuda_api import cuda
from eggnog.training.memory import MemoryMeter

MIB = 2**20
meter = MemoryMeter(select_backend("cuda"))
manager = cuda.current_context().memory_manager
kept = cuda.device_array(16 * MIB, np.uint8)
temporary = cuda.device_array(64 * MIB, np.uint8)
meter.sample()
del temporary
gc.collect()
own = meter.peaks()["peak_own_bytes"]
assert own >= 80 * MIB, own
meter.reset()
after = meter.peaks()["peak_own_bytes"]
assert 16 * MIB <= after < 80 * MIB, after
process = meter.peaks()["peak_process_bytes"]
assert process is None or process >= 16 * MIB, process
misses = manager.cache.misses
again = cuda.device_array(64 * MIB, np.uint8)
assert manager.cache.misses == misses, "the freed 64 MiB block was not reused"
print("ok", meter.sources())
"""


def test_exact_count_and_reuse():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr
