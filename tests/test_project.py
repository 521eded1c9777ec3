"""The README's two set-up commands are the ones CI and users run."""

import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def readme_commands():
    text = open(os.path.join(ROOT, "README.md")).read()
    setup = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)\n```", setup, re.S)


def test_readme_has_exactly_two_setup_commands():
    commands = readme_commands()
    assert len(commands) == 2 and all("\n" not in c for c in commands)
    run, test = commands
    assert run.startswith("python3 -m venv") and "bin/" in run
    assert test.startswith("python3 -m venv") and "tests/run.sh" in test


def test_ci_runs_the_readme_test_command_then_python_312_and_the_offline_install():
    """CI runs the README's `a && b && ...` as one `step` a line (tests/test_ci_scripts.py fails each)."""
    lines = [line for line in open(os.path.join(ROOT, ".ci", "run")).read().splitlines()
             if line.strip() and not line.startswith("#")]
    readme_steps = ["step " + command for command in readme_commands()[1].split(" && ")]
    # CI adds PyTorch (the interop tests; 5 GB, so not in the README's dev extra) right after the install
    torch = "step pip install -q --no-compile -e '.[torch]'"
    install = next(line for line in readme_steps if line.startswith("step pip install"))
    assert lines[lines.index(install) + 1] == torch
    lines.remove(torch)
    first = lines.index(readme_steps[0])
    assert lines[first:first + len(readme_steps)] == readme_steps
    rest = lines[first + len(readme_steps):]
    assert rest[:3] == ["step ruff check .", 'echo "ruff check passed"', "step python -m mypy"]
    assert any(line.endswith("-m venv .venv312") for line in rest)
    ptx_check = "step without_stdout .venv312/bin/python -m eggnog.kernels.checks.ptx_compile"
    assert rest[rest.index(ptx_check) + 1] == 'echo "PTX compile check passed"'
    assert rest[-2:] == ["step bash tests/offline_install.sh", 'echo "CI passed: every step"']


def test_install_puts_only_the_eggnog_namespace_in_site_packages(tmp_path):
    """A real (non-editable) install, imported from outside the repository: the folders are
    eggnog.<name>, and no generic top-level package (kernels, models, ...) is installed."""
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), ROOT],
                   check=True, capture_output=True, timeout=600)
    installed = sorted(p.name for p in target.iterdir() if not p.name.endswith((".dist-info", ".egg-info")))
    assert installed == ["bin", "eggnog"], installed  # bin/: the eggnog-* commands, not a package
    assert all(name.startswith("eggnog-") for name in os.listdir(target / "bin")), os.listdir(target / "bin")
    probe = ("import importlib, json\n"
             "out = {}\n"
             "for name in ('kernels', 'models', 'corpus', 'runtime', 'training', 'evolution', 'zorn'):\n"
             "    try:\n"
             "        importlib.import_module(name); out[name] = 'imported'\n"
             "    except ImportError:\n"
             "        out[name] = 'absent'\n"
             "import eggnog, eggnog.kernels.rnn.scan, eggnog.runtime.errors\n"
             "out['version'] = eggnog.__version__\n"
             "out['scan'] = eggnog.kernels.rnn.scan.__file__\n"
             "print(json.dumps(out))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                            cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert all(out[name] == "absent" for name in ("kernels", "models", "corpus", "runtime", "training",
                                                   "evolution", "zorn")), out
    assert out["version"] == "0.1.0"
    assert out["scan"].startswith(str(target)), out["scan"]


def test_the_readme_stays_short():
    """What eggnog is, set-up, the ways to run and where to read more; topics are pages of docs/."""
    lines = open(os.path.join(ROOT, "README.md")).read().splitlines()
    assert len(lines) <= 400, f"the README has {len(lines)} lines: move a topic to docs/"
