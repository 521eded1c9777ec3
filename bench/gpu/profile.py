"""Where a GPU step's time goes, one part at a time (the steps of `bash bench/gpu/run.sh --profile`):

    python -m bench.gpu.profile eggroll          # per-kernel time of one EGGROLL evaluate, EGG and transformer
    python -m bench.gpu.profile kernels          # scan and matmul: kernel-only time, allocation timed apart
    python -m bench.gpu.profile mingru           # each op of one MinGRU BPTT step (1024x8, batch 8x2048)
    python -m bench.gpu.profile table1-host      # cProfile (top 25) of one Table 1 100k CD-RGE-96 step
    python -m bench.gpu.profile ncu              # Nsight Compute sections of the two fused epochs

Kernel times come from CUDA events around every launch (kernels/core/kernel_timer.py, on when
EGGNOG_KERNEL_TIMES=1 is set before eggnog is imported; each part sets it for itself). Every part runs
its work once untimed (compilation, first touch), then once measured: wall seconds with the device
synchronised, the kernels' summed event time, and the rest (launch overhead, allocation, host work).
Each part writes bench/results/gpu_profile_<part>-<GPU>-<date>.json and prints a table.
"""

import os

os.environ.setdefault("EGGNOG_KERNEL_TIMES", "1")  # before any kernel module is imported

import cProfile  # noqa: E402
import io  # noqa: E402
import pstats  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import typer  # noqa: E402

from bench.report import print_table, write_result  # noqa: E402
from eggnog.runtime.cli import cli_help, user_errors  # noqa: E402

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None, help=cli_help(__doc__))

EGG = {"depth": 6, "dim": 256, "population": 32768, "tokens": 16}
DEGGS = {"depth": 4, "dim": 256, "head_dim": 64, "vocab_size": 8192, "population": 40960, "tokens": 64}
NCU_SECTIONS = ("SpeedOfLight", "Occupancy", "WarpStateStats")
NCU_KERNELS = ("egg_epoch_cuda", "transformer_epoch_cuda")


def gpu():
    from eggnog.kernels.core.backend import select_backend
    from eggnog.kernels.core.cuda_api import cuda
    from eggnog.runtime.errors import BadInput

    backend = select_backend("cuda")
    if backend.simulated and os.environ.get("EGGNOG_PROFILE_ON_SIMULATOR") != "1":
        raise BadInput("the profile measures a real GPU; under the simulator its times mean nothing")
    return backend, cuda


def measured(fn, backend, cuda, repeat=1):
    """Run `fn` once untimed, then `repeat` times measured: (wall ms per call, per-kernel rows per call)."""
    from eggnog.kernels.core import kernel_timer

    fn()
    kernel_timer.reset(cuda)
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    backend.synchronize()
    wall = (time.perf_counter() - start) * 1e3 / repeat
    rows = kernel_timer.collect(cuda)
    for row in rows:
        row["launches"] = row["launches"] / repeat
        row["ms"] = round(row["ms"] / repeat, 4)
    return wall, rows


def kernel_rows(part, wall, rows):
    """The kernels of one measured call and the remainder, each with its share of the wall time."""
    kernels = sum(r["ms"] for r in rows)
    out = [{"part": part, **r, "share": round(r["ms"] / wall, 3) if wall > 0 else None} for r in rows]
    out.append({"part": part, "kernel": "(not in kernels: launches, allocation, host)", "launches": None,
                "ms": round(wall - kernels, 4), "share": round(1 - kernels / wall, 3) if wall > 0 else None})
    out.append({"part": part, "kernel": "(wall, device synchronised)", "launches": None, "ms": round(wall, 4),
                "share": 1.0})
    return out


def finish(name, backend, rows, extra):
    print_table(rows, [c for c in ("part", "kernel", "launches", "ms", "share") if c in rows[0]])
    print(f"wrote {write_result('gpu_profile_' + name, backend.device_name, rows, extra)}")


def eggroll_strategy(backend, model_name, sizes):
    from eggnog.evolution.eggroll import IntEggroll
    from eggnog.evolution.es_trainer import EsRunConfig
    from eggnog.evolution.transformer_es_config import TransformerEsRunConfig

    extra = {k: sizes[k] for k in ("head_dim", "vocab_size") if k in sizes}
    config_cls = TransformerEsRunConfig if model_name == "transformer" else EsRunConfig
    cfg = config_cls(depth=sizes["depth"], dim=sizes["dim"], tokens_per_update=sizes["tokens"], group_size=2,
                     population=sizes["population"], **extra)
    cfg.check()
    model = cfg.build_model()
    strategy = IntEggroll(model, cfg, backend, model.init_params(0), 0)
    vocab = getattr(model.cfg, "vocab", 256)
    windows = np.random.default_rng(0).integers(1, vocab, (sizes["population"], sizes["tokens"] + 1))
    layers, width = model.state_dims
    return strategy, windows.astype(model.token_dtype), (layers, sizes["population"], width)


