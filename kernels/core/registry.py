"""The one registry of kernel operations: `@op` records `reference_<name>`, `cpu_<name>` and
`cuda_<name>` under <name>, and `ops_for(backend)` gathers one backend's implementations.

The reference's `@op(...)` also carries what the generated tests need: `cases(rng)` yields argument
tuples (host NumPy arrays and scalars; shapes that cross the launcher's tiles and run several blocks),
and `tolerance=(rtol, atol)` for a float op (None: bit-identical across all three backends).
"""

import importlib
import pkgutil
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

BACKENDS = ("numpy", "cpu", "cuda")
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


OPS: dict[str, Op] = {}


def normal32(rng, *shape, scale=1.0):
    """A float32 case array of normal values: what most float ops' cases are made of."""
    return (rng.normal(size=shape) * scale).astype(np.float32)


def op(fn=None, *, cases=None, tolerance=None):
    """Record a function named reference_<op>, cpu_<op> or cuda_<op> as <op>'s implementation on that
    backend. Use bare (`@op`) or, on the reference, with `cases=` and `tolerance=`."""

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
        return fn

    return record(fn) if fn is not None else record


def family_packages():
    """The names of the family sub-packages (every sub-package of eggnog.kernels but core)."""
    from eggnog import kernels

    return sorted(m.name for m in pkgutil.iter_modules(kernels.__path__) if m.ispkg and m.name != CORE_PACKAGE)


_families_imported = False


def import_families():
    """Import every module of every family, so that every op is registered (once a process)."""
    global _families_imported
    if _families_imported:
        return
    for family in family_packages():
        package = importlib.import_module(f"eggnog.kernels.{family}")
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{module.name}")
    _families_imported = True


def all_ops():
    import_families()
    return dict(sorted(OPS.items()))


_OPS_FOR = {}  # backend -> (the op names it was built from, the namespace)


# --precision of the float trainers: which ops serve `matmul` and `matmul_backward`. fp32 is exact fp32;
# tf32 runs the forward products on TF32 tensor cores and keeps the gradients fp32; bf16 runs both on
# bf16 tensor cores. All accumulate in fp32 (the accuracy of each: kernels/layers/matmul_tf32.py, matmul_bf16.py).
PRECISIONS = {"fp32": {}, "tf32": {"matmul": "matmul_tf32"},
              "bf16": {"matmul": "matmul_bf16", "matmul_backward": "matmul_backward_bf16"}}


def ops_for(backend, precision="fp32"):
    """Every op of one backend ("numpy": float64 references, "cpu": the twins, "cuda": the kernels)
    under its name, with `to_device`, `to_host`, `empty`, `zeros` and `dtype` for arrays there, and the
    products of `precision` (PRECISIONS) as `matmul` and `matmul_backward`. Built once a backend and
    precision (again only when an op was registered since): models ask for it on every call."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown kernel backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    entries = all_ops()
    built = _OPS_FOR.get((backend, precision))
    if built is None or built[0] != tuple(entries):
        ops = _build_ops(backend, entries)
        for name, replacement in PRECISIONS[precision].items():
            setattr(ops, name, getattr(ops, replacement))
        built = _OPS_FOR[(backend, precision)] = tuple(entries), ops
    return built[1]


def _build_ops(backend, entries):
    from eggnog.kernels.core.backend import to_host

    ops = {name: getattr(entry, backend) for name, entry in entries.items()}
    missing = [name for name, fn in ops.items() if fn is None]
    if missing:
        raise RuntimeError(f"ops without a {backend} implementation: {', '.join(missing)}")
    if backend == "cuda":
        from eggnog.kernels.core.cuda_api import cuda, device_zeros

        dtype = np.float32

        def to_device(a):  # device arrays stay where they are
            return a if hasattr(a, "copy_to_host") else cuda.to_device(np.ascontiguousarray(a))

        def empty(shape, dtype=np.float32):
            return cuda.device_array(shape, dtype)
    else:
        dtype = np.float64 if backend == "numpy" else np.float32

        def to_device(a):  # float arrays take the backend's float type; integer arrays stay as they are
            a = np.asarray(a)
            return np.ascontiguousarray(a, dtype) if a.dtype.kind == "f" else np.ascontiguousarray(a)

        def empty(shape, dtype=dtype):
            return np.empty(shape, dtype)

    def zeros(shape, dtype=dtype):
        if backend == "cuda":
            return device_zeros(shape, dtype)
        return to_device(np.zeros(shape, dtype))

    return SimpleNamespace(name=backend, dtype=dtype, to_device=to_device, to_host=to_host, empty=empty,
                           zeros=zeros, **ops)
