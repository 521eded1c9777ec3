"""fp32 linear-layer matmuls of kernels/layers/matmul.py against a stated baseline on the same device:
time and GFLOP/s of the forward and backward products over (rows, in, out), and ours as a fraction
of the baseline's GFLOP/s.

    python -m bench.throughput.matmul [--shapes ROWSxINxOUT,...] [--backend cpu|cuda] [--repeat N]

Forward is y = x W^T (2·rows·in·out FLOP); backward is dx = dy W and dW = dy^T x together
(4·rows·in·out FLOP); forward_tf32 is the forward on TF32 tensor cores (kernels/layers/matmul_tf32.py;
on the CPU its twin: inputs rounded to TF32, then BLAS sgemm), against cuBLAS with TF32 on (PyTorch) on
a GPU. Both sides allocate their outputs on every call, as the kernels do.

- CPU: ours is the CPU twin (`cpu_matmul`, `cpu_matmul_backward`), which itself calls NumPy's float32
  matmul, so the fraction shows only what the twin adds (contiguous copies); the baseline is NumPy's
  float32 matmul (BLAS sgemm; the JSON names the BLAS library and the thread count it runs on: the
  backend caps BLAS at one thread unless EGGNOG_BLAS_THREADS or BLAS's own variable says otherwise).
- GPU: ours is the tiled CUDA kernel (`cuda_matmul`, `cuda_matmul_backward`) on device-resident
  inputs, synchronised, no host copy; the baseline is cuBLAS sgemm through CuPy, or through PyTorch
  with TF32 off, whichever is importable (CuPy first), on the same device arrays. With neither, only
  ours is timed. The table also gives ours as a fraction of the device's nominal fp32 peak:
  SMs × FP32 lanes per SM × 2 FLOP per FMA × CLOCK_RATE, the clock the device reports (usually its
  maximum boost clock), not a measured one.
- GPU, library rows: the forward product of every shape by cuBLAS/cuBLASLt on the same device, as
  a user of a library would get it: `torch.matmul` in fp32 (TF32 off), TF32 and bf16, `torch._int_mm`
  for int8 (s8·s8 → s32, the integer EGG's arithmetic) and `cupy.matmul` in fp32. Each library is
  imported only here; one that is not installed gives rows that say so. TFLOP_per_s counts 2
  operations per multiply-add in every precision (for int8 they are integer operations).

The default shapes suit a CPU. The GPU shapes that matter are the layer products of a MinGRU LM at
rows = 8·4096 with in = out = 1536, and the gruboros chunk (rows 2048, dim 1024 → 2·3072 and back):

    python -m bench.throughput.matmul --backend cuda --shapes 32768x1536x1536,2048x1024x6144,2048x3072x1024
"""

import importlib
import os
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import typer

from bench.report import median_seconds, print_table, write_result
from eggnog.runtime.cli import cli_help, user_errors
from eggnog.runtime.errors import BadInput

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)

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
    info = {"compute_capability": "{}.{}".format(*capability), "sm_count": sms, "fp32_lanes_per_sm": lanes,
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


def forward_product(x, w):
    return x @ w.T


def backward_products(dy, x, w):
    return dy @ w, dy.T @ x


class Baseline(NamedTuple):
    name: str
    wrap: Callable  # a view of one of our arrays in the baseline's library, without a copy
    sync: Callable
    forward: Callable = forward_product


def cpu_baseline():
    blas = np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {})
    library = " ".join(filter(None, (blas.get("name"), blas.get("version")))) or "unknown"
    return Baseline(f"NumPy {np.__version__} float32 matmul (BLAS sgemm: {library})", np.asarray, lambda: None)


def gpu_baseline(device_index):
    """cuBLAS sgemm through CuPy or PyTorch (TF32 off); None when neither is importable."""
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None:
        cupy.cuda.Device(device_index).use()
        return Baseline(f"CuPy {cupy.__version__} matmul (cuBLAS sgemm)", cupy.asarray,
                        cupy.cuda.runtime.deviceSynchronize)
    try:
        import torch
    except ImportError:
        return None
    torch.backends.cuda.matmul.allow_tf32 = False  # plain fp32 FMA, as our kernel
    device = torch.device("cuda", device_index)
    return Baseline(f"PyTorch {torch.__version__} matmul (cuBLAS sgemm, TF32 off)",
                    lambda a: torch.as_tensor(a, device=device), lambda: torch.cuda.synchronize(device))


def gpu_tf32_baseline(device_index):
    """cuBLAS with TF32 on, through PyTorch; None when PyTorch is not importable."""
    try:
        import torch
    except ImportError:
        return None
    device = torch.device("cuda", device_index)

    def forward(x, w):
        torch.backends.cuda.matmul.allow_tf32 = True  # only for this call: the fp32 baseline has it off
        y = x @ w.T
        torch.backends.cuda.matmul.allow_tf32 = False
        return y
    return Baseline(f"PyTorch {torch.__version__} matmul (cuBLAS, TF32 on)",
                    lambda a: torch.as_tensor(a, device=device), lambda: torch.cuda.synchronize(device), forward)


