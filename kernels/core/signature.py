"""What an op takes, declared once on its reference (`@op(args={"x": "int8[members, d_in]", "gain":
"uint8[d_in + d_out] | None", "prefix": "int"})`) and checked by the registry on every backend before an
implementation runs, so that a twin never sees a mismatch. A declaration is:
- an array `dtype[dims]`: a NumPy dtype name, several joined by `/`, or `float` (float32; the NumPy
  references also take float64). A dim is a name (the first array fixes it, the others must agree), a
  whole number, `_` (any), an expression of names and numbers with + - * //, or `*name` (any number of
  axes, bound whole); `[]` is 0-d;
- a scalar `int` (not bool), `float`, `bool`, `str`, or `any` (unchecked: a type the grammar has no word for);
- either followed by `| None` when None is allowed.
Arrays are adopted without a copy where the backend can use them (placement.adopt: device arrays of
numba, PyTorch, CuPy or JAX on "cuda", C-contiguous; NumPy, DLPack and array-protocol objects on "numpy"
and "cpu"). A call that does not fit is refused in one sentence (BadInput) naming the op and the argument.
More in docs/kernels.md (Declaring an op's arguments)."""

import ast
import inspect
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from eggnog.runtime.errors import BadInput

SCALARS = ("int", "float", "bool", "str", "any")
FLOAT_DTYPES = {"numpy": (np.dtype(np.float32), np.dtype(np.float64))}
BACKEND_FLOAT = (np.dtype(np.float32),)
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv}


@dataclass(frozen=True)
class Dim:
    text: str
    size: int | None = None  # a whole number
    name: str | None = None  # a name bound by the first array that has it
    expression: ast.AST | None = None  # an expression of names, checked after every name is bound
    star: str | None = None  # `*name`: any number of axes, bound as a whole

    def names(self) -> set[str]:
        if self.star is not None:
            return {"*" + self.star}
        if self.name is not None:
            return {self.name}
        if self.expression is None:
            return set()
        return {node.id for node in ast.walk(self.expression) if isinstance(node, ast.Name)}


@dataclass(frozen=True)
class ArgSpec:
    text: str
    optional: bool
    scalar: str | None = None  # one of SCALARS, or None for an array
    dtypes: tuple[np.dtype[Any], ...] = ()
    backend_float: bool = False  # `float`: the backend's float type
    dims: tuple[Dim, ...] = ()
    star: int | None = None  # the position of the `*name` dim

    @property
    def is_array(self) -> bool:
        return self.scalar is None




def parse(text: str) -> ArgSpec:
    """One argument's declaration (the grammar is in this module's docstring)."""
    body, optional = text.strip(), False
    if body.endswith("| None"):
        body, optional = body[: -len("| None")].strip(), True
    if "[" not in body:
        if body not in SCALARS:
            raise ValueError(f"unknown argument kind {body!r} in {text!r}: an array is <dtype>[dims], a scalar one "
                             f"of {', '.join(SCALARS)}")
        return ArgSpec(text, optional, scalar=body)
    if not body.endswith("]"):
        raise ValueError(f"an array declaration ends with ']': {text!r}")
    head, inside = body[:-1].split("[", 1)
    names = [d.strip() for d in head.split("/")]
    dtypes = tuple(np.dtype(d) for d in names if d != "float")
    dims = tuple(_dim(d.strip(), text) for d in inside.split(",")) if inside.strip() else ()
    if sum(d.star is not None for d in dims) > 1:
        raise ValueError(f"an array has at most one *name dim: {text!r}")
    star = next((i for i, d in enumerate(dims) if d.star is not None), None)
    return ArgSpec(text, optional, dtypes=dtypes, backend_float="float" in names, dims=dims, star=star)


