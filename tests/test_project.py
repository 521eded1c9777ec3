"""The README's two set-up commands are the ones CI and users run."""

import os
import re

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


def test_ci_runs_the_readme_test_command():
    lines = [line for line in open(os.path.join(ROOT, ".ci", "run")).read().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines[-1] == readme_commands()[1]
