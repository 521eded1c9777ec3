"""Setting up a backend caps BLAS at one thread (NumPy's OpenBLAS would otherwise spin against numba's
parallel loops on the same cores), unless the user gave BLAS a thread count. Each case runs in a fresh
process: BLAS reads its own variables when it loads, and the cap is decided once per process."""

import json
import os
import subprocess
import sys

import pytest

from eggnog.kernels.core.backend import BLAS_OWN_VARS, BLAS_THREADS_VAR, blas_thread_limit
from eggnog.runtime.errors import BadInput

PROBE = """
import json, sys
import numpy, threadpoolctl
from eggnog.kernels.core.backend import Backend, select_backend

def blas():
    return [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]

before = blas()
select_backend("cpu") if sys.argv[1] == "select" else Backend("cpu")
print(json.dumps({"before": before, "after": blas()}))
"""
# BLAS starts on one thread per core and caps its own variables at the core count: on one core no
# count it chooses itself can differ from the cap
MULTI_CORE = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: BLAS is on one thread anyway")


def blas_threads(setup, **env):
    """BLAS thread counts before and after the backend is set up in a new process with `env` on top
    of an environment cleared of every thread-count variable."""
    clean = {k: v for k, v in os.environ.items() if k not in (*BLAS_OWN_VARS, BLAS_THREADS_VAR, "EGGNOG_BACKEND")}
    out = subprocess.run([sys.executable, "-c", PROBE, setup], env={**clean, **env}, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    assert counts["before"], "NumPy loaded no BLAS library that threadpoolctl can see"
    return counts


@pytest.mark.parametrize("setup", ["select", "construct"])
def test_backend_setup_leaves_blas_one_thread(setup):
    counts = blas_threads(setup)
    assert counts["after"] == [1] * len(counts["before"])


@MULTI_CORE
def test_blas_starts_on_more_threads_than_the_cap():  # so the test above shows the cap, not BLAS's default
    assert min(blas_threads("select")["before"]) > 1


@pytest.mark.parametrize("env, expected", [
    ({BLAS_THREADS_VAR: "3"}, 3),
    ({BLAS_THREADS_VAR: "3", "OPENBLAS_NUM_THREADS": "1"}, 3),  # ours is the more specific request
    pytest.param({"OPENBLAS_NUM_THREADS": "2"}, 2, marks=MULTI_CORE),  # BLAS's own variable, left in force
    pytest.param({"OMP_NUM_THREADS": "2"}, 2, marks=MULTI_CORE),
])
def test_explicit_thread_count_is_respected(env, expected):
    counts = blas_threads("select", **env)
    assert counts["after"] == [expected] * len(counts["before"])


def test_thread_limit_from_environment():
    assert blas_thread_limit({}) == 1
    assert blas_thread_limit({BLAS_THREADS_VAR: " 4 "}) == 4
    assert blas_thread_limit({"MKL_NUM_THREADS": "8"}) is None
    assert blas_thread_limit({"OPENBLAS_NUM_THREADS": ""}) == 1  # set but empty is not a choice
    for bad in ("0", "-1", "two", "1.5"):
        with pytest.raises(BadInput, match=BLAS_THREADS_VAR):
            blas_thread_limit({BLAS_THREADS_VAR: bad})


@pytest.mark.parametrize("given, kept", [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_kernels_make_numbas_openmp_pool_sleep_between_loops_unless_told_otherwise(given, kept):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if given:
        env["OMP_WAIT_POLICY"] = given
    probe = "import os, eggnog.kernels; print(os.environ['OMP_WAIT_POLICY'])"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == kept
