"""Train the float MinGRU LM by truncated BPTT (gruboros style), data-parallel over MPI ranks.

    python bin/train_bptt.py                                  # embedded default corpus, laptop size
    srun --mpi=pmi2 python -m mpi4py bin/train_bptt.py --params 100m --chunk-size 2048 --context-chunks 8
"""

from dataclasses import fields
from pathlib import Path

import typer

from eggnog.runtime.cli import user_errors

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help=__doc__)


@app.command()
@user_errors
def main(
    data: Path = typer.Option(None, help="Corpus (.bin/.h5/.zarr); default: the embedded stdlib corpus."),
    params: str = typer.Option(None, help="Parameter budget with k/m/g = 1024^n suffixes, solved as gruboros does."),
    dim: int = typer.Option(None, help="Model width [64 without --params]."),
    depth: int = typer.Option(None, help="Blocks [2 without --params]."),
    expansion_factor: float = typer.Option(None, help="minGRU inner width / dim [1.5]."),
    ff_mult: float = typer.Option(None, help="Feed-forward width / dim [4]."),
    chunk_size: int = typer.Option(None, help="Bytes per TBPTT chunk [128]."),
    context_chunks: int = typer.Option(None, help="Chunks per sample, state carried between them [4]."),
    batch_size: int = typer.Option(None, help="Samples per chunk step over all ranks [8]."),
    grad_accum: int = typer.Option(None, help="Chunk steps per optimizer step [1]."),
    steps: int = typer.Option(None, help="Optimizer steps in total [1500]."),
    optimizer: str = typer.Option(None, help="sf-adamw, adamw or sgd [sf-adamw]."),
    lr: float = typer.Option(None, help="Learning rate [2.5e-3]."),
    beta1: float = typer.Option(None, help="First moment decay (SGD: unused) [0.9]."),
    beta2: float = typer.Option(None, help="Second moment decay [0.999]."),
    weight_decay: float = typer.Option(None, help="Weight decay [0]."),
    warmup_steps: int = typer.Option(None, help="Linear warm-up steps (sf-adamw) [0]."),
    seed: int = typer.Option(None, help="Seed of initialisation and data [0]."),
    validate_every: int = typer.Option(None, help="Steps between validations [25]."),
    checkpoint_every: int = typer.Option(None, help="Steps between checkpoints [100]."),
    val_rows: int = typer.Option(None, help="Validation rows, each from a zero state [32]."),
    val_tokens: int = typer.Option(None, help="Bytes scored per validation row [512]."),
    run_dir: Path = typer.Option(None, help="Run directory [runs/bptt-<time>]."),
    resume: Path = typer.Option(None, help="Continue the run in this directory from its latest checkpoint."),
    backend: str = typer.Option(None, help="auto, cpu or cuda [EGGNOG_BACKEND or auto]."),
):
    from eggnog.training.bptt import BpttRunConfig, BpttTrainer
    from eggnog.training.launch import launch

    given = {k: v for k, v in locals().items() if k in {f.name for f in fields(BpttRunConfig)} and v is not None}
    if data is not None:
        given["data"] = str(data)
    launch(BpttRunConfig, BpttTrainer, given, resume, run_dir, backend, "bptt",
           lambda t: f"batch {t.cfg.batch_size} x {t.cfg.chunk_size} bytes per chunk, {t.cfg.context_chunks} chunks "
                     f"per sample, {t.cfg.grad_accum} chunk(s) per step",
           lambda s: f"done: {s['steps']} steps in {s['elapsed_s']:.0f} s")


if __name__ == "__main__":
    app()