def _dim(text: str, declaration: str) -> Dim:
    if text == "_":
        return Dim(text)
    if text.isdigit():
        return Dim(text, size=int(text))
    if text.isidentifier():
        return Dim(text, name=text)
    if text.startswith("*") and text[1:].isidentifier():
        return Dim(text, star=text[1:])
    tree = ast.parse(text, mode="eval").body
    allowed = (ast.BinOp, ast.Name, ast.Constant, ast.Load, *_OPERATORS)
    for node in ast.walk(tree):
        if not isinstance(node, allowed) or isinstance(node, ast.Constant) and type(node.value) is not int:
            raise ValueError(f"dimension {text!r} of {declaration!r} is not names and numbers with + - * //")
    return Dim(text, expression=tree)


def _evaluate(node: ast.AST, sizes: dict[str, Any]) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name):
        return sizes[node.id]
    assert isinstance(node, ast.BinOp)  # _dim allows nothing else
    return _OPERATORS[type(node.op)](_evaluate(node.left, sizes), _evaluate(node.right, sizes))


class Signature:
    """The declared arguments of one op, in its reference's parameter order, and the check of a call
    (a few microseconds: bench/throughput/op_check_cost.py)."""

    def __init__(self, op_name: str, parameters: list[inspect.Parameter], declared: dict[str, str]) -> None:
        """parameters: the reference's inspect.Parameter list; declared: {name: declaration text}."""
        unknown = sorted(set(declared) - {p.name for p in parameters})
        if unknown:
            raise ValueError(f"op {op_name!r} declares arguments its reference does not take: {unknown}")
        self.op = op_name
        self.names = tuple(p.name for p in parameters)
        self.specs = {name: parse(text) for name, text in declared.items()}
        self.undeclared = tuple(n for n in self.names if n not in self.specs)
        # (index, name, spec or None, required, default) of every parameter, resolved once
        self.plan = tuple((i, p.name, self.specs.get(p.name), p.default is p.empty, p.default)
                          for i, p in enumerate(parameters))
        # backend -> {name: the dtypes an array argument may have there}
        self._allowed: dict[str, dict[str, frozenset[np.dtype[Any]]]] = {}

    def allowed(self, backend: str) -> dict[str, frozenset[np.dtype[Any]]]:
        table = self._allowed.get(backend)
        if table is None:
            table = self._allowed[backend] = {
                name: frozenset(spec.dtypes + (_floats(backend) if spec.backend_float else ()))
                for name, spec in self.specs.items() if spec.is_array}
        return table

    def check(self, backend: str, args: tuple[Any, ...], kwargs: dict[str, Any],
              adopt: Callable[[Any, str], Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The call's arguments with arrays adopted for `backend` (`adopt(value, backend)`), after checking
        every declared one; BadInput (one sentence) for the first that does not fit."""
        given = len(args)
        if given > len(self.names):
            raise BadInput(f"{self.op} takes at most {len(self.names)} arguments after the backend, got {given}")
        for name in kwargs:
            if name not in self.specs and name not in self.names:
                raise BadInput(f"{self.op} takes no argument {name!r}: its arguments are {', '.join(self.names)}")
        allowed = self.allowed(backend)
        sizes: dict[str, Any] = {}  # a dim's name (or *name) -> its size (or sizes)
        where: dict[str, str] = {}  # -> the argument that bound it
        later: list[tuple[str, Dim, int]] = []
        adopted: dict[int | str, Any] | None = None
        for i, name, spec, required, default in self.plan:
            if i < given:
                value = args[i]
            elif name in kwargs:
                value = kwargs[name]
            elif required:
                raise BadInput(f"{self.op} needs its argument {name!r}")
            else:
                value = default
            if spec is None:
                continue
            if value is None:
                if spec.optional:
                    continue
                raise BadInput(f"{self.op}: {name} may not be None (it is {spec.text})")
            if spec.scalar is not None:
                _check_scalar(self.op, name, spec, value)
                continue
            if type(value) is not np.ndarray and not hasattr(value, "copy_to_host"):
                value = adopt(value, backend)
                adopted = adopted or {}
                adopted[i if i < given else name] = value
            if value.dtype not in allowed[name]:
                names = " or ".join(sorted(str(d) for d in allowed[name]))
                raise BadInput(f"{self.op}: {name} must be {names} (it is {spec.text}), got {value.dtype}")
            self._check_shape(backend, name, spec, value, sizes, where, later)
        for name, dim, size in later:
            assert dim.expression is not None
            expected = _evaluate(dim.expression, sizes)
            if size != expected:
                bound = ", ".join(f"{n} = {sizes[n]} (from {where[n]})" for n in sorted(dim.names()))
                raise BadInput(f"{self.op}: {name} has {size} along the axis declared {dim.text}, which is {expected} "
                               f"here ({bound})")
        if adopted:
            done = adopted
            args = tuple(done.get(i, a) for i, a in enumerate(args))
            kwargs = {k: done.get(k, v) for k, v in kwargs.items()}
        return args, kwargs

    def _check_shape(self, backend: str, name: str, spec: ArgSpec, value: Any, sizes: dict[str, Any],
                     where: dict[str, str], later: list[tuple[str, Dim, int]]) -> None:
        shape: tuple[Any, ...] = tuple(value.shape)
        star = spec.star
        if star is None:
            if len(shape) != len(spec.dims):
                raise BadInput(f"{self.op}: {name} must have {len(spec.dims)} axes ({spec.text}), got shape {shape}")
        else:
            if len(shape) < len(spec.dims) - 1:
                raise BadInput(f"{self.op}: {name} must have at least {len(spec.dims) - 1} axes ({spec.text}), got "
                               f"shape {shape}")
            tail = len(shape) - (len(spec.dims) - 1 - star)
            key, part = f"*{spec.dims[star].star}", shape[star:tail]
            if key not in sizes:
                sizes[key], where[key] = part, name
            elif sizes[key] != part:
                raise BadInput(f"{self.op}: {name} has shape {shape}, whose {spec.dims[star].text} {part} differs from "
                               f"{where[key]}'s {sizes[key]}")
            shape = shape[:star] + (None,) + shape[tail:]
        if backend == "cuda" and type(value) is not np.ndarray and not _c_contiguous(value):
            raise BadInput(f"{self.op}: {name} must be C-contiguous on the GPU (copy it with .contiguous() or "
                           f"ascontiguousarray first)")
        for dim, size in zip(spec.dims, shape):
            if dim.size is not None:
                if size != dim.size:
                    raise BadInput(f"{self.op}: {name} must have {dim.size} along that axis ({spec.text}), got shape "
                                   f"{shape}")
            elif dim.name is not None:
                bound = sizes.get(dim.name)
                if bound is None:
                    sizes[dim.name], where[dim.name] = size, name
                elif bound != size:
                    raise BadInput(f"{self.op}: {name} has {dim.name} = {size} (shape {shape}) but "
                                   f"{where[dim.name]} has {dim.name} = {bound}")
            elif dim.expression is not None:
                later.append((name, dim, size))


def _floats(backend: str) -> tuple[np.dtype[Any], ...]:
    return FLOAT_DTYPES.get(backend, BACKEND_FLOAT)


def _c_contiguous(device_array: Any) -> bool:
    flags = getattr(device_array, "flags", None)
    if flags is not None:
        return bool(flags["C_CONTIGUOUS"])
    return bool(device_array.is_c_contiguous())


_BOOLS = (bool, np.bool_)
# scalar kind -> (the types it takes, the types it refuses among them): bool is an int to isinstance
_SCALAR_TYPES: dict[str, tuple[tuple[type, ...], tuple[type, ...]]] = {
    "bool": (_BOOLS, ()), "int": ((int, np.integer), _BOOLS),
    "float": ((int, float, np.integer, np.floating), _BOOLS), "str": ((str,), ())}


def _check_scalar(op: str, name: str, spec: ArgSpec, value: object) -> None:
    if spec.scalar is None or spec.scalar == "any":
        return
    takes, refuses = _SCALAR_TYPES[spec.scalar]
    if not isinstance(value, takes) or refuses and isinstance(value, refuses):
        raise BadInput(f"{op}: {name} must be {spec.text}, got {type(value).__name__} {value!r:.40}")
