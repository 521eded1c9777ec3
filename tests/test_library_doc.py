"""Every example of docs/library.md runs as written, each in a fresh process on the CPU (an example whose
heading says it needs a GPU runs only where one is present, one that needs PyTorch only where it is
installed), and the page is linked from the README."""

import os
import re
import subprocess
import sys

import pytest

from eggnog.runtime.optional import importable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "library.md")


def examples():
    """(the sentence before the block, the block's code) of every python block of the page."""
    text = open(PAGE).read()
    found = [(text[:m.start()].rstrip().rsplit("\n\n", 1)[-1], m.group(1))
             for m in re.finditer(r"```python\n(.*?)\n```", text, re.S)]
    assert len(found) >= 7, f"docs/library.md has {len(found)} examples"
    return found


def gpu_present():
    from eggnog.kernels.core.backend import gpu_usable
    from eggnog.kernels.core.cuda_api import SIMULATED

    return not SIMULATED and gpu_usable()


@pytest.mark.parametrize("index", range(len(examples())))
def test_the_example_runs(index, tmp_path):
    before, code = examples()[index]
    if "needs a GPU" in before and not gpu_present():
        pytest.skip("the example needs a GPU")
    if ("needs PyTorch" in before or "import torch" in code) and importable("torch") is None:
        pytest.skip("the example needs PyTorch (pip install eggnog[torch])")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0", "PYTHONPATH": ROOT}
    env.pop("EGGNOG_BACKEND", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=600)
    assert done.returncode == 0, f"example {index} failed:\n{code}\n{done.stderr[-3000:]}"


def test_the_refused_call_prints_the_sentence_the_page_shows(tmp_path):
    code = next(c for _, c in examples() if "except BadInput" in c)
    done = subprocess.run([sys.executable, "-c", code.replace("help(int_matmul)", "pass")], capture_output=True,
                          text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": ROOT}, timeout=300)
    shown = re.search(r"# (int_matmul: .*)", code).group(1)
    assert done.stdout.strip() == shown


def test_the_readme_links_the_page():
    assert "(docs/library.md)" in open(os.path.join(ROOT, "README.md")).read()
