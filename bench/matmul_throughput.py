"""fp32 linear-layer matmuls: time and GFLOP/s of the forward and backward products over (rows, in, out).

    python bench/matmul_throughput.py [--shapes ROWSxINxOUT,...] [--backend cpu|cuda] [--repeat N]

Forward is y = x W^T (2·rows·in·out FLOP); backward is dx = dy W and dW = dy^T x together
(4·rows·in·out FLOP). CUDA timings are of the kernels on device-resident inputs, synchronised,
including the allocation of the outputs that `kernels.float_matmul` makes on every call; no host copy.

The default shapes suit a CPU. The GPU shapes that matter are the layer products of a MinGRU LM at
rows = 8·4096 with in = out = 1536, and the gruboros chunk (rows 2048, dim 1024 → 2·3072 and back):

    python bench/matmul_throughput.py --backend cuda --shapes 32768x1536x1536,2048x1024x6144,2048x3072x1024

On a GPU (not the simulator) the table also gives the fraction of the device's fp32 peak, computed
from its attributes as SMs × FP32 lanes per SM × 2 FLOP per FMA × CLOCK_RATE: the nominal peak at the
clock the device reports (usually its maximum boost clock), not a measured one. On the CPU it gives
the speed-up of the twin (float32 BLAS) over the float64 NumPy reference.
"""

import os
import sys

import numpy as np
import typer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.report import median_seconds, print_table, write_result  # noqa: E402
from eggnog.runtime.errors import BadInput  # noqa: E402
from eggnog.runtime.cli import user_errors  # noqa: E402

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help=__doc__)

CPU_SHAPES = "4096x1536x1536,2048x1024x6144,2048x3072x1024"


def fp32_lanes_per_sm(capability):
    """FP32 FMA units per SM for a compute capability (major, minor); None where not known here."""
    major, minor = capability
    if major == 7 or capability == (8, 0):
        return 64
    if capability in ((8, 6), (8, 7), (8, 9), (9, 0)) or major in (10, 12):
        return 128
    return None


def fp32_peak(device):
    """Nominal fp32 FLOP/s of a numba CUDA device at its reported clock, with the numbers it came from;
    the FLOP/s is None when the architecture or the clock is unknown."""
    capability = tuple(device.compute_capability)
    lanes = fp32_lanes_per_sm(capability)
    sms = device.MULTIPROCESSOR_COUNT
    try:
        clock_khz = device.CLOCK_RATE
    except Exception:  # the attribute is deprecated in recent CUDA; a missing one means no peak
        clock_khz = None
    info = {"compute_capability": "%d.%d" % capability, "sm_count": sms, "fp32_lanes_per_sm": lanes,
            "clock_MHz": round(clock_khz / 1e3) if clock_khz else None}
    flops = sms * lanes * 2 * clock_khz * 1e3 if lanes and clock_khz else None
    return flops, info


def parse_shapes(shapes):
    parsed = []
    for text in shapes.split(","):
        try:
            dims = tuple(int(x) for x in text.strip().split("x"))
        except ValueError:
            dims = ()
        if len(dims) != 3 or min(dims) < 1:
            raise BadInput(f"shape {text!r} is not ROWSxINxOUT with three positive integers")
        parsed.append((text.strip(), dims))
    return parsed


@app.command()
@user_errors
def main(shapes: str = typer.Option(CPU_SHAPES, help="Comma-separated ROWSxINxOUT."),
         backend: str = typer.Option(None, help="auto, cpu or cuda."), repeat: int = 5):
    from eggnog.kernels import float_matmul as mm
    from eggnog.kernels.backend import select_backend

    if repeat < 1:
        raise BadInput(f"--repeat must be at least 1, not {repeat}")
    parsed = parse_shapes(shapes)
    chosen = select_backend(backend)
    peak, extra = None, {}
    if chosen.name == "cuda" and not chosen.simulated:
        from eggnog.kernels.cuda_api import cuda

        peak, extra = fp32_peak(cuda.get_current_device())
        if peak:
            extra["fp32_peak_GFLOP_per_s"] = round(peak / 1e9, 1)
        else:
            print(f"no fp32 peak known for this device ({extra}); fraction_of_fp32_peak is left out")
    elif chosen.name == "cpu":
        # other work on the machine shows here: BLAS timings halve when a core is busy elsewhere
        extra = {"cpu_threads": os.cpu_count(), "load_average_1min": round(os.getloadavg()[0], 2)}
    rows = []
    for text, (batch, d_in, d_out) in parsed:
        rng = np.random.default_rng(0)
        x = rng.normal(size=(batch, d_in)).astype(np.float32)
        w = rng.normal(size=(d_out, d_in)).astype(np.float32)
        dy = rng.normal(size=(batch, d_out)).astype(np.float32)
        if chosen.name == "cuda":
            x, w, dy = (chosen.to_device(a) for a in (x, w, dy))
            forward, backward = mm.cuda_forward, mm.cuda_backward
        else:
            forward, backward = mm.cpu_forward, mm.cpu_backward
        products = batch * d_in * d_out
        for name, fn, flop in (("forward", lambda: forward(x, w), 2 * products),
                               ("backward", lambda: backward(dy, x, w), 4 * products)):
            seconds = median_seconds(fn, repeat=repeat, sync=chosen.synchronize)
            row = {"op": name, "shape": text, "ms": round(seconds * 1e3, 3),
                   "GFLOP_per_s": round(flop / seconds / 1e9, 1)}
            if peak:
                row["fraction_of_fp32_peak"] = round(flop / seconds / peak, 3)
            elif chosen.name == "cpu":
                ref = (lambda: mm.reference_forward(x, w)) if name == "forward" else \
                    (lambda: mm.reference_backward(dy, x, w))
                row["speedup_vs_numpy"] = round(median_seconds(ref, repeat=1, warmup=0) / seconds, 1)
            rows.append(row)
    columns = ["op", "shape", "ms", "GFLOP_per_s"] + \
        [c for c in ("fraction_of_fp32_peak", "speedup_vs_numpy") if c in rows[0]]
    print_table(rows, columns)
    print(f"wrote {write_result('matmul_throughput', chosen.device_name, rows, extra)}")


if __name__ == "__main__":
    app()
