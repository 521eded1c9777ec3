"""Compile every registered CUDA kernel to PTX, with or without a GPU.

    python -m eggnog.kernels.checks.ptx_compile               # one JSON line per kernel and signature (a
                                                              # process per core, up to 8)
    python -m eggnog.kernels.checks.ptx_compile --inventory   # the names of every cuda.jit kernel in the package

Needs numba-cuda's compilers (the cu12/cu13 extra) but no driver: kernels that call device
functions ask numba for the current device, which is answered with the target compute capability
when no GPU is present.
"""

import json
import os
import re
import sys
import types
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

from eggnog.kernels.core.cuda_api import KERNELS, SIMULATED, cuda
from eggnog.kernels.core.registry import import_families

MAX_PROCESSES = 8
F64_INSTRUCTION = re.compile(r"^\s*[a-z][\w.]*\.f64\b", re.MULTILINE)


def _require_compiler(cc):
    if SIMULATED:
        raise RuntimeError("PTX cannot be compiled with NUMBA_ENABLE_CUDASIM=1")
    import numba.cuda.dispatcher as dispatcher

    if not cuda.is_available():
        dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=cc)


def jit_kernels():
    """Names of every cuda.jit kernel (not device function) bound in a module of the package, whether
    or not it was registered with `cuda_api.kernel`."""
    from numba.cuda.dispatcher import CUDADispatcher

    import_families()
    found = set()
    for name, module in list(sys.modules.items()):
        if name.startswith("eggnog.kernels."):
            for attr in vars(module).values():
                if isinstance(attr, CUDADispatcher) and not attr.targetoptions.get("device"):
                    found.add(f"{attr.py_func.__module__}.{attr.py_func.__name__}")
    return sorted(found)


def compile_all(cc=(9, 0), with_ptx=False, only=None, share=(0, 1)):
    """Yield dicts with name, signature, f64 instruction count, dp4a count and the kernel's declared
    properties; with `with_ptx`, also the PTX text itself (for the static report's ptxas pass); with
    `only`, just the kernels whose name contains that text; with share (k, n), the k-th of every n
    signatures."""
    _require_compiler(cc)
    import_families()
    pairs = [(spec, sig) for spec in KERNELS if only is None or only in spec.name for sig in spec.signatures]
    for spec, sig in pairs[share[0]::share[1]]:
        bounds = {"launch_bounds": spec.launch_bounds} if spec.launch_bounds else {}
        ptx, _ = cuda.compile_ptx(spec.pyfunc, sig, cc=cc, **bounds)
        row = {
            "name": spec.name,
            "signature": str(sig),
            "float64_free": spec.float64_free,
            "tensor_cores": spec.tensor_cores,
            "block": spec.block,
            "f64_instructions": len(F64_INSTRUCTION.findall(ptx)),
            "dp4a_instructions": ptx.count("dp4a."),
            "ptx_bytes": len(ptx),
        }
        if with_ptx:
            row["ptx"] = ptx
        yield row


def _compiled_share(share):
    return list(compile_all(share=share))


def main():
    if sys.argv[1:] == ["--inventory"]:
        json.dump(jit_kernels(), sys.stdout)
        return
    # a process per core (numba compiles one signature at a time), the rows printed in the registry's order
    n = min(os.cpu_count() or 1, MAX_PROCESSES)
    with ProcessPoolExecutor(n, mp_context=get_context("spawn")) as pool:
        shares = list(pool.map(_compiled_share, [(k, n) for k in range(n)]))
    for i in range(sum(map(len, shares))):
        json.dump(shares[i % n][i // n], sys.stdout)
        sys.stdout.write("\n")


if __name__ == "__main__":
    main()
