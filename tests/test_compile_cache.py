"""Kernels compile once per machine and source tree: numba's on-disk cache lives in a folder named
after a hash of the package's sources, under NUMBA_CACHE_DIR (or ~/.cache)."""

import os
import subprocess
import sys

from tests.helpers import ROOT

PROBE = ("import os, numba, numpy as np\n"
         "from numba.cuda.core import config as cuda_config\n"
         "from eggnog.kernels.core.registry import ops_for\n"
         "ops_for('cpu').egg_clip_add(np.ones((2, 3), np.int8), np.ones((2, 3), np.int8))\n"
         "assert cuda_config.CACHE_DIR == numba.config.CACHE_DIR, 'the CUDA cache is elsewhere'\n"
         "assert os.environ['NUMBA_CACHE_DIR'] != numba.config.CACHE_DIR, 'the environment was changed'\n"
         "print(numba.config.CACHE_DIR)\n")


def test_the_cache_folder_is_keyed_by_the_sources_and_filled_on_first_use(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, NUMBA_CACHE_DIR=str(tmp_path), NUMBA_ENABLE_CUDASIM="0")
    first = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stderr
    folder = first.stdout.strip()
    assert os.path.dirname(folder) == str(tmp_path) and len(os.path.basename(folder)) == 16
    cached = [name for _, _, names in os.walk(folder) for name in names if name.endswith(".nbi")]
    assert cached, "nothing was written to the compile cache"
    second = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert second.returncode == 0 and second.stdout.strip() == folder
