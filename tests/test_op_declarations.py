"""Every registered op declares what it takes and refuses what does not fit, on every backend, before any
implementation runs: its first case is broken one argument at a time (another dtype, an extra axis, a
size that disagrees with another argument, a scalar of the wrong kind) and each break must be refused by
the registry's check (a BadInput that starts with the op's name), never passed to a twin. `help()` of an
op shows its signature, declarations and docstring."""

import inspect
import pydoc
import zlib

import numpy as np
import pytest

from eggnog.kernels.core.cuda_api import cuda
from eggnog.kernels.core.placement import kernels_for
from eggnog.kernels.core.registry import all_ops, registered
from eggnog.kernels.core.signature import parse
from eggnog.runtime.errors import BadInput

OPS = all_ops()
BACKENDS = ("numpy", "cpu", "cuda")
CANDIDATE_DTYPES = [np.dtype(d) for d in ("int8", "uint8", "int16", "int32", "int64", "float32", "float64", "bool")]


def first_case(entry):
    rng = np.random.default_rng(zlib.crc32(entry.name.encode()))
    return next(iter(entry.cases(rng)))


def refused(entry, backend, args, kwargs=None):
    """The registry's refusal of this call on `backend` (device arrays on "cuda"), or None if it ran."""
    placed = [cuda.to_device(a) if backend == "cuda" and isinstance(a, np.ndarray) else a for a in args]
    try:
        entry(kernels_for(backend), *placed, **(kwargs or {}))
    except BadInput as e:
        return str(e)
    except Exception:  # noqa: BLE001  (a twin failing on what the check let through)
        return None
    return None


def breaks(entry, args):
    """(what was broken, the argument's name, the broken argument tuple) for one case's arguments."""
    names = list(inspect.signature(entry.numpy).parameters)
    specs = {name: parse(text) for name, text in entry.args.items()}
    shared = {}
    for name, value in zip(names, args):
        if isinstance(value, np.ndarray) and specs[name].is_array:
            for dim in specs[name].dims:
                for n in dim.names():
                    shared[n] = shared.get(n, 0) + 1
    for i, (name, value) in enumerate(zip(names, args)):
        spec = specs[name]
        if isinstance(value, np.ndarray) and spec.is_array:
            allowed = set(spec.dtypes) | ({np.dtype(np.float32), np.dtype(np.float64)} if spec.backend_float else set())
            other = next(d for d in CANDIDATE_DTYPES if d not in allowed)
            yield "dtype", name, (*args[:i], value.astype(other), *args[i + 1:])
            star = next((j for j, d in enumerate(spec.dims) if d.star is not None), None)
            if star is None or shared["*" + spec.dims[star].star] > 1:  # a lone *name takes any axes
                yield "axis", name, (*args[:i], value[None], *args[i + 1:])
            for j, dim in enumerate(spec.dims):
                if dim.star is not None:
                    continue
                axis = j if star is None or j < star else j - len(spec.dims)
                if dim.size is not None or any(shared[n] > 1 for n in dim.names()):
                    grown = np.concatenate([value, value.take([0], axis=axis)], axis=axis) if value.shape[axis] \
                        else np.zeros(value.shape[:axis % value.ndim] + (1,) + value.shape[axis % value.ndim + 1:],
                                      value.dtype)
                    yield f"size of axis {axis}", name, (*args[:i], grown, *args[i + 1:])
        elif spec.scalar in ("int", "bool") and value is not None:
            yield "scalar kind", name, (*args[:i], 0.5, *args[i + 1:])


@pytest.mark.parametrize("name", sorted(OPS))
def test_the_op_declares_every_argument_and_says_what_it_does(name):
    entry = OPS[name]
    assert entry.args is not None, f"{name}: its reference declares no args="
    assert not entry.signature.undeclared, f"{name}: undeclared arguments {entry.signature.undeclared}"
    doc = inspect.getdoc(entry.numpy)
    assert doc and len(doc.split()) >= 8, f"{name}: its reference has no docstring saying what it computes"


@pytest.mark.parametrize("name", sorted(OPS))
def test_each_broken_argument_is_refused_by_the_registry_on_every_backend(name):
    entry = OPS[name]
    args = first_case(entry)
    cases = list(breaks(entry, args))
    assert any(kind == "dtype" for kind, _, _ in cases), f"{name}: its first case has no array to break"
    for backend in BACKENDS:
        for kind, arg, broken in cases:
            message = refused(entry, backend, broken)
            assert message is not None, f"{name} on {backend}: a wrong {kind} of {arg} was not refused"
            assert message.startswith(f"{name}:") and arg in message, \
                f"{name} on {backend}: a wrong {kind} of {arg} was refused by {message!r}, not by the check"


def test_a_good_call_goes_through_on_every_backend_and_a_backend_may_be_named():
    from eggnog.kernels.egg.int_matmul import int_matmul

    x, w = np.ones((4, 64), np.int8), np.ones((16, 64), np.int8)
    outputs = [np.asarray(kernels_for(b).to_host(int_matmul(b, x, w, 7, 0, 4))) for b in BACKENDS]
    assert all(o.shape == (4, 16) and o.dtype == np.int8 for o in outputs)
    assert all(np.array_equal(o, outputs[0]) for o in outputs)


def test_a_non_contiguous_device_array_is_refused_in_one_sentence():
    from eggnog.kernels.egg.int_matmul import int_matmul

    wide = cuda.to_device(np.ones((4, 128), np.int8))
    with pytest.raises(BadInput, match=r"int_matmul: x must be C-contiguous"):
        int_matmul("cuda", wide[:, ::2], np.ones((16, 64), np.int8), 7, 0, 4)


def test_an_unknown_or_missing_argument_is_named():
    from eggnog.kernels.egg.int_matmul import int_matmul

    x, w = np.ones((4, 64), np.int8), np.ones((16, 64), np.int8)
    with pytest.raises(BadInput, match="int_matmul takes no argument 'gains'"):
        int_matmul("cpu", x, w, 7, 0, 4, gains=None)
    with pytest.raises(BadInput, match="int_matmul needs its argument 'sigma_shift'"):
        int_matmul("cpu", x, w, 7, 0)


def test_help_shows_the_signature_the_declarations_and_the_meaning():
    from eggnog.kernels.egg.int_matmul import int_matmul

    assert str(inspect.signature(int_matmul)).startswith("(kernels: 'Kernels | str', x: 'int8[members, d_in]'")
    text = pydoc.render_doc(int_matmul, renderer=pydoc.plaintext)
    assert "int_matmul(kernels" in text and "gain: uint8[d_in + d_out] | None" in text
    assert "first_member: the population index" in text
    for name in OPS:
        assert registered(name).__doc__.startswith((inspect.getdoc(OPS[name].numpy) or "")[:40])


def test_a_named_float_dtype_is_that_dtype_and_float_is_the_backends():
    """np.dtype("float64") == "float" is True in NumPy: a declared float64 must not read as the backend's."""
    from eggnog.kernels.core.signature import Signature

    def fn(a, b):
        pass

    check = Signature("fn", list(inspect.signature(fn).parameters.values()), {"a": "float64[n]", "b": "float[n]"}).check
    f32, f64 = np.zeros(3, np.float32), np.zeros(3, np.float64)
    check("cpu", (f64, f32), {}, None)
    check("numpy", (f64, f64), {}, None)
    with pytest.raises(BadInput, match="fn: a must be float64"):
        check("cpu", (f32, f32), {}, None)
    with pytest.raises(BadInput, match="fn: b must be float32"):
        check("cpu", (f64, f64), {}, None)
