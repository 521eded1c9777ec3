"""The commands of the README and of docs/ are ones eggnog takes: every program, script and file they
name exists, and each command line of a bin/ program or a benchmark is parsed by that program with
--help appended (click reads every flag before it answers --help, so an unknown flag or subcommand
fails here; placeholder values such as RUN or DIR are never read)."""

import contextlib
import importlib
import io
import os
import re
import shlex
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

PAGES = [Path(ROOT) / "README.md", *sorted((Path(ROOT) / "docs").glob("*.md"))]
SEPARATORS = {"&&", "||", ";", "|", "&"}
PYTHON = re.compile(r"python3?(\.\d+)?$")


def shell_lines(page):
    """Each command line of the page's ```sh blocks, continuations joined."""
    for block in re.findall(r"```sh\n(.*?)\n```", page.read_text(), re.S):
        yield from block.replace("\\\n", " ").splitlines()


def segments(line):
    """The simple commands of one line, as token lists ($(...) opened up, `...` elisions dropped)."""
    tokens = [t.strip("()").removeprefix("$(") for t in shlex.split(line, comments=True)]
    current = []
    for token in tokens:
        if token in SEPARATORS or token.endswith(";"):
            if token.endswith(";") and token != ";":
                current.append(token[:-1])
            yield current
            current = []
        elif token and token != "...":
            current.append(token)
    yield current


def program_of(tokens):
    """(kind, name, args) of a simple command eggnog owns, or None: a bin/ script, a module run with
    -m, an eggnog-* command, a shell script or an sbatch file."""
    for i, token in enumerate(tokens):
        rest = tokens[i + 1:]
        if PYTHON.match(token):
            if rest[:2] == ["-m", "mpi4py"]:
                rest = rest[2:]
            if rest[:1] == ["-m"] and len(rest) > 1:
                # python -m venv, pip, pytest: not eggnog's, so nothing here to check
                return ("module", rest[1], rest[2:]) if rest[1].startswith(("bench.", "eggnog.")) else None
            if rest and rest[0].endswith(".py"):
                return "script", rest[0], rest[1:]
            return None
        if token.startswith("eggnog-"):
            return "command", token, rest
        if token == "bash" and rest:
            return "shell", rest[0], rest[1:]
        if token == "sbatch":
            return "sbatch", next((t for t in rest if t.endswith(".sbatch")), ""), []
    return None


def commands():
    found = []
    for page in PAGES:
        for line in shell_lines(page):
            for tokens in segments(line):
                program = program_of(tokens)
                if program:
                    found.append((page.name, line.strip(), *program))
    return found


def console_scripts():
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return {name: target.split(":") for name, target in tomllib.load(f)["project"]["scripts"].items()}


def parse_with_help(target, prog, args):
    """(exit status, output) of `target` (a typer app or a program function reading sys.argv) given
    `args` and --help."""
    out, saved = io.StringIO(), sys.argv
    sys.argv = [prog, *args, "--help"]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), pytest.raises(SystemExit) as stop:
            target()
    finally:
        sys.argv = saved
    return stop.value.code or 0, out.getvalue()


def target_of(kind, name):
    """The callable that parses a command's flags, or None for a module that is only run."""
    if kind == "command":
        module, attribute = console_scripts()[name]
        return getattr(importlib.import_module(module), attribute)
    if kind == "script":
        stem = Path(name).stem
        for module, attribute in console_scripts().values():
            if module == f"eggnog.bin.{stem}":
                return getattr(importlib.import_module(module), attribute)
        return importlib.import_module(f"eggnog.bin.{stem}").app
    if name.startswith("bench."):
        module = importlib.import_module(name)
        if hasattr(module, "__path__"):  # a package runs its __main__
            module = importlib.import_module(f"{name}.__main__")
        return module.app
    return None


def test_the_docs_have_commands_of_every_kind():
    kinds = {kind for *_, kind, _, _ in commands()}
    assert {"module", "script", "shell", "sbatch"} <= kinds, kinds
    # docs/kernels.md and docs/library.md show Python (tests/test_kernel_example.py and test_library_doc.py run
    # it), docs/internals.md formulas
    assert {page for page, *_ in commands()} == {p.name for p in PAGES} - {"kernels.md", "internals.md", "library.md"}


@pytest.mark.parametrize("page, line, kind, name, args", commands(), ids=lambda v: v if isinstance(v, str) else "")
def test_each_command_is_one_eggnog_takes(page, line, kind, name, args):
    if kind == "module":
        assert importlib.util.find_spec(name) is not None, f"{page}: no module {name} in {line!r}"
    elif kind in ("script", "shell", "sbatch"):
        assert name and (Path(ROOT) / name).is_file(), f"{page}: no file {name!r} in {line!r}"
    if kind == "shell":
        script = (Path(ROOT) / name).read_text()
        unknown = [a for a in args if a.startswith("--") and a.split("=")[0] not in script]
        assert not unknown, f"{page}: {name} takes no {unknown} ({line!r})"
        return
    target = None if kind == "sbatch" else target_of(kind, name)
    if target is not None:
        code, out = parse_with_help(target, name, args)
        assert code == 0, f"{page}: {line!r} is refused by {name}:\n{out[-600:]}"
