"""Generated from the kernel registry: for every op and each of its registered cases, the NumPy
reference, the CPU twin and the CUDA launcher (on the simulator), each called through the registry's check
of the op's declared arguments, agree: bit for bit for integer ops,
within the op's registered (rtol, atol) for float ones. Outputs are the returned arrays and every array
argument after the call (so in-place ops are compared too). The last test checks that each kernel was
launched with exactly the signatures registered for the PTX check."""

import zlib

import numpy as np
import pytest

from eggnog.kernels.core.cuda_api import KERNELS, LAUNCHES, SIMULATED, cuda
from eggnog.kernels.core.placement import kernels_for, to_host
from eggnog.kernels.core.registry import all_ops
from eggnog.kernels.core.tuning import TUNABLES

OPS = all_ops()


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


@pytest.mark.parametrize("name", sorted(OPS))
def test_reference_twin_and_kernel_agree(name):
    assert SIMULATED, "tests run the CUDA kernels on the simulator"
    entry = OPS[name]
    missing = [b for b in ("numpy", "cpu", "cuda") if getattr(entry, b) is None]
    assert not missing, f"{name} lacks {missing}"
    assert entry.cases is not None, f"{name}: its reference registers no cases"
    cases = cases_of(entry)
    assert cases, f"{name}: no cases"
    for i, args in enumerate(cases):
        ref = run_op(entry, "numpy", args)
        cpu = run_op(entry, "cpu", args)
        gpu = run_op(entry, "cuda", args)
        _agree(name, entry, i, ref, cpu, "cpu")
        _agree(name, entry, i, ref, gpu, "cuda")
        if entry.tolerance is None:
            assert [a.dtype for a in cpu] == [a.dtype for a in gpu], f"{name} case {i}: dtypes differ"


def test_every_kernel_was_launched_with_its_registered_signatures():
    """Kept last in this module: the op tests above have filled LAUNCHES (missing ones are run here, and every
    launch variant of a tunable kernel at its small sizes)."""
    registered = {spec.name: set(spec.signatures) for spec in KERNELS}
    if set(registered) - set(LAUNCHES):
        for entry in OPS.values():
            for args in cases_of(entry):
                run_op(entry, "cuda", args)
    if set(registered) - set(LAUNCHES):  # launch variants other than the default: the ops launch the tuned one
        for tunable in TUNABLES.values():
            for variant in tunable.variants:
                for sizes in tunable.small:
                    tunable.run(variant, sizes)()
    never = sorted(set(registered) - set(LAUNCHES))
    assert not never, f"kernels no registered case launches: {never}"
    for name, launched in LAUNCHES.items():
        assert launched == registered[name], (f"{name}: launched as {sorted(map(str, launched))}, "
                                               f"registered {sorted(map(str, registered[name]))}")
