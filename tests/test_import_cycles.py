"""No module of the tree imports itself back through others: the package, bin/, bench/ (its sub-packages and
`__main__` modules too), tests/ and any other folder of Python, counting imports inside functions (a lazy import
that closes a circle still ties the modules' definitions together)."""

import ast
import os

import pytest

from tests.test_layout import PACKAGES, ROOT, python_files

# folders that install under eggnog. (pyproject.toml's package-dir); every other folder imports under its own name
INSTALLED = {"eggnog": "eggnog", "bin": "eggnog.bin", **{p: f"eggnog.{p}" for p in PACKAGES}}
# what the walk skips: build outputs, caches, virtual environments and anything hidden (.git, .venv, .ci's shell)
SKIPPED = {"build", "dist", "__pycache__"}

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
    """The name a file imports as: kernels/core/registry.py is eggnog.kernels.core.registry, bench/x/__main__.py
    is bench.x.__main__, a package's __init__.py is the package."""
    rel = os.path.relpath(path, ROOT)[:-3].split(os.sep)
    if rel[-1] == "__init__":
        rel = rel[:-1]
    if len(rel) > 1 or rel[0] in INSTALLED:
        rel[0] = INSTALLED.get(rel[0], rel[0])
    return ".".join(rel)


def tree_files():
    """Every Python file of the checkout outside build outputs, caches and virtual environments."""
    for base, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED and not d.startswith(".") and not d.endswith(".egg-info")
                         and not os.path.isfile(os.path.join(base, d, "pyvenv.cfg")))
        yield from (os.path.join(base, f) for f in sorted(files) if f.endswith(".py"))


def resolved(node, name, is_package):
    """The absolute module an `from ... import` names: relative ones counted from the importing module."""
    if node.level == 0:
        return node.module
    package = name.split(".") if is_package else name.split(".")[:-1]
    base = package[:len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def edges_of(path, name, modules):
    """The modules of `modules` that the file imports (an `from a import b` names a.b when b is a module)."""
    edges = set()
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.Import):
            edges.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            source = resolved(node, name, path.endswith("__init__.py"))
            submodules = {f"{source}.{a.name}" for a in node.names} & modules
            if source in modules and len(submodules) < len(node.names):
                edges.add(source)
            edges |= submodules
    edges.discard(name)
    return edges


def import_graph(paths=None):
    """module -> the modules of the tree it imports (all of the tree's, or those of `paths`)."""
    files = list(tree_files() if paths is None else paths)
    paths = {module_name(p): p for p in files}
    assert len(paths) == len(files), "two files import under one name"
    return {name: edges_of(path, name, paths.keys()) for name, path in paths.items()}


def package_graph():
    """The import graph of the installed package's modules only (eggnog.*)."""
    return import_graph(list(python_files(*PACKAGES)))


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


def circles(graph):
    """Each group of modules that import one another (a strongly connected component) as its sorted members and
    one cycle through them, so a failure names every knot at once, not only the first."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node):  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group, member = set(), None
            while member != node:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted((sorted(group), find_cycle({n: graph[n] & group for n in group})) for group in groups)


def test_the_graph_covers_the_tree():
    """A walk that found nothing, or named no import right, would find no circle: each folder the layout names
    gives modules that import others of the tree, and the ones run as scripts (__main__, bin/) are read."""
    graph = import_graph()
    for folder in ("bench", "bin", "tests", *PACKAGES):
        prefix = INSTALLED.get(folder, folder)
        assert any(edges for name, edges in graph.items() if name.startswith(prefix + ".")), \
            f"no module under {folder}/ imports one of the tree: the walk or the names are wrong"
    assert graph["bench.static_report.__main__"] and graph["eggnog.bin.train_es"], "scripts are not read"


def test_no_import_cycle():
    found = circles(import_graph())
    assert not found, "import circles:\n" + "\n".join(f"{', '.join(group)} (for one: {' -> '.join(cycle)})"
                                                      for group, cycle in found)


def test_relative_imports_resolve():
    node = ast.parse("from ..core import registry").body[0]
    assert resolved(node, "eggnog.kernels.egg.epoch", False) == "eggnog.kernels.core"
    assert resolved(node, "eggnog.kernels.egg", True) == "eggnog.kernels.core"
    assert resolved(ast.parse("from . import x").body[0], "bench.static_report.goals", False) == "bench.static_report"


def test_a_cycle_is_found():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": set(), "d": {"e"}, "e": {"f"}, "f": {"d", "e"}}
    assert circles(graph) == [(["a", "b"], ["a", "b", "a"]), (["d", "e", "f"], ["d", "e", "f", "d"])]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_kernel_families_import_one_way():
    families = set(FAMILY_IMPORTS)
    offenders = []
    for name, edges in package_graph().items():
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
