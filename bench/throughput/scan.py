"""MinGRU scan: effective bandwidth of the forward and backward kernels over (batch, T, channels).

    python -m bench.throughput.scan [--shapes 8x2048x512,1x65536x256] [--backend cuda]

Bytes are those the operation must move: forward reads k, u and writes h (12 bytes per element);
backward reads grad_h, k, u, h and writes dk, du (24). The outputs are allocated once and passed as
`out=` to every timed call, so a call is its launches, not an allocation. On a GPU the table also gives
the fraction of the device's measured copy bandwidth; on the CPU, the speed-up over the NumPy reference.
"""

import numpy as np
import typer

from bench.report import median_seconds, print_table, write_result
from eggnog.kernels.rnn.scan import scan_backward, scan_forward
from eggnog.runtime.cli import cli_help, user_errors

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


def copy_bandwidth(backend, nbytes=1 << 28):
    """Device-to-device copy bandwidth (bytes read + written per second)."""
    from eggnog.kernels.core.cuda_api import cuda

    src = cuda.device_array(nbytes, dtype=np.uint8)
    dst = cuda.device_array(nbytes, dtype=np.uint8)
    seconds = median_seconds(lambda: dst.copy_to_device(src), sync=backend.synchronize)
    return 2 * nbytes / seconds


@app.command(help=cli_help(__doc__))
@user_errors
def main(shapes: str = "4x2048x256,1x16384x128", backend: str = typer.Option(None, help="auto, cpu or cuda."),
         repeat: int = 3):
    from eggnog.kernels.core.backend import select_backend
    from eggnog.kernels.core.registry import ops_for
    from eggnog.kernels.rnn import scan
    from eggnog.runtime.errors import BadInput

    chosen = select_backend(backend)
    peak = copy_bandwidth(chosen) if chosen.name == "cuda" and not chosen.simulated else None
    rows = []
    for text in shapes.split(","):
        try:
            batch, steps, channels = (int(x) for x in text.split("x"))
        except ValueError:
            raise BadInput(f"shape {text!r} is not BATCHxTxCHANNELS") from None
        rng = np.random.default_rng(0)
        k, u, g = (rng.normal(size=(batch, steps, channels)).astype(np.float32) for _ in range(3))
        ops = ops_for("cuda" if chosen.name == "cuda" else "cpu")
        k, u, g = (ops.to_device(x) for x in (k, u, g))
        h, dk, du = (ops.empty((batch, steps, channels), np.float32) for _ in range(3))
        grads = (dk, du, ops.empty((batch, channels), np.float32))
        scan_forward(ops, k, u, out=h)
        elements = batch * steps * channels
        for name, fn, nbytes in (("forward", lambda: scan_forward(ops, k, u, out=h), 12 * elements),
                                 ("backward", lambda: scan_backward(ops, g, k, u, h, out=grads), 24 * elements)):
            seconds = median_seconds(fn, repeat=repeat, sync=chosen.synchronize)
            row = {"op": name, "shape": text, "ms": round(seconds * 1e3, 3),
                   "GB_per_s": round(nbytes / seconds / 1e9, 2)}
            if peak:
                row["fraction_of_copy_bw"] = round(nbytes / seconds / peak, 3)
            elif chosen.name == "cpu":
                ref = (lambda: scan.reference_scan_forward(k, u)) if name == "forward" else \
                    (lambda: scan.reference_scan_backward(g, k, u, h))
                row["speedup_vs_numpy"] = round(median_seconds(ref, repeat=1, warmup=0) / seconds, 1)
            rows.append(row)
    extra = [c for c in ("fraction_of_copy_bw", "speedup_vs_numpy") if c in rows[0]]
    columns = ["op", "shape", "ms", "GB_per_s"] + extra
    print_table(rows, columns)
    extra = {"copy_bandwidth_GB_per_s": round(peak / 1e9, 1)} if peak else {}
    print(f"wrote {write_result('scan_throughput', chosen.device_name, rows, extra)}")


if __name__ == "__main__":
    app()
