"""The one registry of kernel operations: `@op` records `reference_<name>`, `cpu_<name>` and
`cuda_<name>` under <name>. Code calls an op by its name, imported from the op's module
(`from eggnog.kernels.layers.matmul import matmul`; `matmul = registered("matmul")` there), with the
`Kernels` it runs on first: `matmul(kernels_for("cuda", "tf32"), a, b)`. `ops_for(backend)` gathers
one backend's implementations in one namespace, for the tests.

The reference's `@op(...)` declares what the op takes, `args={name: declaration}` for every parameter
(core/signature.py has the grammar), which the registry checks on every backend before an implementation
runs; and what the generated tests need: `cases(rng)` yields argument tuples (host NumPy arrays and
scalars; shapes that cross the launcher's tiles and run several blocks), and `tolerance=(rtol, atol)` for
a float op (None: bit-identical across all three backends). The reference's docstring says what the op
computes and what each argument means: it is what `help(op)` shows, with the declarations.
"""

import functools
import importlib
import inspect
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from eggnog.kernels.core.placement import BACKENDS, PRECISIONS, Kernels, adopt, kernels_for
from eggnog.kernels.core.signature import Signature

PREFIXES = {"reference_": "numpy", "cpu_": "cpu", "cuda_": "cuda"}
# the sub-package of shared machinery; every other sub-package of eggnog.kernels is a family of ops
CORE_PACKAGE = "core"


@dataclass
class Op:
    name: str
    module: str
    numpy: object = None
    cpu: object = None
    cuda: object = None
    cases: object = None
    tolerance: tuple | None = None
    args: dict | None = None  # {parameter: declaration} of the reference (core/signature.py)
    signature: Signature | None = None

    def __call__(self, kernels: "Kernels | str", *args, **kwargs):
        """Run the op on `kernels` (a `Kernels`, anything with its `name` and `precision`, or a backend's
        name), after checking the arguments against the op's declarations."""
        if isinstance(kernels, str):
            kernels = kernels_for(kernels)
        if self.signature is not None:
            args, kwargs = self.signature.check(kernels.name, args, kwargs, adopt)
        return self.implementation(kernels.name, kernels.precision)(*args, **kwargs)

    def implementation(self, backend: str, precision: str = "fp32") -> Callable:
        """The function that runs this op on `backend` at `precision` (PRECISIONS may hand it to
        another op: `matmul` is `matmul_tf32` at tf32)."""
        key = (backend, precision)
        fn = _IMPLEMENTATIONS.get((self.name, key))
        if fn is None:
            name = PRECISIONS[precision].get(self.name, self.name)
            serving = OPS.get(name) or all_ops()[name]  # a precision's op may sit in a module not yet imported
            fn = getattr(serving, backend)
            if fn is None:
                raise RuntimeError(f"op {serving.name!r} has no {backend} implementation")
            _IMPLEMENTATIONS[(self.name, key)] = fn
        return fn


OPS: dict[str, Op] = {}
_IMPLEMENTATIONS: dict = {}  # (op, (backend, precision)) -> function, resolved once


def registered(name: str) -> Callable:
    """The op `name` as one function, for its module to export under the op's name (after its three
    implementations): `fn(kernels, *args)` runs it, `help(fn)` and `inspect.signature(fn)` show the
    reference's parameters, declarations and docstring, and `fn.op` is the registry's entry."""
    entry = OPS[name]
    missing = [b for b in BACKENDS if getattr(entry, b) is None]
    if missing:
        raise RuntimeError(f"op {name!r} has no {', '.join(missing)} implementation")

    def run(kernels, *args, **kwargs):
        return entry(kernels, *args, **kwargs)

    run.__name__ = run.__qualname__ = name
    run.__module__ = entry.module
    run.__signature__ = public_signature(entry)
    run.__doc__ = public_doc(entry)
    run.op = entry
    return run


def public_signature(entry: Op) -> inspect.Signature:
    """The reference's signature with the `Kernels` (or a backend's name) first, each parameter
    annotated with its declaration."""
    reference = inspect.signature(getattr(entry.numpy, "py_func", entry.numpy))
    declared = entry.args or {}
    first = inspect.Parameter("kernels", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="Kernels | str")
    rest = [p.replace(annotation=declared[p.name]) if p.name in declared else p for p in reference.parameters.values()]
    return reference.replace(parameters=[first, *rest], return_annotation=inspect.Signature.empty)


