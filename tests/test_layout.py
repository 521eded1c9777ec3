"""The package layout of the README: arrows point one way (kernels <- models <- training <- evolution, zorn),
evolution and zorn never import each other, and nothing imports the old top-level names."""

import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("kernels", "models", "training", "evolution", "zorn", "corpus", "runtime", "interop")
# What each part of eggnog may import from eggnog (runtime.errors and runtime.optional are leaves every
# part may use).
ALLOWED = {
    "kernels": {"kernels"},
    "runtime": {"runtime"},
    "corpus": {"corpus", "runtime", "kernels"},  # samplers draw from the counter-based noise hash
    "models": {"models", "kernels"},
    "training": {"training", "models", "kernels", "corpus", "runtime"},
    "evolution": {"evolution", "training", "models", "kernels", "corpus", "runtime"},
    "zorn": {"zorn", "training", "models", "kernels", "corpus", "runtime"},
    "interop": {"interop", "kernels", "runtime"},  # and torch; nothing of eggnog imports interop
}


def imported_modules(path):
    tree = ast.parse(open(path).read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def python_files(*folders):
    for folder in folders:
        found = [os.path.join(dirpath, f) for dirpath, _, files in os.walk(os.path.join(ROOT, folder))
                 for f in files if f.endswith(".py")]
        assert found, f"no Python files under {folder}/: nothing to check"  # a wrong ROOT checks nothing
        yield from found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_follow_the_layout(package):
    offenders = []
    for path in python_files(package):
        for name in imported_modules(path):
            parts = name.split(".")
            if parts[0] != "eggnog" or len(parts) < 2 or parts[1] not in PACKAGES:
                continue
            if name.startswith(("eggnog.runtime.errors", "eggnog.runtime.optional")):
                continue
            if parts[1] not in ALLOWED[package]:
                offenders.append(f"{os.path.relpath(path, ROOT)} imports {name}")
    assert not offenders, offenders


# run by a peer's own Python beside its checkout: their `models.models` is the peer's, not eggnog's folder
PEERS = os.path.join(ROOT, "bench", "peers")


def peer_scripts():
    return [os.path.join(PEERS, f) for f in sorted(os.listdir(PEERS)) if f.endswith(".py") and f != "__init__.py"]


def test_nothing_imports_the_bare_folder_names():
    offenders = [f"{os.path.relpath(path, ROOT)} imports {name}"
                 for path in python_files(*PACKAGES, "bin", "bench", "tests")
                 if os.path.dirname(path) != PEERS
                 for name in imported_modules(path) if name.split(".")[0] in PACKAGES]
    assert not offenders, offenders


def test_peer_scripts_import_nothing_of_eggnog():
    paths = peer_scripts()
    offenders = [f"{os.path.relpath(path, ROOT)} imports {name}" for path in paths
                 for name in imported_modules(path) if name.split(".")[0] in ("eggnog", "bench")]
    assert paths and not offenders, offenders


def bench_top():
    """The modules and folders at the top of bench/ (as git tracks them), less its __init__.py and the
    measured data in results/: at most 12, each folder a sub-package of one concern."""
    import subprocess

    tracked = subprocess.run(["git", "ls-files", "bench"], capture_output=True, text=True, cwd=ROOT).stdout.split()
    top = {path.split("/")[1] + ("/" if path.count("/") > 1 else "") for path in tracked}
    return sorted(top - {"__init__.py", "results/"})


def test_bench_is_a_dozen_sub_packages_at_most():
    top = bench_top()
    assert 0 < len(top) <= 12, top


def test_readme_layout_names_every_bench_sub_package():
    with open(os.path.join(ROOT, "README.md")) as f:
        table = f.read().split("## Layout", 1)[1]
    missing = [entry for entry in bench_top() if entry.endswith("/") and f"| `bench/{entry}` |" not in table]
    assert bench_top() and not missing, missing


def test_one_kernel_registry():
    """Only kernels/core/registry.py builds a per-backend namespace of ops."""
    registry = os.path.join("kernels", "core", "registry.py")
    offenders = [os.path.relpath(path, ROOT) for path in python_files("kernels")
                 if "def ops_for" in open(path).read() and not path.endswith(registry)]
    assert not offenders, offenders


def test_block_sizes_do_not_shrink_on_the_simulator():
    """Kernels run on the simulator with the launch sizes they use on a GPU. (mma.py, loads.py and
    cuda_fast_math.py read SIMULATED to swap their inline PTX for Python, not to change a launch.)"""
    core = os.path.join(ROOT, "kernels", "core")
    offenders = [os.path.relpath(path, ROOT) for path in python_files("kernels")
                 if "SIMULATED" in open(path).read()
                 and not path.startswith(core) and not path.endswith("ptx_compile.py")]
    assert not offenders, offenders


# a prefix shared by several modules of one folder is a sub-package in disguise
PREFIXED = {"evolution": ("coordinat", "gossip", "tcp_"), "training": ("gossip", "run_", "mingru_", "bptt", "island"),
            "zorn": ("rge",)}


@pytest.mark.parametrize("package", sorted(PREFIXED))
def test_subsystems_live_in_their_sub_packages(package):
    top = sorted(f for f in os.listdir(os.path.join(ROOT, package)) if f.endswith(".py"))
    offenders = [f"{package}/{f}" for f in top if f.startswith(PREFIXED[package])]
    assert not offenders, offenders


def sub_packages():
    """Every folder below the top-level parts that is a package, as `part/sub/`."""
    return sorted(f"{os.path.relpath(dirpath, ROOT)}/" for part in PACKAGES
                  for dirpath, _, files in os.walk(os.path.join(ROOT, part))
                  if "__init__.py" in files and os.path.relpath(dirpath, ROOT) != part)


def test_readme_layout_names_every_folder():
    import subprocess

    tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=ROOT).stdout.split()
    folders = sorted({f"{path.split('/')[0]}/" for path in tracked if "/" in path and not path.startswith(".")})
    with open(os.path.join(ROOT, "README.md")) as f:
        table = f.read().split("## Layout", 1)[1]
    missing = [folder for folder in folders if f"| `{folder}` |" not in table]
    assert folders and not missing, missing