def gpu_bf16_baseline(device_index):
    """cuBLAS in bfloat16 through PyTorch, on operands converted once before timing (its best case: our
    kernel converts fp32 operands itself); None when PyTorch is not importable."""
    try:
        import torch
    except ImportError:
        return None
    device = torch.device("cuda", device_index)
    return Baseline(f"PyTorch {torch.__version__} matmul in bfloat16 (cuBLAS)",
                    lambda a: torch.as_tensor(a, device=device).to(torch.bfloat16),
                    lambda: torch.cuda.synchronize(device), lambda x, w: x @ w.T)


# (library, precision, what runs): the library rows of the GPU table
LIBRARY_PRODUCTS = (
    ("torch", "fp32", "torch.matmul, TF32 off (cuBLAS sgemm)"),
    ("torch", "tf32", "torch.matmul, TF32 on (cuBLAS)"),
    ("torch", "bf16", "torch.matmul in bfloat16 (cuBLAS/cuBLASLt)"),
    ("torch", "int8", "torch._int_mm, int8 in, int32 out (cuBLASLt)"),
    ("cupy", "fp32", "cupy.matmul (cuBLAS sgemm)"),
)


def torch_product(torch, precision, batch, d_in, d_out, device_index):
    """x W^T in one precision on the device, and the device's synchronise."""
    device = torch.device("cuda", device_index)
    gen = torch.Generator(device=device).manual_seed(0)
    if precision == "int8":
        x, w = (torch.randint(-128, 128, s, dtype=torch.int8, device=device, generator=gen)
                for s in ((batch, d_in), (d_out, d_in)))
        product = lambda: torch._int_mm(x, w.t())  # noqa: E731
    else:
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        x, w = (torch.randn(s, device=device, generator=gen).to(dtype) for s in ((batch, d_in), (d_out, d_in)))
        mode = "high" if precision == "tf32" else "highest"  # "highest": no TF32 for fp32 products

        def product():
            torch.set_float32_matmul_precision(mode)
            return x @ w.t()
    return product, lambda: torch.cuda.synchronize(device)


def cupy_product(cupy, precision, batch, d_in, d_out, device_index):
    cupy.cuda.Device(device_index).use()
    gen = cupy.random.default_rng(0)
    x, w = (gen.standard_normal(s, dtype=cupy.float32) for s in ((batch, d_in), (d_out, d_in)))
    return (lambda: cupy.matmul(x, w.T)), cupy.cuda.runtime.deviceSynchronize


PRODUCT_BUILDERS = {"torch": torch_product, "cupy": cupy_product}


def library_rows(parsed, device_index, repeat, importer=importlib.import_module):
    """The forward product of every shape by PyTorch's and CuPy's cuBLAS/cuBLASLt on one device, per
    precision; rows of a library that is not installed say so, a product it refuses says why."""
    modules = {}
    for name in PRODUCT_BUILDERS:
        try:
            modules[name] = importer(name)
        except ImportError:
            modules[name] = None
    rows = []
    for text, (batch, d_in, d_out) in parsed:
        for library, precision, what in LIBRARY_PRODUCTS:
            module = modules[library]
            row = {"library": library, "version": getattr(module, "__version__", None), "precision": precision,
                   "op": "forward", "shape": text, "ms": None, "TFLOP_per_s": None, "runs": what,
                   "note": "" if module else "not installed"}
            if module is not None:
                try:
                    product, sync = PRODUCT_BUILDERS[library](module, precision, batch, d_in, d_out, device_index)
                    seconds = median_seconds(product, repeat=repeat, sync=sync)
                    row.update(ms=round(seconds * 1e3, 3),
                               TFLOP_per_s=round(2 * batch * d_in * d_out / seconds / 1e12, 2))
                except (RuntimeError, ValueError) as e:  # e.g. a shape _int_mm does not take
                    row["note"] = "refused: " + (str(e).strip().splitlines() or [type(e).__name__])[0]
            rows.append(row)
    if modules["torch"] is not None:
        modules["torch"].set_float32_matmul_precision("highest")
    return rows


def blas_threads():
    """Thread counts of the BLAS libraries in this process (the backend caps them; see kernels/core/backend.py)."""
    from threadpoolctl import threadpool_info

    return {p["internal_api"]: p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}


