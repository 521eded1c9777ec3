"""The per-kernel timer of the profile (kernels/core/kernel_timer.py), on the simulator: with
EGGNOG_KERNEL_TIMES=1 every recorded kernel's launches are counted by name and their events summed (the
simulator's events time nothing: -1 ms each), results are unchanged, and a collect forgets what it
returned. Without the variable, kernels are not wrapped. Each case in a process of its own, since the
variable is read when the kernel modules are imported."""

import json
import os
import subprocess
import sys

from tests.helpers import ROOT

SCRIPT = """
import json
import numpy as np
from eggnog.kernels.core import kernel_timer
from eggnog.kernels.core.cuda_api import cuda
from eggnog.kernels.rnn import scan

k, u = (np.random.default_rng(i).normal(size=(1, 8, 4)).astype(np.float32) for i in range(2))
out = scan.cuda_scan_forward(cuda.to_device(k), cuda.to_device(u)).copy_to_host()
np.testing.assert_allclose(out, scan.reference_scan_forward(k, u), rtol=1e-5, atol=1e-6)
first = kernel_timer.collect(cuda)
print(json.dumps({"wrapped": isinstance(scan.forward_carry_cuda, kernel_timer.TimedKernel), "first": first,
                  "again": kernel_timer.collect(cuda)}))
"""


def run(enabled):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", EGGNOG_KERNEL_TIMES="1" if enabled else "0",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_launches_are_counted_by_kernel_when_enabled():
    got = run(True)
    assert got["wrapped"] and got["again"] == []
    names = {row["kernel"]: row for row in got["first"]}
    assert any(name.startswith("scan.forward") for name in names), names
    assert all(row["launches"] >= 1 and row["ms"] == -row["launches"] for row in got["first"])


def test_kernels_are_left_alone_when_disabled():
    got = run(False)
    assert not got["wrapped"] and got["first"] == []
