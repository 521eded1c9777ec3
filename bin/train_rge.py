"""Train an LSTM, a DNC or a MinGRU on a sequence task without backpropagation (CD-RGE, FDRAS), or by
BPTT as the baseline; series in one process or split over MPI ranks.

    python bin/train_rge.py --overfit --lr 0.3 --epsilon 0.01             # tiny LSTM, copy task, one process
    mpiexec -n 4 python -m mpi4py bin/train_rge.py --dist-mode seeds --overfit --lr 0.3 --epsilon 0.01
    srun python -m mpi4py bin/train_rge.py --hidden-size 66000 --num-heads 220 --batch-size 1024 \\
        --task char_lm --overfit --meta-perturbations 12 --lr 0.01 --dist-mode reduce
"""

from dataclasses import asdict, fields
from pathlib import Path

import typer

from eggnog.runtime.cli import user_errors

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help=__doc__)


@app.command()
@user_errors
def main(
    model: str = typer.Option(None, help="lstm, dnc or mingru [lstm]."),
    solver: str = typer.Option(None, help="cdrge, fdras or bptt [cdrge]."),
    probes: int = typer.Option(None, help="Probes per step over all ranks [32]."),
    meta_perturbations: int = typer.Option(None, help="Probes per rank (the authors' name); sets --probes."),
    epsilon: float = typer.Option(None, help="Perturbation size [tied to --lr, as the authors ran it]."),
    lr: float = typer.Option(None, help="Learning rate [0.1]."),
    optimizer: str = typer.Option(None, help="sgd, momentum or adam on the estimate [sgd]."),
    beta1: float = typer.Option(None, help="Momentum / Adam first moment [0.9]."),
    beta2: float = typer.Option(None, help="Adam second moment [0.999]."),
    distribution: str = typer.Option(None, help="Probe directions: rademacher, normal or uniform [rademacher]."),
    antithetic: bool = typer.Option(None, "--antithetic/--no-antithetic", help="Probes in +z/-z pairs [off]."),
    dist_mode: str = typer.Option(None, help="reduce (sum of probes to rank 0, broadcast) or seeds [seeds]."),
    input_size: int = typer.Option(None, help="Embedding width E [16]."),
    hidden_size: int = typer.Option(None, help="LSTM/DNC hidden width H [32]."),
    num_heads: int = typer.Option(None, help="LSTM heads N (H divisible by N) [4]."),
    memory_size: int = typer.Option(None, help="DNC memory rows [16]."),
    head_size: int = typer.Option(None, help="DNC memory row width [16]."),
    num_reads: int = typer.Option(None, help="DNC read heads [1]."),
    dim: int = typer.Option(None, help="MinGRU width [64]."),
    depth: int = typer.Option(None, help="MinGRU blocks [2]."),
    expansion_factor: float = typer.Option(None, help="MinGRU inner width / dim [1.5]."),
    ff_mult: float = typer.Option(None, help="MinGRU feed-forward width / dim [4]."),
    task: str = typer.Option(None, help="copy, repeat_copy, reverse, sort, add or char_lm [copy]."),
    data: Path = typer.Option(None, help="Corpus for char_lm [the embedded stdlib corpus]."),
    batch_size: int = typer.Option(None, help="Sequences per step [8]."),
    min_seq_len: int = typer.Option(None, help="Shortest sample (curriculum lower bound) [2]."),
    max_seq_len: int = typer.Option(None, help="Longest sample (curriculum upper bound) [5]."),
    overfit: bool = typer.Option(None, "--overfit/--no-overfit",
                                 help="One fixed batch of 2 + 10 tokens, stop below --target-loss (Table 1) [off]."),
    target_loss: float = typer.Option(None, help="Overfit stop, bits per token [0.1443 = 0.1 nats]."),
    steps: int = typer.Option(None, help="Step budget [1000]."),
    seed: int = typer.Option(None, help="Seed of initialisation, probes and data [0]."),
    checkpoint_every: int = typer.Option(None, help="Steps between checkpoints [50]."),
    run_dir: Path = typer.Option(None, help="Run directory [runs/rge-<time>]."),
    resume: Path = typer.Option(None, help="Continue the run in this directory from its latest checkpoint."),
    backend: str = typer.Option(None, help="auto, cpu or cuda [EGGNOG_BACKEND or auto]."),
):
    from eggnog.runtime.errors import BadInput
    from eggnog.kernels.backend import select_backend
    from eggnog.runtime.rundir import config_from, create_run_dir, read_config
    from eggnog.runtime.world import init_world
    from eggnog.zorn.rge_run import RgeRun, RgeRunConfig, open_task_corpus

    world = init_world()
    given = {k: v for k, v in locals().items() if k in {f.name for f in fields(RgeRunConfig)} and v is not None}
    if data is not None:
        given["data"] = str(data)
    if meta_perturbations is not None:
        total = meta_perturbations * world.size
        if probes is not None and probes != total:
            raise BadInput(f"--probes {probes} disagrees with --meta-perturbations {meta_perturbations} on "
                           f"{world.size} rank(s)")
        given["probes"] = total
    stored = read_config(resume) if resume is not None else {}
    cfg = config_from(RgeRunConfig, stored, given)
    cfg.check(world.size)
    chosen = select_backend(backend, world.local_rank)
    run = RgeRun(cfg, world, chosen, open_task_corpus(cfg, world))
    if resume is not None:
        run.restore(resume)
    path = create_run_dir(world, resume or run_dir, asdict(cfg), resume=resume is not None, name="rge")
    if world.is_root:
        mode = "series" if cfg.solver == "bptt" or world.size == 1 else cfg.dist_mode
        print(f"run: {path}  backend: {chosen.name} ({chosen.device_name})  ranks: {world.size}  mode: {mode}")
        print(f"{cfg.model}: {run.model.n_params:,} parameters; {cfg.solver}"
              + ("" if cfg.solver == "bptt" else f" with {cfg.probes} {cfg.distribution} probes, eps {cfg.eps}")
              + f", lr {cfg.lr}, {cfg.optimizer}; task {cfg.task}, batch {cfg.batch_size}"
              + (" (overfit one batch)" if cfg.overfit else ""))
    summary = run.run(path)
    if world.is_root:
        status = "reached the target loss" if summary["reached_target"] else "ran its step budget"
        print(f"done: {summary['steps']} steps, loss {summary['loss']:.4f} bits/token ({status})")


if __name__ == "__main__":
    app()
