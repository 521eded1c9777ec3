"""One cell of the Table 1 suite, in its own process (so its memory peak is its own): a Table 1 LSTM,
one fixed batch of 2 + 10 tokens, a method (BPTT or CD-RGE with n probes) and a mode (series, or
reduce/seeds over the MPI ranks it was launched with). Prints one JSON line on rank 0.

    python bench/table1_cell.py --size 100k --method cdrge96 --mode series
    mpiexec -n 8 python bench/table1_cell.py --size 1M --method cdrge512 --mode seeds

Seconds per step are the median over --steps steps after --warmup steps (CUDA events on a GPU, the
wall clock on the CPU); memory is the peak over the measured steps (runtime/memory.py). A cell whose
estimate (one timed forward pass times the passes of a step) exceeds --max-seconds is skipped.
"""

import json
import os
import statistics
import sys

import typer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.table1_grid import METHODS, SIZES, cell_config  # noqa: E402
from eggnog.runtime.cli import user_errors  # noqa: E402

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help=__doc__)


def estimated_seconds(run, cfg, backend, world):
    """Seconds per step from one timed forward pass (after a compiling one): 2 passes per probe of
    this rank for CD-RGE, about 4 for a BPTT forward and backward."""
    from eggnog.zorn.rge_run import Timer

    batch = run.task.batch(0, cfg.batch_size)
    params = backend.to_device(run.host_params())
    run.model.loss(backend.name, params, batch)
    with Timer(backend) as timer:
        run.model.loss(backend.name, params, batch)
    passes = 4 if cfg.solver == "bptt" else 2 * cfg.probes // world.size
    return timer.seconds * passes


@app.command()
@user_errors
def main(size: str = typer.Option(...), method: str = typer.Option(...), mode: str = typer.Option("series"),
         steps: int = 5, warmup: int = 1, batch_size: int = 1024, task: str = "char_lm",
         max_seconds: float = typer.Option(900, help="Skip the cell when its estimated run time is longer."),
         backend: str = typer.Option(None, help="auto, cpu or cuda.")):
    from eggnog.kernels.backend import select_backend
    from eggnog.runtime.errors import BadInput
    from eggnog.runtime.memory import MemoryMeter
    from eggnog.runtime.world import init_world
    from eggnog.zorn.rge_run import RgeRun, Timer, open_task_corpus

    if size not in SIZES or method not in METHODS:
        raise BadInput(f"unknown cell {size}/{method}: sizes {', '.join(SIZES)}; methods {', '.join(METHODS)}")
    world = init_world()
    if (mode == "series") != (world.size == 1):
        raise BadInput(f"mode {mode!r} on {world.size} rank(s): series runs alone, reduce/seeds under mpiexec")
    cfg = cell_config(size, method, mode, batch_size, task, steps + warmup)
    chosen = select_backend(backend, world.local_rank)
    run = RgeRun(cfg, world, chosen, open_task_corpus(cfg, world))
    estimate = estimated_seconds(run, cfg, chosen, world) * (steps + warmup)
    if estimate > max_seconds:
        if world.is_root:
            print(json.dumps({"size": size, "method": method, "mode": mode, "ranks": world.size,
                              "skipped": f"estimated {estimate:.0f} s, over the budget of {max_seconds:.0f} s"}))
        return
    meter = MemoryMeter(chosen.name)
    seconds, losses = [], []
    for step in range(steps + warmup):
        if step == warmup:
            meter.reset()
        batch = run.task.batch(step, cfg.batch_size)
        with Timer(chosen) as timer:
            losses.append(run.train_step(batch))
        run.step += 1
        meter.sample()
        if step >= warmup:
            seconds.append(timer.seconds)
    if world.is_root:
        print(json.dumps({"size": size, "method": method, "mode": mode, "ranks": world.size,
                          "params": run.model.n_params, "s_per_step": statistics.median(seconds),
                          "steps_timed": len(seconds), "peak_device_bytes": int(meter.peak_device),
                          "peak_own_bytes": meter.peak_own, "loss_first": losses[0], "loss_last": losses[-1],
                          "device": chosen.device_name}))
    meter.stop()


if __name__ == "__main__":
    app()
