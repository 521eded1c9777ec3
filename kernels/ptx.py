"""Compile every registered CUDA kernel to PTX, with or without a GPU.

    python -m kernels.ptx            # prints one JSON line per kernel and signature

Needs numba-cuda's compilers (the cu12/cu13 extra) but no driver: kernels that call device
functions ask numba for the current device, which is answered with the target compute capability
when no GPU is present.
"""

import importlib
import json
import pkgutil
import re
import sys
import types

import kernels
from kernels.cuda_api import KERNELS, SIMULATED, cuda

F64_INSTRUCTION = re.compile(r"^\s*[a-z][\w.]*\.f64\b", re.MULTILINE)


def import_all_kernel_modules():
    for module in pkgutil.iter_modules(kernels.__path__):
        if module.name != "ptx":
            importlib.import_module(f"kernels.{module.name}")


def compile_all(cc=(9, 0)):
    """Yield dicts with name, signature, ptx, f64 instruction count and dp4a count."""
    if SIMULATED:
        raise RuntimeError("PTX cannot be compiled with NUMBA_ENABLE_CUDASIM=1")
    import numba.cuda.dispatcher as dispatcher

    if not cuda.is_available():
        dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=cc)
    import_all_kernel_modules()
    for spec in KERNELS:
        for sig in spec.signatures:
            ptx, _ = cuda.compile_ptx(spec.pyfunc, sig, cc=cc)
            yield {
                "name": spec.name,
                "signature": str(sig),
                "float64_free": spec.float64_free,
                "f64_instructions": len(F64_INSTRUCTION.findall(ptx)),
                "dp4a_instructions": ptx.count("dp4a."),
                "ptx_bytes": len(ptx),
            }


def main():
    for row in compile_all():
        json.dump(row, sys.stdout)
        sys.stdout.write("\n")


if __name__ == "__main__":
    main()
