"""The `eggnog-*` commands of pyproject.toml's [project.scripts] are the programs of bin/: every command
names an importable callable of eggnog.bin, every program in bin/ has a command, and each command calls
what the script's `if __name__ == "__main__":` block calls (so `eggnog-train-es` and `python
bin/train_es.py` parse the same flags, --preset included, and record the same script in a run). The
installed wheel's commands are run for real by tests/wheel_install.sh."""

import ast
import contextlib
import importlib
import io
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "bin")
# bin/ files with no command, and why
NOT_COMMANDS = {
    "__init__.py": "the package's own file",
    "offline_wheels.py": "reads the checkout's pyproject.toml, so it runs from a checkout",
    "wheel_folder.py": "the library of offline_wheels.py",
}


def pyproject():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def console_scripts():
    """{command: (module, attribute)} from [project.scripts]."""
    scripts = pyproject()["project"].get("scripts", {})
    return {name: tuple(target.split(":")) for name, target in scripts.items()}


def script_of(module):
    """bin/'s file name of eggnog.bin.<name>."""
    return module.removeprefix("eggnog.bin.") + ".py"


def programs():
    return sorted(name for name in os.listdir(BIN) if name.endswith(".py") and name not in NOT_COMMANDS)


def main_block_calls(path):
    """The statements of the file's `if __name__ == "__main__":` block, as source."""
    tree = ast.parse(open(path).read(), path)
    blocks = [node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) in (
        "__name__ == '__main__'", "'__main__' == __name__")]
    assert len(blocks) == 1, f"{os.path.relpath(path, ROOT)} needs one `if __name__ == \"__main__\":` block"
    return [ast.unparse(statement) for statement in blocks[0].body]


def first_words(path, count=3):
    return " ".join(ast.get_docstring(ast.parse(open(path).read(), path)).split()[:count])


def test_bin_installs_as_eggnog_bin():
    setuptools = pyproject()["tool"]["setuptools"]
    assert "eggnog.bin" in setuptools["packages"] and setuptools["package-dir"]["eggnog.bin"] == "bin"
    assert os.path.isfile(os.path.join(BIN, "__init__.py"))


def test_every_command_names_an_importable_callable_of_bin():
    scripts = console_scripts()
    assert scripts, "pyproject.toml has no [project.scripts]"
    for name, (module, attribute) in scripts.items():
        assert name.startswith("eggnog-"), name
        assert module.startswith("eggnog.bin.") and os.path.isfile(os.path.join(BIN, script_of(module))), \
            f"{name} -> {module}: not a file of bin/"
        target = getattr(importlib.import_module(module), attribute, None)
        assert callable(target), f"{name} -> {module}:{attribute} is not a callable"


def test_every_program_in_bin_has_a_command():
    commanded = {script_of(module) for module, _ in console_scripts().values()}
    missing = [name for name in programs() if name not in commanded]
    assert not missing, f"bin/ programs with no eggnog-* command in pyproject.toml: {', '.join(missing)}"
    assert not commanded & set(NOT_COMMANDS), sorted(commanded & set(NOT_COMMANDS))


def test_the_readme_names_every_command():
    with open(os.path.join(ROOT, "README.md")) as f:
        setup = f.read().split("## Set up", 1)[1].split("\n## ", 1)[0]
    missing = [name for name in sorted(console_scripts()) if f"`{name}`" not in setup]
    assert not missing, f"commands the README's Set up section does not name: {', '.join(missing)}"


def test_each_command_calls_what_its_script_runs():
    """The script's `__main__` block is one call of the command's target, with nothing before it."""
    wrong = []
    for name, (module, attribute) in sorted(console_scripts().items()):
        path = os.path.join(BIN, script_of(module))
        calls = main_block_calls(path)
        if calls != [f"{attribute}()"]:
            wrong.append(f"{name} calls {attribute}() but bin/{os.path.basename(path)} runs {calls}")
    assert not wrong, wrong


def invoke(target, argv):
    """(exit status, stdout) of a command's target run in this process with `argv`."""
    out, saved = io.StringIO(), sys.argv
    sys.argv = list(argv)
    try:
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as stop:
            target()
    finally:
        sys.argv = saved
    code = stop.value.code
    return (0 if code is None else code), out.getvalue()


@pytest.mark.parametrize("name", sorted(console_scripts()))
def test_each_command_shows_its_scripts_help(name):
    module, attribute = console_scripts()[name]
    code, out = invoke(getattr(importlib.import_module(module), attribute), [name, "--help"])
    assert code == 0 and first_words(os.path.join(BIN, script_of(module))) in out, out


@pytest.mark.parametrize("name,argv", [("eggnog-train-es", ["--preset", "d-eggs"]),
                                       ("eggnog-print-arch", ["transformer", "--preset", "d-eggs"])])
def test_commands_expand_presets_as_their_scripts_do(name, argv):
    module, attribute = console_scripts()[name]
    code, out = invoke(getattr(importlib.import_module(module), attribute), [name, *argv, "--help"])
    assert code == 0 and "Usage:" in out, out
