"""On a real GPU, the memory meter's own figure follows numba's device allocations: with exact
counting (installed before the CUDA context, so in a fresh process) the peak of a window sees an
array freed inside it and a reset forgets it; without counting, a sample sees the live arrays."""

import os
import subprocess
import sys

from tests.helpers import ROOT

SCRIPT = """
import gc
import numpy as np
from eggnog.kernels.core.backend import select_backend
from eggnog.kernels.core.cuda_api import cuda
from eggnog.training.memory import MemoryMeter, count_device_allocations

MIB = 2**20
if {count}:
    count_device_allocations()
meter = MemoryMeter(select_backend("cuda"))
assert meter.counting == {count}
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
print("ok", meter.sources())
"""


def run(count):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", SCRIPT.format(count=count)], capture_output=True, text=True,
                          env=env, timeout=300)


def test_exact_count():
    result = run(True)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr


def test_sampled_live_bytes():
    result = run(False)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr
