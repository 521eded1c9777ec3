"""What one training step asks of the device from the host, counted on numba's simulator
(kernels/core/device_counts.py): kernel launches, device allocations, uploads and host waits per step,
after two warm-up steps (the first fills the device cache; in the second, state carried from the first,
as MinGRU's chunk states, is still held while its successor is allocated). These counts are the host
path's cost on a GPU (each launch, allocation, upload or wait costs host time there, whatever the
width), so they are counted at small widths, with no kernel run (what a step asks of the device does not
depend on what its kernels compute; the counts equal those of the runs that ran them, 2026-11-28):

    NUMBA_ENABLE_CUDASIM=1 python -m bench.gpu.host_path

Rows: a Table 1 CD-RGE step (the Table 1 LSTM and batch, heads as at 100k, width --hidden), the same with
BPTT, and a MinGRU BPTT step (width --dim). A CD-RGE step runs its evaluations in passes of --probe-batch
(0: the run's choice, on a GPU all of them while 1 GiB holds them), so its launches grow with the passes,
not the probes; the allocation, upload and wait counts say what the host path does per step.
"""

import os

import typer

from bench.report import print_table, write_result
from eggnog.runtime.cli import cli_help, user_errors

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
COLUMNS = ("step", "launches", "allocations", "allocated_MB", "uploads", "uploaded_MB", "host_waits")


def table1_run(method, hidden, batch_size, probes):
    """The Table 1 cell's run (bench.zorn_paper.table1_grid.cell_config) at 100k's heads and a width of `hidden`."""
    from dataclasses import replace

    from bench.zorn_paper.table1_grid import SIZES, cell_config
    from eggnog.kernels.core.backend import Backend
    from eggnog.runtime.world import init_world
    from eggnog.zorn.rge.run import RgeRun, open_task_corpus

    cfg = cell_config("100k", method, "series", batch_size, "char_lm", 2)
    heads = SIZES["100k"][1]
    cfg = replace(cfg, hidden_size=heads * max(1, hidden // heads), probes=probes or cfg.probes)
    world = init_world()
    run = RgeRun(cfg, world, Backend("cuda", simulated=True), open_task_corpus(cfg, world))

    def step(index):
        run.train_step(run.task.batch(index, cfg.batch_size))
        run.step += 1

    return step


def mingru_run(dim, batch_size):
    """A MinGRU LM BPTT trainer (training/mingru/bptt.py) on the default corpus at width `dim`."""
    from eggnog.corpus.default import default_corpus
    from eggnog.kernels.core.backend import Backend
    from eggnog.runtime.world import init_world
    from eggnog.training.mingru.bptt import BpttRunConfig, BpttTrainer

    cfg = BpttRunConfig(dim=dim, depth=2, batch_size=batch_size, chunk_size=16, steps=2, val_rows=2,
                        val_tokens=32).resolved()
    trainer = BpttTrainer(cfg, init_world(), Backend("cuda", simulated=True), default_corpus())
    return lambda index: trainer.train_step()


def counted_step(step):
    """Counts of step 2, after uncounted steps 0 and 1, with no kernel run: what a step allocates, uploads and
    waits for does not depend on what its kernels compute (device_counts.tracing)."""
    from eggnog.kernels.core.device_counts import counting, tracing

    with tracing(run=False):
        step(0)
        step(1)
        with counting() as counts:
            step(2)
    return counts


def row(name, counts):
    return {"step": name, "launches": counts.launches, "allocations": counts.allocations,
            "allocated_MB": round(counts.allocated_bytes / 2**20, 3), "uploads": counts.uploads,
            "uploaded_MB": round(counts.uploaded_bytes / 2**20, 3), "host_waits": counts.host_waits,
            "by_kernel": dict(sorted(counts.by_kernel.items()))}


@app.command(help=cli_help(__doc__))
@user_errors
def main(hidden: int = typer.Option(24, help="LSTM width for the Table 1 rows (a multiple of 12 heads)."),
         dim: int = typer.Option(16, help="MinGRU width."),
         batch_size: int = typer.Option(2, help="Rows of a batch (the counts do not depend on it)."),
         probes: int = typer.Option(0, help="CD-RGE probes a step (0: the cell's 96)."),
         save: bool = typer.Option(True, help="Write bench/results/host_path-simulator-<date>.json.")):
    from eggnog.runtime.errors import BadInput

    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        raise BadInput("the host-path counts exist on numba's simulator only: run with NUMBA_ENABLE_CUDASIM=1")
    if hidden < 12 or dim < 8 or batch_size < 1 or probes < 0:
        raise BadInput(f"need --hidden >= 12, --dim >= 8, --batch-size >= 1 and --probes >= 0, got {hidden}, "
                       f"{dim}, {batch_size} and {probes}")
    rows = [row("Table 1 CD-RGE", counted_step(table1_run("cdrge96", hidden, batch_size, probes))),
            row("Table 1 BPTT", counted_step(table1_run("bptt", hidden, batch_size, 0))),
            row("MinGRU BPTT", counted_step(mingru_run(dim, batch_size)))]
    print_table(rows, COLUMNS)
    if save:
        path = write_result("host_path", "simulator", rows, {"hidden": hidden, "dim": dim, "batch_size": batch_size,
                                                             "probes": probes or 96})
        print(f"wrote {path}")


if __name__ == "__main__":
    app()
