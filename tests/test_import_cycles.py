"""No module of the package imports itself back through others, counting imports inside functions too
(a lazy import that closes a circle still ties the modules' definitions together)."""

import ast
import os

import pytest

from tests.test_layout import PACKAGES, ROOT, python_files

# what each kernel family may import from the others: core is the shared machinery, and families build
# on one another one way only
FAMILY_IMPORTS = {
    "core": set(),
    "checks": {"core"},
    "noise": {"core"},
    "layers": {"core"},
    "optim": {"core"},
    "egg": {"core", "noise"},
    "transformer": {"core", "noise", "egg"},
    "rnn": {"core", "layers"},
}


def module_name(path):
    rel = os.path.relpath(path, ROOT)[:-3].split(os.sep)
    if rel[-1] == "__init__":
        rel = rel[:-1]
    return ".".join(["eggnog", *rel])


def import_graph():
    """module -> the package modules it imports (an `from a import b` names a.b when b is a module)."""
    paths = {module_name(p): p for p in python_files(*PACKAGES)}
    graph = {}
    for name, path in paths.items():
        edges = set()
        for node in ast.walk(ast.parse(open(path).read(), path)):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in paths)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in paths:
                submodules = {f"{node.module}.{a.name}" for a in node.names} & paths.keys()
                if not submodules or len(submodules) < len(node.names):
                    edges.add(node.module)
                edges |= submodules
        edges.discard(name)
        graph[name] = edges
    return graph


def find_cycle(graph):
    """One import cycle as a list of modules, or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def test_a_cycle_is_found():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_kernel_families_import_one_way():
    families = set(FAMILY_IMPORTS)
    offenders = []
    for name, edges in import_graph().items():
        parts = name.split(".")
        if parts[1] != "kernels" or len(parts) < 4:
            continue
        assert parts[2] in families, f"kernels/{parts[2]} is not a known family: add it to FAMILY_IMPORTS"
        for target in edges:
            t = target.split(".")
            if t[1] == "kernels" and len(t) > 2 and t[2] != parts[2] and t[2] not in FAMILY_IMPORTS[parts[2]]:
                offenders.append(f"{name} imports {target}")
    assert not offenders, offenders


def test_every_sub_package_is_installed():
    """pyproject.toml lists packages by hand (the folders install under eggnog.): a new family must be in it."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    listed = set(tomllib.load(open(os.path.join(ROOT, "pyproject.toml"), "rb"))["tool"]["setuptools"]["packages"])
    found = {module_name(p) for p in python_files(*PACKAGES) if p.endswith("__init__.py")}
    assert found <= listed, sorted(found - listed)