@app.command(help=cli_help(__doc__))
@user_errors
def main(shapes: str = typer.Option(CPU_SHAPES, help="Comma-separated ROWSxINxOUT."),
         backend: str = typer.Option(None, help="auto, cpu or cuda."), repeat: int = 5):
    from eggnog.kernels.core.backend import select_backend
    from eggnog.kernels.layers import matmul as mm
    from eggnog.kernels.layers import matmul_bf16 as bf16
    from eggnog.kernels.layers import matmul_tf32 as tf32

    if repeat < 1:
        raise BadInput(f"--repeat must be at least 1, not {repeat}")
    parsed = parse_shapes(shapes)
    chosen = select_backend(backend)
    gpu = chosen.name == "cuda"
    peak, extra = None, {}
    if gpu:
        forward, backward, forward_tf32 = mm.cuda_matmul, mm.cuda_matmul_backward, tf32.cuda_matmul_tf32
        forward_bf16 = bf16.cuda_matmul_bf16
        baseline = None if chosen.simulated else gpu_baseline(chosen.device_index)
        tf32_baseline = None if chosen.simulated else gpu_tf32_baseline(chosen.device_index)
        bf16_baseline = None if chosen.simulated else gpu_bf16_baseline(chosen.device_index)
        if not chosen.simulated:
            from eggnog.kernels.core.cuda_api import cuda

            peak, extra = fp32_peak(cuda.get_current_device())
            extra["fp32_peak_GFLOP_per_s"] = round(peak / 1e9, 1) if peak else None
    else:
        forward, backward, forward_tf32 = mm.cpu_matmul, mm.cpu_matmul_backward, tf32.cpu_matmul_tf32
        forward_bf16 = bf16.cpu_matmul_bf16
        baseline = tf32_baseline = cpu_baseline()
        bf16_baseline = None  # NumPy has no bfloat16 product
        # other work on the machine shows here: BLAS timings halve when a core is busy elsewhere
        extra = {"cpu_threads": os.cpu_count(), "blas_threads": blas_threads(),
                 "load_average_1min": round(os.getloadavg()[0], 2)}
    extra["ours"] = ("CUDA kernels" if gpu else "CPU twins") + " (float_matmul, matmul_tf32, matmul_bf16)"
    extra["baseline"] = baseline.name if baseline else None
    extra["tf32_baseline"] = tf32_baseline.name if tf32_baseline else None
    extra["bf16_baseline"] = bf16_baseline.name if bf16_baseline else None
    if baseline is None:
        print("no baseline on this device (neither CuPy nor PyTorch importable): timing ours only")
    rows = []
    for text, (batch, d_in, d_out) in parsed:
        rng = np.random.default_rng(0)
        x, w, dy = (rng.normal(size=s).astype(np.float32) for s in ((batch, d_in), (d_out, d_in), (batch, d_out)))
        x, w, dy = (chosen.to_device(a) for a in (x, w, dy))
        products = batch * d_in * d_out
        for name, flop, ours, theirs, args, base_of in (
                ("forward", 2 * products, forward, forward_product, (x, w), baseline),
                ("backward", 4 * products, backward, backward_products, (dy, x, w), baseline),
                ("forward_tf32", 2 * products, forward_tf32, tf32_baseline and tf32_baseline.forward, (x, w),
                 tf32_baseline),
                ("forward_bf16", 2 * products, forward_bf16, bf16_baseline and bf16_baseline.forward, (x, w),
                 bf16_baseline)):
            seconds = median_seconds(lambda: ours(*args), repeat=repeat, sync=chosen.synchronize)
            row = {"op": name, "shape": text, "ours_ms": round(seconds * 1e3, 3),
                   "ours_GFLOP_per_s": round(flop / seconds / 1e9, 1),
                   "baseline_ms": None, "baseline_GFLOP_per_s": None, "fraction_of_baseline": None}
            if base_of:
                views = [base_of.wrap(a) for a in args]
                base = median_seconds(lambda: theirs(*views), repeat=repeat, sync=base_of.sync)
                row.update(baseline_ms=round(base * 1e3, 3), baseline_GFLOP_per_s=round(flop / base / 1e9, 1),
                           fraction_of_baseline=round(base / seconds, 3))
            if peak:
                row["fraction_of_fp32_peak"] = round(flop / seconds / peak, 3)
            rows.append(row)
    columns = ["op", "shape", "ours_ms", "ours_GFLOP_per_s", "baseline_ms", "baseline_GFLOP_per_s",
               "fraction_of_baseline"] + (["fraction_of_fp32_peak"] if peak else [])
    print_table([{c: "-" if r[c] is None else r[c] for c in columns} for r in rows], columns)
    if baseline:
        print(f"baseline: {baseline.name}")
    if tf32_baseline and tf32_baseline is not baseline:
        print(f"forward_tf32 baseline: {tf32_baseline.name}")
    if bf16_baseline:
        print(f"forward_bf16 baseline: {bf16_baseline.name}")
    if gpu and not chosen.simulated:
        extra["library_rows"] = library_rows(parsed, chosen.device_index, repeat)
        library_columns = ["library", "precision", "op", "shape", "ms", "TFLOP_per_s", "note"]
        print_table([{c: "-" if r[c] is None else r[c] for c in library_columns} for r in extra["library_rows"]],
                    library_columns)
    print(f"wrote {write_result('matmul_throughput', chosen.device_name, rows, extra)}")


if __name__ == "__main__":
    app()
