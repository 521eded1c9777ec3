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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, ParamSpec, Protocol, TypeVar, cast, overload

import numpy as np

from eggnog.kernels.core.placement import BACKENDS, PRECISIONS, Kernels, adopt, kernels_for
from eggnog.kernels.core.signature import Signature

PREFIXES = {"reference_": "numpy", "cpu_": "cpu", "cuda_": "cuda"}
# the sub-package of shared machinery; every other sub-package of eggnog.kernels is a family of ops
CORE_PACKAGE = "core"
P = ParamSpec("P")
F = TypeVar("F", bound=Callable[..., Any])
Cases = Callable[[np.random.Generator], Iterator[tuple[Any, ...]]]


@dataclass
class Op:
    name: str
    module: str
    numpy: Callable[..., Any] | None = None
    cpu: Callable[..., Any] | None = None
    cuda: Callable[..., Any] | None = None
    cases: Cases | None = None
    tolerance: tuple[float, float] | None = None
    args: dict[str, str] | None = None  # {parameter: declaration} of the reference (core/signature.py)
    signature: Signature | None = None

    def __call__(self, kernels: Kernels | str, *args: Any, **kwargs: Any) -> Any:
        """Run the op on `kernels` (a `Kernels`, anything with its `name` and `precision`, or a backend's
        name), after checking the arguments against the op's declarations."""
        if isinstance(kernels, str):
            kernels = kernels_for(kernels)
        if self.signature is not None:
            args, kwargs = self.signature.check(kernels.name, args, kwargs, adopt)
        return self.implementation(kernels.name, kernels.precision)(*args, **kwargs)

    def implementation(self, backend: str, precision: str = "fp32") -> Callable[..., Any]:
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
# (op, (backend, precision)) -> function, resolved once
_IMPLEMENTATIONS: dict[tuple[str, tuple[str, str]], Callable[..., Any]] = {}


class OpFunction(Protocol[P]):
    """An op as its module exports it (`registered`): the `Kernels` (or a backend's name) first, then the
    reference's parameters, typed as the reference types them; what it returns depends on the backend (NumPy
    arrays on "numpy" and "cpu", device arrays on "cuda")."""

    op: Op

    def __call__(self, kernels: Kernels | str, /, *args: P.args, **kwargs: P.kwargs) -> Any: ...


@overload
def registered(reference: Callable[P, Any]) -> OpFunction[P]: ...
@overload
def registered(reference: str) -> OpFunction[...]: ...
def registered(reference: Callable[..., Any] | str) -> OpFunction[Any]:
    """The op of `reference` (its `reference_<op>` function, or the op's name) as one function, for its module
    to export under the op's name (after its three implementations): `fn(kernels, *args)` runs it, `help(fn)`
    and `inspect.signature(fn)` show the reference's parameters, declarations and docstring, `fn.op` is the
    registry's entry, and a type checker sees the reference's parameters after the `Kernels`."""
    if isinstance(reference, str):
        name = reference
    else:
        py_name = getattr(reference, "py_func", reference).__name__
        if not py_name.startswith("reference_"):
            raise ValueError(f"registered takes an op's reference_<op> function, not {py_name}")
        name = py_name.removeprefix("reference_")
    entry = OPS[name]
    missing = [b for b in BACKENDS if getattr(entry, b) is None]
    if missing:
        raise RuntimeError(f"op {name!r} has no {', '.join(missing)} implementation")

    def run(kernels: Kernels | str, *args: Any, **kwargs: Any) -> Any:
        return entry(kernels, *args, **kwargs)

    run.__name__ = run.__qualname__ = name
    run.__module__ = entry.module
    run.__doc__ = public_doc(entry)
    vars(run).update(__signature__=public_signature(entry), op=entry)
    return cast(OpFunction[Any], run)


def public_signature(entry: Op) -> inspect.Signature:
    """The reference's signature with the `Kernels` (or a backend's name) first, each parameter
    annotated with its declaration."""
    if entry.numpy is None:
        raise RuntimeError(f"op {entry.name!r} has no reference")
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


@overload
def op(fn: F, /) -> F: ...
@overload
def op(*, cases: Cases | None = None, tolerance: tuple[float, float] | None = None,
       args: dict[str, str] | None = None) -> Callable[[F], F]: ...
def op(fn: F | None = None, /, *, cases: Cases | None = None, tolerance: tuple[float, float] | None = None,
       args: dict[str, str] | None = None) -> F | Callable[[F], F]:
    """Record a function named reference_<op>, cpu_<op> or cuda_<op> as <op>'s implementation on that
    backend. Use bare (`@op`) or, on the reference, with `args=`, `cases=` and `tolerance=`."""

    def record(fn: F) -> F:
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
            entry.tolerance = (tolerance[0], tolerance[1])
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


# (backend, precision) -> (the op names it was built from, the namespace)
_OPS_FOR: dict[tuple[str, str], tuple[tuple[str, ...], SimpleNamespace]] = {}


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
