"""One cell of the Table 1 suite, in its own process: a Table 1 LSTM, one fixed batch of 2 + 10
tokens, a method (BPTT or CD-RGE with n probes) and a mode (series, or reduce/seeds over the MPI
ranks it was launched with). Prints one JSON line on rank 0. Time and memory are measured in
separate runs, so no memory instrument slows the timed steps:

    python -m bench.zorn_paper.table1_cell --size 100k --method cdrge96 --mode series --measure time
    mpiexec -n 8 python -m bench.zorn_paper.table1_cell --size 1M --method cdrge512 --mode seeds --measure memory

time: seconds per step are the median over --steps steps after --warmup steps (wall clock, the
device synchronised before each reading), with the median split into probes or forward/backward
(eval), collectives (exchange) and update (runtime/step_clock.py). A cell whose estimate (one timed
forward pass times the passes of a step) exceeds --max-seconds is skipped.

memory: the peaks over --steps steps after --warmup steps, per rank (lists in rank order), as
training/memory.py measures them: the process (CPU: resident-set high-water mark, reset after the
warm-up; GPU: NVML's figure for the process) and its own arrays (CPU: tracemalloc, on from before
the model is built; GPU: numba's device allocations, counted exactly from before the context exists).
"""

import json
import statistics

import numpy as np
import typer

from bench.zorn_paper.table1_grid import METHODS, SIZES, cell_config
from eggnog.runtime.cli import cli_help, user_errors

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
MEASURES = ("time", "memory")


def estimated_seconds(run, cfg, backend, world):
    """Seconds per step from one timed forward pass (after a compiling one): 2 passes per probe of
    this rank for CD-RGE, about 4 for a BPTT forward and backward."""
    from eggnog.runtime.step_clock import StepClock

    batch = run.task.batch(0, cfg.batch_size)
    params = backend.to_device(run.host_params())
    run.model.loss(backend.name, params, batch)
    clock = StepClock(backend.synchronize)
    run.model.loss(backend.name, params, batch)
    passes = 4 if cfg.solver == "bptt" else 2 * cfg.probes // world.size
    return clock.split()["step_s"] * passes


def per_rank(world, values):
    """Each rank's values (None allowed) as lists in rank order, on every rank."""
    local = np.array([np.nan if v is None else v for v in values], np.float64)
    gathered = world.allgather_array(local[None, :])
    return [[None if np.isnan(v) else int(v) for v in column] for column in gathered.T]


def time_steps(run, cfg, backend, steps, warmup):
    from eggnog.runtime.step_clock import StepClock

    clock, splits, losses = StepClock(backend.synchronize), [], []
    for step in range(steps + warmup):
        batch = run.task.batch(step, cfg.batch_size)
        clock.start()
        losses.append(run.train_step(batch, clock))
        split = clock.split()
        run.step += 1
        if step >= warmup:
            splits.append(split)
    median = {k: statistics.median(s[k] for s in splits) for k in splits[0]}
    return {"params": run.model.n_params, "s_per_step": median.pop("step_s"), "steps_timed": len(splits),
            **median, "loss_first": losses[0], "loss_last": losses[-1]}


def memory_steps(run, cfg, meter, world, steps, warmup):
    for step in range(steps + warmup):
        if step == warmup:
            meter.reset()
        run.train_step(run.task.batch(step, cfg.batch_size))
        run.step += 1
        meter.sample()
    peaks = meter.peaks()
    process, own = per_rank(world, [peaks["peak_process_bytes"], peaks["peak_own_bytes"]])
    sources = meter.sources()
    return {"peak_process_bytes": process, "peak_own_bytes": own, "steps_measured": steps,
            "memory_process": sources["process"], "memory_own": sources["own"]}


@app.command(help=cli_help(__doc__))
@user_errors
def main(size: str = typer.Option(...), method: str = typer.Option(...), mode: str = typer.Option("series"),
         measure: str = typer.Option("time", help="time or memory (separate runs)."),
         steps: int = 5, warmup: int = 1, batch_size: int = 1024, task: str = "char_lm",
         max_seconds: float = typer.Option(900, help="Skip the cell when its estimated run time is longer."),
         backend: str = typer.Option(None, help="auto, cpu or cuda."),
         probe_batch: int = typer.Option(0, help="CD-RGE evaluations per pass of the LSTM (as extra heads; 0: "
                                                   "the run chooses).")):
    from eggnog.kernels.core.backend import select_backend
    from eggnog.runtime.errors import BadInput
    from eggnog.runtime.world import init_world
    from eggnog.training.memory import MemoryMeter
    from eggnog.zorn.rge.run import RgeRun, open_task_corpus

    if size not in SIZES or method not in METHODS:
        raise BadInput(f"unknown cell {size}/{method}: sizes {', '.join(SIZES)}; methods {', '.join(METHODS)}")
    if measure not in MEASURES:
        raise BadInput(f"--measure {measure!r}: choose time or memory")
    if steps < 1 or warmup < 0:
        raise BadInput(f"need --steps >= 1 and --warmup >= 0, got {steps} and {warmup}")
    world = init_world()
    if (mode == "series") != (world.size == 1):
        raise BadInput(f"mode {mode!r} on {world.size} rank(s): series runs alone, reduce/seeds under mpiexec")
    cfg = cell_config(size, method, mode, batch_size, task, steps + warmup, probe_batch)
    chosen = select_backend(backend, world.local_rank)
    meter = MemoryMeter(chosen, trace_host=True) if measure == "memory" else None
    run = RgeRun(cfg, world, chosen, open_task_corpus(cfg, world))
    cell = {"size": size, "method": method, "mode": mode, "ranks": world.size, "device": chosen.device_name}
    if measure == "time":
        estimate = estimated_seconds(run, cfg, chosen, world) * (steps + warmup)
        if not world.all_true(estimate <= max_seconds):  # every rank skips, or none does
            cell["skipped"] = f"estimated {estimate:.0f} s, over the budget of {max_seconds:.0f} s"
        else:
            cell.update(time_steps(run, cfg, chosen, steps, warmup))
    else:
        cell.update(memory_steps(run, cfg, meter, world, steps, warmup))
        meter.stop()
    if world.is_root:
        print(json.dumps(cell))


if __name__ == "__main__":
    app()
