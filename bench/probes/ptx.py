"""Compile every probe kernel to PTX without a GPU, as `python -m eggnog.kernels.checks.ptx_compile` does
for the kernels of the package (which imports only kernels/, so it never sees these):

    NUMBA_ENABLE_CUDASIM=0 python -m bench.probes.ptx     # one JSON line per probe kernel and signature

A last line gives the persistent LSTM loop's instructions a trip as the probe counts them (its SASS when
ptxas and cuobjdump are installed)."""

import json
import sys

from bench.probes.catalog import PROBES

PREFIX = "bench.probes."


# instructions a probe exists to time, counted in its PTX
COUNTED = {"mma_instructions": "mma.sync.aligned.m16n8k32", "v4_global_loads": "ld.global.nc.v4",
           "async_copies": "cp.async.cg", "grid_syncs": "cudaCGSynchronize,"}


def compile_probes(cc=(9, 0)):
    """The rows of ptx_compile.compile_all for the probe kernels (each probe module imported first), with
    the counts of COUNTED."""
    from eggnog.kernels.checks.ptx_compile import compile_all

    for probe in PROBES:
        probe.module()
    for found in compile_all(cc=cc, only=PREFIX, with_ptx=True):
        ptx = found.pop("ptx")
        yield found | {key: ptx.count(text) for key, text in COUNTED.items()}


def main():
    for found in compile_probes():
        json.dump(found, sys.stdout)
        sys.stdout.write("\n")
    from bench.probes.lstm_loop import loop_instructions

    per_trip, source = loop_instructions((9, 0))
    json.dump({"lstm_loop_instructions_a_trip": per_trip, "from": source}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
