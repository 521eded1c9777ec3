"""The ops' type hints say what their declarations say: every op's reference, CPU twin and CUDA launcher is
fully annotated, each array parameter with the NumPy dtypes its declaration names (core/signature.py; `float`
is any float on the reference, float32 on the twin) and each scalar with its Python type; the reference's
return hint fits what it returns on its first case. A type checker sees an exported op's parameters (mypy
on a small file of calls), and .typecheck/eggnog, through which mypy reads the package, links every folder
pyproject.toml maps."""

import os
import textwrap
import types
import typing
from typing import Any

import numpy as np
import pytest

from eggnog.kernels.core.registry import PREFIXES, all_ops
from eggnog.kernels.core.signature import parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS = all_ops()
BACKENDS = {backend: prefix for prefix, backend in PREFIXES.items()}
SCALARS = {"int": int, "float": float, "bool": bool, "str": str}


def hint_kind(hint):
    """(kind, optional): kind is "any", a Python scalar type, a frozenset of array dtypes (np.dtype, or
    "floating" for any float), or a tuple of kinds."""
    options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    optional = type(None) in options
    options = [o for o in options if o is not type(None)]
    if any(o is Any for o in options):
        return "any", False  # Any takes None too
    if len(options) > 1:  # a tuple beside arrays (noise's key): a literal the registry adopts as an array
        options = [o for o in options if typing.get_origin(o) is not tuple]
    if len(options) == 1 and typing.get_origin(options[0]) is tuple:
        return tuple(hint_kind(h)[0] if h is not type(None) else None for h in typing.get_args(options[0])), optional
    if len(options) == 1 and options[0] in SCALARS.values():
        return options[0], optional
    dtypes = set()
    for o in options:
        assert typing.get_origin(o) is np.ndarray, f"{hint} is not an array, a scalar, a tuple or Any"
        (scalar,) = typing.get_args(typing.get_args(o)[1])
        dtypes.add("floating" if typing.get_origin(scalar) is np.floating or scalar is np.floating
                   else np.dtype(scalar))
    return frozenset(dtypes), optional


def declared_kind(text, backend):
    spec = parse(text)
    if spec.scalar == "any" or spec.is_array and backend == "cuda":
        return "any", False
    if spec.scalar is not None:
        return SCALARS[spec.scalar], spec.optional
    floats = {"floating"} if backend == "numpy" else {np.dtype(np.float32)}
    return frozenset(set(spec.dtypes) | (floats if spec.backend_float else set())), spec.optional


def implementation(entry, backend):
    fn = getattr(entry, backend)
    return getattr(fn, "py_func", fn)


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("name", sorted(OPS))
def test_every_parameter_is_hinted_as_declared(name, backend):
    entry = OPS[name]
    fn = implementation(entry, backend)
    hints = typing.get_type_hints(fn)
    parameters = fn.__code__.co_varnames[:fn.__code__.co_argcount + fn.__code__.co_kwonlyargcount]
    unhinted = [p for p in (*parameters, "return") if p not in hints]
    assert not unhinted, f"{BACKENDS[backend]}{name} has no type hint for {unhinted}"
    wrong = {p: (hint_kind(hints[p]), declared_kind(text, backend)) for p, text in entry.args.items()
             if hint_kind(hints[p]) != declared_kind(text, backend)}
    assert not wrong, f"{BACKENDS[backend]}{name}: (hinted, declared) differ: {wrong}"


def value_kind(value):
    if value is None:
        return None
    if isinstance(value, tuple):
        return tuple(value_kind(v) for v in value)
    if isinstance(value, np.ndarray):
        return value.dtype
    return type(value)


def fits(kind, hinted):
    """Whether a returned value's kind fits the kind of its hint."""
    if hinted == "any":
        return True
    if isinstance(kind, tuple):
        return isinstance(hinted, tuple) and len(kind) == len(hinted) and all(
            k is None or fits(k, h) for k, h in zip(kind, hinted))
    if isinstance(kind, np.dtype):
        return isinstance(hinted, frozenset) and (kind in hinted or kind.kind == "f" and "floating" in hinted)
    return kind is hinted


@pytest.mark.parametrize("name", sorted(OPS))
def test_the_reference_returns_what_its_hint_says(name):
    entry = OPS[name]
    returned = value_kind(entry.numpy(*next(iter(entry.cases(np.random.default_rng(0))))))
    hinted, optional = hint_kind(typing.get_type_hints(implementation(entry, "numpy"))["return"])
    assert fits(returned, hinted) or returned is None and optional, f"{name} returned {returned}, hinted {hinted}"


@pytest.mark.parametrize("name", sorted(OPS))
def test_the_twin_returns_the_reference_s_kind_in_the_backend_s_float(name):
    """A twin's results are the reference's, float32 where the reference computes in float64."""

    def backend_float(kind):
        if isinstance(kind, tuple):
            return tuple(backend_float(k) for k in kind)
        if isinstance(kind, frozenset):
            return frozenset(np.dtype(np.float32) if d == np.dtype(np.float64) or d == "floating" else d for d in kind)
        return kind

    entry = OPS[name]
    reference = hint_kind(typing.get_type_hints(implementation(entry, "numpy"))["return"])
    twin = hint_kind(typing.get_type_hints(implementation(entry, "cpu"))["return"])
    assert backend_float(twin) == backend_float(reference), f"{name}: the twin returns {twin}, reference {reference}"


def test_a_type_checker_sees_an_op_s_parameters(tmp_path):
    """mypy, with the project's configuration, accepts a call of `matmul` with its two arrays and refuses one
    without `w`, one with an int for an array and one without the Kernels first."""
    api = pytest.importorskip("mypy.api")
    calls = tmp_path / "calls.py"
    calls.write_text(textwrap.dedent("""\
        import numpy as np
        from eggnog.kernels.core.placement import kernels_for
        from eggnog.kernels.layers.matmul import matmul
        x = np.zeros((2, 3), np.float32)
        matmul(kernels_for("cpu"), x, x)
        matmul("cpu", x)
        matmul("cpu", x, 3)
        matmul(x, x, x)
        """))
    stdout, stderr, status = api.run(["--config-file", os.path.join(ROOT, "pyproject.toml"), "--cache-dir",
                                      str(tmp_path / "cache"), "--no-error-summary", str(calls)])
    lines = sorted({int(line.split(":")[1]) for line in stdout.splitlines() if ": error:" in line})
    assert status == 1 and lines == [6, 7, 8], stdout + stderr
    assert 'Missing positional argument "w"' in stdout, stdout


def test_the_type_checker_reads_every_folder_under_its_package_name():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        config = tomllib.load(f)
    mapped = config["tool"]["setuptools"]["package-dir"]
    tree = config["tool"]["mypy"]["mypy_path"].replace("$MYPY_CONFIG_FILE_DIR", ROOT)
    links = {}
    for base, dirs, files in os.walk(tree):
        for entry in dirs + files:
            path = os.path.join(base, entry)
            if os.path.islink(path):
                package = os.path.relpath(path, tree).replace(os.sep, ".").removesuffix(".py")
                links[package.removesuffix(".__init__")] = os.path.relpath(os.path.realpath(path), ROOT)
    expected = {package: folder if package != "eggnog" else os.path.join(folder, "__init__.py")
                for package, folder in mapped.items()}
    assert links == expected
