"""The example op module of docs/kernels.md is real: it registers, its three implementations agree on
its own cases, and it is callable by name."""

import os
import re
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def readme_example():
    text = open(os.path.join(ROOT, "docs", "kernels.md")).read()
    section = text.split("**Adding an op**", 1)[1]
    return re.search(r"```python\n(.*?)\n```", section, re.S).group(1)


def test_readme_example_registers_and_agrees(tmp_path):
    (tmp_path / "example_family.py").write_text(readme_example())
    probe = textwrap.dedent("""
        import numpy as np
        import example_family
        from eggnog.kernels.core.registry import OPS
        from tests.test_kernel_ops import cases_of, run_op, _agree

        entry = OPS["scale"]
        for i, args in enumerate(cases_of(entry)):
            ref = run_op(entry, "numpy", args)
            _agree("scale", entry, i, ref, run_op(entry, "cpu", args), "cpu")
            _agree("scale", entry, i, ref, run_op(entry, "cuda", args), "cuda")
        from eggnog.kernels.core.placement import kernels_for
        assert example_family.scale.op is entry
        assert np.allclose(example_family.scale(kernels_for("cpu"), np.ones(3, np.float32), 0.5), 0.5)
        print("agree", len(cases_of(entry)))
    """)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]))
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=ROOT,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "agree 3"