def public_doc(entry: Op) -> str:
    """The reference's docstring, then each argument's declaration and where the op runs."""
    doc = inspect.cleandoc(getattr(entry.numpy, "__doc__", None) or "")
    lines = [doc, "", 'Arguments after `kernels` (a Kernels, or "numpy", "cpu" or "cuda"), checked before it runs:']
    lines += [f"    {name}: {text}" for name, text in (entry.args or {}).items()]
    tolerance = "bit-identical on every backend" if entry.tolerance is None else \
        f"backends agree within rtol {entry.tolerance[0]:g}, atol {entry.tolerance[1]:g}"
    lines += ["", f"Backends: numpy (the reference, {entry.module}.reference_{entry.name}), cpu (the CPU twin), "
                  f"cuda (the kernel); {tolerance}. The grammar of the declarations: "
                  f"eggnog.kernels.core.signature."]
    return "\n".join(lines).strip()


def normal32(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    """A float32 case array of normal values: what most float ops' cases are made of."""
    return (rng.normal(size=shape) * scale).astype(np.float32)


def op(fn: Callable | None = None, *, cases: Callable | None = None, tolerance: tuple[float, float] | None = None,
       args: dict[str, str] | None = None):
    """Record a function named reference_<op>, cpu_<op> or cuda_<op> as <op>'s implementation on that
    backend. Use bare (`@op`) or, on the reference, with `args=`, `cases=` and `tolerance=`."""

    def record(fn):
        py = getattr(fn, "py_func", fn)  # a numba dispatcher names its Python function
        name, module = py.__name__, py.__module__
        backend = next((b for prefix, b in PREFIXES.items() if name.startswith(prefix)), None)
        if backend is None:
            raise ValueError(f"{name}: an op's functions are named reference_<op>, cpu_<op> or cuda_<op>")
        key = name.split("_", 1)[1]
        entry = OPS.setdefault(key, Op(key, module))
        if entry.module != module:
            raise ValueError(f"op {key!r} is defined in both {entry.module} and {module}")
        if getattr(entry, backend) is not None:
            raise ValueError(f"op {key!r} has two {backend} implementations")
        setattr(entry, backend, fn)
        if cases is not None:
            entry.cases = cases
        if tolerance is not None:
            entry.tolerance = tuple(tolerance)
        if args is not None:
            parameters = list(inspect.signature(py).parameters.values())
            entry.args, entry.signature = dict(args), Signature(key, parameters, args)
        return fn

    return record(fn) if fn is not None else record


def family_packages() -> list[str]:
    """The names of the family sub-packages (every sub-package of eggnog.kernels but core)."""
    from eggnog import kernels

    return sorted(m.name for m in pkgutil.iter_modules(kernels.__path__) if m.ispkg and m.name != CORE_PACKAGE)


_families_imported = False


def import_families() -> None:
    """Import every module of every family, so that every op is registered (once a process)."""
    global _families_imported
    if _families_imported:
        return
    for family in family_packages():
        package = importlib.import_module(f"eggnog.kernels.{family}")
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{module.name}")
    _families_imported = True


def all_ops() -> dict[str, Op]:
    import_families()
    return dict(sorted(OPS.items()))


_OPS_FOR = {}  # (backend, precision) -> (the op names it was built from, the namespace)


def ops_for(backend: str, precision: str = "fp32") -> SimpleNamespace:
    """For the tests: every op of one backend under its name (checked as every call is), with the `Kernels`
    fields and methods (`name`, `precision`, `dtype`, `to_device`, `to_host`, `empty`, `zeros`), so that it can be given
    wherever a `Kernels` goes. The products of `precision` serve `matmul` and `matmul_backward`."""
    kernels = kernels_for(backend, precision)
    entries = all_ops()
    built = _OPS_FOR.get((backend, precision))
    if built is None or built[0] != tuple(entries):
        missing = [name for name, entry in entries.items() if getattr(entry, backend) is None]
        if missing:
            raise RuntimeError(f"ops without a {backend} implementation: {', '.join(missing)}")
        ops = {name: functools.partial(entry, kernels) for name, entry in entries.items()}
        helpers = {name: getattr(kernels, name) for name in ("name", "precision", "dtype", "to_device", "to_host",
                                                              "empty", "zeros")}
        built = _OPS_FOR[(backend, precision)] = tuple(entries), SimpleNamespace(**helpers, **ops)
    return built[1]