def test_readme_layout_names_every_sub_package():
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    table = readme[readme.index("## Layout"):]
    missing = [sub for sub in sub_packages()
               if f"`{sub}`" not in table and f"`{sub.split('/', 1)[1]}`" not in table]
    assert sub_packages() and not missing, missing


def test_library_code_calls_ops_by_name():
    """Library code imports each op from its module and calls it with the Kernels it runs on
    (`matmul(kernels, a, b)`): no op is called through a namespace of ops, and only the registry (for
    the tests) builds one, so "go to definition" always reaches the op's module."""
    from eggnog.kernels.core.registry import all_ops

    names = set(all_ops())
    registry = os.path.join(ROOT, "kernels", "core", "registry.py")
    offenders = []
    for path in python_files(*PACKAGES, "bin"):
        if path == registry:
            continue
        for node in ast.walk(ast.parse(open(path).read(), path)):
            if isinstance(node, ast.Attribute) and node.attr in names and ast.unparse(node.value).endswith("ops"):
                offenders.append(f"{os.path.relpath(path, ROOT)}:{node.lineno} {ast.unparse(node)}")
            elif isinstance(node, ast.Name) and node.id == "ops_for":
                offenders.append(f"{os.path.relpath(path, ROOT)}:{node.lineno} ops_for")
    assert not offenders, offenders


def test_module_docstrings_are_short():
    """At most 15 lines: what the module is and how to use it; the notes behind it go to
    docs/internals.md, a comment beside the code they explain, or a docs/ page."""
    long = []
    for path in python_files(*PACKAGES, "bin"):
        doc = ast.get_docstring(ast.parse(open(path).read(), path), clean=False)
        if doc and len(doc.splitlines()) > 15:
            long.append(f"{os.path.relpath(path, ROOT)}: {len(doc.splitlines())} lines")
    assert not long, long


def test_every_note_of_docs_internals_has_its_module():
    with open(os.path.join(ROOT, "docs", "internals.md")) as f:
        sections = re.findall(r"^## (\S+\.py)$", f.read(), re.M)
    missing = [s for s in sections if not os.path.isfile(os.path.join(ROOT, s))]
    pointing = [s for s in sections if f"docs/internals.md ({s})" not in open(os.path.join(ROOT, s)).read()]
    assert sections and not missing and not pointing, (missing, pointing)


def test_no_device_function_takes_more_than_12_parameters():
    """Related values travel as tuples (a stage's offsets, a tile's accumulators), as the kernels'
    `pert` and `stage` do; a kernel's own arguments are its launch signature and are not counted."""
    long = []
    for path in python_files("kernels"):
        for node in ast.walk(ast.parse(open(path).read(), path)):
            if not isinstance(node, ast.FunctionDef):
                continue
            decorators = [ast.unparse(d) for d in node.decorator_list]
            device = any(d == "device_function" or "device=True" in d for d in decorators)
            if device and len(node.args.args) > 12:
                long.append(f"{os.path.relpath(path, ROOT)}:{node.lineno} {node.name} ({len(node.args.args)})")
    assert not long, long
