"""Every benchmark's --help starts with its module docstring's first sentence (a typer command given no
help of its own shows only its options)."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

BENCH = Path(ROOT) / "bench"
# module names (a package's __main__.py is the package) of the benchmarks with a typer command line; the
# static report's commands are tools of the report, not benchmarks
COMMANDS = sorted(".".join(p.relative_to(BENCH).with_suffix("").parts).removesuffix(".__main__")
                  for p in BENCH.rglob("*.py") if "import typer" in p.read_text() and "static_report" not in p.parts)


@pytest.mark.parametrize("name", COMMANDS)
def test_help_describes_the_benchmark(name):
    path = BENCH.joinpath(*name.split("."))
    doc = ast.get_docstring(ast.parse((path / "__main__.py" if path.is_dir() else path.with_suffix(".py")).read_text()))
    env = dict(os.environ, COLUMNS="200", TERM="dumb", NUMBA_ENABLE_CUDASIM="0",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-m", f"bench.{name}", "--help"], capture_output=True, text=True,
                            env=env, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    first_words = " ".join(doc.split()[:6])
    assert first_words in " ".join(result.stdout.split()), result.stdout[:500]
