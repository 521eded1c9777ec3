"""bench/host_path.py refuses, in one sentence and with exit status 2, to run off the simulator or with
widths and counts it cannot use, before any step runs and without writing a result."""

import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT


@pytest.mark.parametrize("simulator,args,fragment", [
    ("0", [], "simulator only"),
    ("1", ["--hidden", "4"], "--hidden >= 12"),
    ("1", ["--probes", "-1"], "--probes >= 0"),
])
def test_bad_inputs_are_refused(tmp_path, simulator, args, fragment):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM=simulator, EGGNOG_BENCH_RESULTS=str(tmp_path),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-m", "bench.host_path", *args], capture_output=True, text=True,
                            env=env, cwd=ROOT, timeout=120)
    assert result.returncode == 2, result.stderr
    assert fragment in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not any(tmp_path.iterdir())
