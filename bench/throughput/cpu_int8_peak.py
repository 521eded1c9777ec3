"""The CPU's int8 dot-product peak, stated and measured, for benchmarks to compare against.

- stated: 2 vpmaddwd per cycle x 16 int8 MACs (int16 lanes) x the clock /proc/cpuinfo gives x the
  threads numba runs (AVX2 without VNNI: two 256-bit multiply-add pipes, as on AMD Zen 3);
- measured: vpmaddwd issued back to back on every numba thread (12 independent chains each, no
  memory access), which includes turbo clocks and any sharing of vector units between threads
  (virtual CPUs that are siblings of one physical core).

    python -m bench.throughput.cpu_int8_peak
"""

import time
from pathlib import Path

import llvmlite.ir as ir
import numba
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from eggnog.kernels.egg.epoch_cpu import vpmaddwd_ir

VPMADDWD_PER_CYCLE = 2
MACS_PER_VPMADDWD = 16  # 256-bit register of int16 lanes
CHAINS = 12  # enough independent chains to cover the instruction's latency on both pipes

_V16 = ir.VectorType(ir.IntType(16), 16)


@intrinsic
def _chains(typingctx, steps):
    """CHAINS dependent vpmaddwd chains of `steps` each; returns a value that depends on all of them."""
    sig = types.int64(steps)

    def codegen(context, builder, signature, args):
        ones = ir.Constant(_V16, [1] * 16)
        slots = [cgutils.alloca_once_value(builder, ir.Constant(_V16, [c + 3 * i for i in range(16)]))
                 for c in range(CHAINS)]
        with cgutils.for_range(builder, args[0]):
            for slot in slots:
                builder.store(builder.bitcast(vpmaddwd_ir(builder, builder.load(slot), ones), _V16), slot)
        total = ir.Constant(ir.IntType(16), 0)
        for slot in slots:
            total = builder.add(total, builder.extract_element(builder.load(slot), ir.Constant(ir.IntType(32), 0)))
        return builder.sext(total, ir.IntType(64))

    return sig, codegen


@numba.njit(parallel=True)
def _run(steps, threads):
    out = np.zeros(threads, np.int64)
    for i in numba.prange(threads):
        out[i] = _chains(steps + i)
    return out


def clock_ghz():
    """The clock /proc/cpuinfo states (the first core's 'cpu MHz'), or None."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu MHz"):
                return float(line.split(":", 1)[1]) / 1000
    except (OSError, ValueError):
        pass
    return None


def stated_gmacs():
    ghz = clock_ghz()
    return None if ghz is None else VPMADDWD_PER_CYCLE * MACS_PER_VPMADDWD * ghz * numba.get_num_threads()


def measured_gmacs(seconds=0.5):
    """int8 MACs per second (1e9) of back-to-back vpmaddwd on every numba thread, best of three."""
    threads = numba.get_num_threads()
    _run(10, threads)
    steps, best = 1_000_000, 0.0
    for _ in range(3):
        start = time.perf_counter()
        _run(steps, threads)
        elapsed = time.perf_counter() - start
        best = max(best, threads * steps * CHAINS * MACS_PER_VPMADDWD / elapsed / 1e9)
        steps = max(steps, int(steps * seconds / max(elapsed, 1e-6)))
    return best


def peaks():
    """{"stated_gmacs", "measured_gmacs", "clock_ghz", "threads", "formula"} for a result file."""
    return {"stated_gmacs": stated_gmacs(), "measured_gmacs": round(measured_gmacs(), 1), "clock_ghz": clock_ghz(),
            "threads": numba.get_num_threads(),
            "formula": f"{VPMADDWD_PER_CYCLE} vpmaddwd/cycle x {MACS_PER_VPMADDWD} int8 MAC x clock x threads"}


if __name__ == "__main__":
    for key, value in peaks().items():
        print(f"{key}: {value}")
