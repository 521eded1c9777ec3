"""`import eggnog` is cheap and changes nothing outside the package: no environment variable, no
sys.path entry, no module beyond eggnog's own, no hashing of the sources."""

import json
import os
import subprocess
import sys

from tests.helpers import ROOT

PROBE = """
import json, os, sys
env, path, modules = dict(os.environ), list(sys.path), set(sys.modules)
import eggnog
print(json.dumps({"env": dict(os.environ) == env, "path": sys.path == path,
                  "new": sorted(set(sys.modules) - modules), "hashed": eggnog.source_digest.cache_info().currsize}))
"""


def test_import_eggnog_leaves_the_environment_unchanged():
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("NUMBA_CACHE_DIR", None)
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["env"] and seen["path"] and seen["hashed"] == 0, seen
    assert seen["new"] == ["eggnog"], seen["new"]
