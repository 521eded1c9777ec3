"""bench/throughput/op_check_cost.py refuses what it cannot run in one sentence, before timing anything."""

import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT, assert_user_error


@pytest.mark.parametrize("args, fragment", [(["--steps", "3"], "--steps must be at least 4"),
                                            (["--calls", "0"], "--calls at least 1"),
                                            (["--job", "nope"], "unknown job 'nope'")])
def test_bad_arguments_are_refused(args, fragment):
    env = dict(os.environ, PYTHONPATH=ROOT, NUMBA_ENABLE_CUDASIM="0")
    done = subprocess.run([sys.executable, "-m", "bench.throughput.op_check_cost", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)
    assert_user_error(done, fragment)
