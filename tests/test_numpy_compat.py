"""numba-cuda 0.30 overloads np.row_stack when it first compiles, and numpy 2.5 removed that name:
with the alias put back (kernels/core/numpy_compat.py, applied by kernels/core/cuda_api.py) a kernel compiles on a
numpy without it; without the alias the same compile fails. The numpy here is made to lack the name as
2.5 does, so this runs the same on every numpy."""

import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT

COMPILE = """
import numpy as np
if "row_stack" in vars(np):
    del np.row_stack  # as numpy 2.5 has it
if {without_alias}:
    from eggnog.kernels.core import numpy_compat
    numpy_compat.REMOVED_ALIASES.clear()
from eggnog.kernels.checks.ptx_compile import compile_all
print(sum(1 for _ in compile_all(only="shared_reverse")), "compiled")
"""


def compile_one(without_alias):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-c", COMPILE.format(without_alias=without_alias)], capture_output=True,
                          text=True, env=env, timeout=300, cwd=ROOT)


def test_a_kernel_compiles_on_a_numpy_without_row_stack():
    done = compile_one(without_alias=False)
    assert done.returncode == 0 and "1 compiled" in done.stdout, done.stderr[-2000:]


def test_without_the_alias_the_compile_fails_on_row_stack():
    done = compile_one(without_alias=True)
    assert done.returncode != 0 and "row_stack" in done.stderr, done.stdout + done.stderr[-2000:]


@pytest.mark.parametrize("present", [True, False])
def test_the_alias_is_defined_only_where_numpy_lacks_it(monkeypatch, present):
    import numpy as np

    from eggnog.kernels.core import numpy_compat

    original = object()
    if present:
        monkeypatch.setattr(np, "row_stack", original, raising=False)
    else:
        monkeypatch.delattr(np, "row_stack", raising=False)
    monkeypatch.setattr(numpy_compat, "RESTORED", [])
    added = numpy_compat.restore_removed_aliases()
    assert added == ([] if present else ["row_stack"])
    assert np.row_stack is (original if present else np.vstack)
