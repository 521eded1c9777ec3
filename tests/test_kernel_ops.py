"""Generated from the kernel registry: for every op and each of its registered cases, the NumPy
reference, the CPU twin and the CUDA launcher (on the simulator), each called through the registry's check
of the op's declared arguments, agree: bit for bit and of one dtype for exact ops,
within the op's registered (rtol, atol) for float ones. Outputs are the returned arrays and every array
argument after the call (so in-place ops are compared too). The twin and the kernel are separate tests, so
that a run can take the twins alone (the Python 3.12 check of .ci/run). The last test checks that each kernel was
launched with exactly the signatures registered for the PTX check."""

import zlib
from functools import cache

import numpy as np
import pytest

from eggnog.kernels.core.cuda_api import KERNELS, LAUNCHES, SIMULATED, cuda
from eggnog.kernels.core.device_counts import tracing
from eggnog.kernels.core.placement import kernels_for, to_host
from eggnog.kernels.core.registry import all_ops
from eggnog.kernels.core.tuning import TUNABLES

OPS = all_ops()
SIMULATED_HERE: set[str] = set()  # ops whose cases ran on the simulator in this process


def _prepare(arg, backend):
    if isinstance(arg, np.ndarray):
        return cuda.to_device(arg) if backend == "cuda" else arg.copy()
    return arg


def run_op(entry, backend, args):
    """Host copies of what one implementation returns, then of its array arguments after the call."""
    prepared = [_prepare(a, backend) for a in args]
    result = entry(kernels_for(backend), *prepared)  # through the registry's check of the declarations
    outputs = list(result) if isinstance(result, tuple) else [result]
    outputs = [o for o in outputs if o is not None]  # an output not asked for (lstm_forward's keep=False)
    outputs += [a for a, given in zip(prepared, args) if isinstance(given, np.ndarray)]
    return [np.asarray(to_host(o)) for o in outputs]


def cases_of(entry):
    rng = np.random.default_rng(zlib.crc32(entry.name.encode()))
    return list(entry.cases(rng))


def _agree(name, entry, i, ref, got, backend):
    assert len(got) == len(ref), f"{name} case {i}: {backend} gives {len(got)} outputs, reference {len(ref)}"
    for k, (r, g) in enumerate(zip(ref, got)):
        where = f"{name} case {i} output {k} ({backend})"
        assert g.shape == r.shape, f"{where}: shape {g.shape} != {r.shape}"
        if entry.tolerance is None:
            np.testing.assert_array_equal(g, r, err_msg=where)
        else:
            rtol, atol = entry.tolerance
            np.testing.assert_allclose(g.astype(np.float64), r.astype(np.float64), rtol=rtol, atol=atol,
                                       err_msg=where)


@cache  # the twin's and the kernel's tests compare with the same reference outputs (run_op copies the arguments)
def checked_cases(name):
    """The op's cases with the reference's outputs of each, the op checked to have all three backends."""
    entry = OPS[name]
    missing = [b for b in ("numpy", "cpu", "cuda") if getattr(entry, b) is None]
    assert not missing, f"{name} lacks {missing}"
    assert entry.cases is not None, f"{name}: its reference registers no cases"
    cases = cases_of(entry)
    assert cases, f"{name}: no cases"
    return [(args, run_op(entry, "numpy", args)) for args in cases]


def agree_with_the_reference(name, backend):
    entry = OPS[name]
    for i, (args, ref) in enumerate(checked_cases(name)):
        got = run_op(entry, backend, args)
        _agree(name, entry, i, ref, got, backend)
        if entry.tolerance is None:  # a float reference computes in float64, the backends in float32
            expected = [np.dtype(np.float32) if a.dtype == np.float64 else a.dtype for a in ref]
            assert [a.dtype for a in got] == expected, f"{name} case {i}: {backend} dtypes differ"


@pytest.mark.parametrize("name", sorted(OPS))
def test_the_cpu_twin_agrees_with_the_reference(name):
    agree_with_the_reference(name, "cpu")


@pytest.mark.parametrize("name", sorted(OPS))
def test_the_simulated_kernel_agrees_with_the_reference(name):
    assert SIMULATED, "tests run the CUDA kernels on the simulator"
    agree_with_the_reference(name, "cuda")
    SIMULATED_HERE.add(name)


def test_every_kernel_was_launched_with_its_registered_signatures():
    """Kept last in this module: the op tests above have filled LAUNCHES. The cases of ops not run here (a
    -k selection) and every launch variant of a tunable kernel at its small sizes (the ops launch the tuned
    one) are launched without running: a signature is the launch's argument types, and the variants'
    results are checked by tests/test_kernel_variants_*.py."""
    registered = {spec.name: set(spec.signatures) for spec in KERNELS}
    with tracing(run=False):
        for name in sorted(set(OPS) - SIMULATED_HERE):
            for args in cases_of(OPS[name]):
                run_op(OPS[name], "cuda", args)
        for tunable in TUNABLES.values():
            for variant in tunable.variants:
                for sizes in tunable.small:
                    tunable.run(variant, sizes)()
    never = sorted(set(registered) - set(LAUNCHES))
    assert registered and not never, f"kernels no registered case launches: {never}"
    for name, launched in LAUNCHES.items():
        assert launched == registered[name], (f"{name}: launched as {sorted(map(str, launched))}, "
                                               f"registered {sorted(map(str, registered[name]))}")