@app.command("eggroll", help="Per-kernel time of one EGGROLL evaluate: EGG 6x256 and d-eggs' transformer.")
@user_errors
def eggroll():
    backend, cuda = gpu()
    rows, rates = [], {}
    for model_name, sizes in (("egg", EGG), ("transformer", DEGGS)):
        strategy, windows, state_shape = eggroll_strategy(backend, model_name, sizes)
        for perturbed in (True, False):
            part = f"{model_name} {'perturbed' if perturbed else 'plain'}"
            states = backend.zeros(state_shape, np.int8)
            wall, kernels = measured(lambda: strategy.evaluate(windows, states, perturbed=perturbed), backend, cuda)
            rows += kernel_rows(part, wall, kernels)
            rates[part] = round(sizes["population"] * sizes["tokens"] / wall * 1e3)
    finish("eggroll", backend, rows, {"sizes": {"egg": EGG, "transformer": DEGGS},
                                      "member_tokens_per_s": rates})


def allocation_ms(backend, cuda, nbytes, repeat=5):
    """Milliseconds of one device allocation of `nbytes` (median; the array freed between calls)."""
    times = []
    for _ in range(repeat + 1):
        backend.synchronize()
        start = time.perf_counter()
        cuda.device_array(int(nbytes), np.uint8)
        backend.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return round(sorted(times[1:])[repeat // 2], 4)


@app.command("kernels", help="Scan and matmul at the benchmarks' shapes: kernel-only time, allocation apart.")
@user_errors
def kernels(repeat: int = typer.Option(5, help="Measured calls of each op (their mean).")):
    from eggnog.kernels.layers import matmul, matmul_tf32
    from eggnog.kernels.rnn import scan

    backend, cuda = gpu()
    rng = np.random.default_rng(0)
    batch, steps, channels = 8, 4096, 1536
    k, u, g = (backend.to_device(rng.normal(size=(batch, steps, channels)).astype(np.float32)) for _ in range(3))
    h = scan.cuda_scan_forward(k, u)
    rows_, d_in, d_out = 32768, 1536, 1536
    x = backend.to_device(rng.normal(size=(rows_, d_in)).astype(np.float32))
    w = backend.to_device(rng.normal(size=(d_out, d_in)).astype(np.float32))
    dy = backend.to_device(rng.normal(size=(rows_, d_out)).astype(np.float32))
    ops = (("scan forward 8x4096x1536", lambda: scan.cuda_scan_forward(k, u), 4 * batch * steps * channels),
           ("scan backward 8x4096x1536", lambda: scan.cuda_scan_backward(g, k, u, h), 8 * batch * steps * channels),
           ("fp32 matmul 32768x1536x1536", lambda: matmul.cuda_matmul(x, w), 4 * rows_ * d_out),
           ("fp32 matmul backward", lambda: matmul.cuda_matmul_backward(dy, x, w), 4 * (rows_ * d_in + d_out * d_in)),
           ("TF32 matmul 32768x1536x1536", lambda: matmul_tf32.cuda_matmul_tf32(x, w), 4 * rows_ * d_out))
    rows = []
    for part, fn, out_bytes in ops:
        wall, timed = measured(fn, backend, cuda, repeat)
        rows += kernel_rows(part, wall, timed)
        rows.append({"part": part, "kernel": f"(allocating its {out_bytes / 2**20:.0f} MiB of outputs, apart)",
                     "launches": None, "ms": allocation_ms(backend, cuda, out_bytes), "share": None})
    finish("kernels", backend, rows, {"repeat": repeat})


@app.command("mingru", help="Each op (kernel) of one MinGRU BPTT step, dim 1024 x depth 8, batch 8 x 2048.")
@user_errors
def mingru(dim: int = 1024, depth: int = 8, batch: int = 8, seq: int = 2048):
    from bench.throughput.mingru_side_by_side import bptt_step

    backend, cuda = gpu()
    model, step = bptt_step(backend, dim, depth, batch, seq)
    wall, timed = measured(step, backend, cuda)
    finish("mingru", backend, kernel_rows(f"MinGRU {dim}x{depth} BPTT step, batch {batch}x{seq}", wall, timed),
           {"model": f"{dim}x{depth}", "params": model.n_params, "batch": batch, "seq": seq})


@app.command("table1-host", help="cProfile of one Table 1 100k CD-RGE-96 series step (top 25 by own time).")
@user_errors
def table1_host(top: int = 25):
    from bench.zorn_paper.table1_grid import cell_config
    from eggnog.kernels.core import kernel_timer
    from eggnog.runtime.step_clock import StepClock
    from eggnog.runtime.world import init_world
    from eggnog.zorn.rge.run import RgeRun, open_task_corpus

    backend, cuda = gpu()
    world = init_world()
    cfg = cell_config("100k", "cdrge96", "series", 1024, "char_lm", 2)
    run = RgeRun(cfg, world, backend, open_task_corpus(cfg, world))
    clock = StepClock(backend.synchronize)

    def step():
        clock.start()
        run.train_step(run.task.batch(run.step, cfg.batch_size), clock)
        clock.split()
        run.step += 1

    step()  # compiles
    profiler = cProfile.Profile()
    kernel_timer.reset(cuda)
    start = time.perf_counter()
    profiler.runcall(step)
    wall = (time.perf_counter() - start) * 1e3
    timed = kernel_timer.collect(cuda)
    stats = pstats.Stats(profiler, stream=io.StringIO())
    rows = []
    for (file, line, name), (_, calls, own, cumulative, _) in sorted(stats.stats.items(), key=lambda i: -i[1][2])[:top]:
        where = re.sub(r".*/(eggnog|numba_cuda|numba|site-packages)/", r"\1/", file)
        rows.append({"function": f"{where}:{line}({name})", "calls": calls, "own_ms": round(own * 1e3, 2),
                     "cumulative_ms": round(cumulative * 1e3, 2)})
    kernels_ms = round(sum(r["ms"] for r in timed), 3)
    print_table(rows, ["function", "calls", "own_ms", "cumulative_ms"])
    print(f"step (under cProfile): {wall:.1f} ms wall, {kernels_ms} ms in {sum(r['launches'] for r in timed)} "
          "kernel launches")
    extra = {"cell": "100k cdrge96 series, batch 1024", "wall_ms_under_cprofile": round(wall, 2),
             "kernel_ms": kernels_ms, "kernels": timed}
    print(f"wrote {write_result('gpu_profile_table1_host', backend.device_name, rows, extra)}")


def ncu_sections(kernel_name, command, timeout):
    """The sections' lines of one launch of `kernel_name` (the second: the first may compile), or why none."""
    # the card's clocks as they are: ncu's default would lock them to base for the measurement
    argv = ["ncu", "--clock-control", "none", "--kernel-name", f"regex:{kernel_name}", "--launch-skip", "1",
            "--launch-count", "1"]
    for section in NCU_SECTIONS:
        argv += ["--section", section]
    try:
        done = subprocess.run(argv + command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"ncu did not finish within {timeout} s"
    lines = [line.rstrip() for line in done.stdout.splitlines()]
    start = next((i for i, line in enumerate(lines) if kernel_name in line and "(" in line), None)
    if done.returncode or start is None:
        last = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["no output"])[-1]
        return None, f"ncu exit {done.returncode}: {last.strip()}"
    return [line for line in lines[start:] if line.strip() and not line.startswith("==")], None


@app.command("ncu", help="Nsight Compute's SpeedOfLight, Occupancy and WarpStateStats of the two fused epochs.")
@user_errors
def ncu(timeout: int = typer.Option(150, help="Seconds allowed to each ncu run.")):
    backend, _ = gpu()
    rows, sections = [], {}
    if shutil.which("ncu") is None:
        print("ncu is not on PATH: no Nsight Compute sections")
        rows = [{"kernel": k, "status": "skipped", "note": "ncu is not on PATH"} for k in NCU_KERNELS]
    else:
        for kernel_name in NCU_KERNELS:
            model = "egg" if kernel_name.startswith("egg") else "transformer"
            command = [sys.executable, "-m", "bench.gpu.profile", "ncu-target", "--model", model]
            lines, why = ncu_sections(kernel_name, command, timeout)
            sections[kernel_name] = lines
            rows.append({"kernel": kernel_name, "status": "ok" if lines else "failed", "note": why or ""})
            for line in lines or []:
                print(line)
    print_table(rows, ["kernel", "status", "note"])
    print(f"wrote {write_result('gpu_profile_ncu', backend.device_name, rows, {'sections': sections})}")


@app.command("ncu-target", hidden=True, help="Two evaluates of one model: what `ncu` profiles (the second).")
@user_errors
def ncu_target(model: str = "egg"):
    backend, _ = gpu()
    sizes = EGG if model == "egg" else DEGGS  # the eggroll part's sizes: a grid of several waves
    strategy, windows, state_shape = eggroll_strategy(backend, model, sizes)
    states = backend.zeros(state_shape, np.int8)
    for _ in range(2):
        strategy.evaluate(windows, states, perturbed=True)
    backend.synchronize()


if __name__ == "__main__":
    app()
