"""Tests that need a real GPU: `python -m pytest tests/gpu` runs them on it (tests/conftest.py turns
the simulator off when only tests/gpu is asked for). In a run that includes other tests (simulator),
or on a machine without a GPU, they are skipped; with EGGNOG_REQUIRE_GPU=1 (tests/run.sh sets it when
it sees a GPU, bench/gpu/run.sh always) that is an error instead."""

import os

import pytest


def pytest_collection_modifyitems(config, items):
    from eggnog.kernels.core.backend import gpu_usable

    reason = None
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") != "0":
        reason = "needs a real GPU: run with NUMBA_ENABLE_CUDASIM=0"
    elif not gpu_usable():
        reason = "no usable GPU on this machine"
    if reason and os.environ.get("EGGNOG_REQUIRE_GPU") == "1":
        raise pytest.UsageError(f"EGGNOG_REQUIRE_GPU=1 but the GPU tests cannot run: {reason}")
    if reason:
        for item in items:
            if "tests/gpu" in str(item.fspath).replace(os.sep, "/"):
                item.add_marker(pytest.mark.skip(reason=reason))
