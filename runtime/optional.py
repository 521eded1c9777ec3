"""Packages eggnog can run without: import one, or say once on stderr what is lost and how to make up
for it. A node with a preinstalled CUDA stack and no package index often lacks them, and a warning
per call would bury a run's output. A leaf (no eggnog imports), so every part may use it."""

import importlib
import sys

_said = set()  # keys of the lines printed by this process


def say_once(key, line):
    """Print `line` on stderr unless a line with this `key` was printed before in this process."""
    if key in _said:
        return
    _said.add(key)
    print(line, file=sys.stderr, flush=True)


def optional_import(name, instead):
    """The module `name`, or None after one line `note: <name> is not installed: <instead>`."""
    try:
        return importlib.import_module(name)
    except ImportError:  # also what a None entry in sys.modules raises
        say_once(name, f"note: {name} is not installed: {instead}")
        return None


def importable(name):
    """The module `name`, or None when it is missing (the caller says what that means)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
