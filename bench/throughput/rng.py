"""Noise generation throughput: elements/s and written GB/s of each kind, per backend.

    python -m bench.throughput.rng [--sizes 1048576,16777216] [--backends cpu,cuda]

CUDA timings exclude the host copy (kernel time, synchronised); CPU timings are the parallel njit twin.
"""


import typer

from bench.report import median_seconds, print_table, write_result
from eggnog.runtime.cli import cli_help, user_errors

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


@app.command(help=cli_help(__doc__))
@user_errors
def main(sizes: str = "1048576,16777216", backends: str = "", repeat: int = 5):
    import numba

    from eggnog.kernels.core.backend import Backend, gpu_usable, select_backend
    from eggnog.kernels.core.cuda_api import SIMULATED, cuda
    from eggnog.kernels.noise import scalar_math
    from eggnog.kernels.noise.streams import KINDS, generate

    names = [b for b in backends.split(",") if b] or (["cpu", "cuda"] if gpu_usable() and not SIMULATED else ["cpu"])
    rows, device = [], "cpu"
    key = scalar_math.stream_key(1, 2, 3, 4)
    for name in names:
        backend = select_backend("cuda") if name == "cuda" else Backend("cpu")
        if name == "cuda":
            device = backend.device_name
        sync = cuda.synchronize if name == "cuda" else (lambda: None)
        for n in (int(s) for s in sizes.split(",")):
            for kind in KINDS:
                seconds = median_seconds(lambda: generate(kind, key, 0, n, backend=name), repeat=repeat, sync=sync)
                width = 4 if kind == "normal_float32" else 1
                rows.append({"backend": name, "kind": kind, "elements": n, "ms": round(seconds * 1e3, 3),
                             "Gelem_per_s": round(n / seconds / 1e9, 3),
                             "GB_per_s_written": round(n * width / seconds / 1e9, 3)})
    print_table(rows, ["backend", "kind", "elements", "ms", "Gelem_per_s", "GB_per_s_written"])
    path = write_result("rng_throughput", device, rows, {"cpu_threads": numba.get_num_threads()})
    print(f"wrote {path}")


if __name__ == "__main__":
    app()
