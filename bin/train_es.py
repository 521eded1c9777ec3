"""Train the integer EGG language model with EGGROLL, the population split over MPI ranks.

    python bin/train_es.py                                   # embedded default corpus, one process
    srun --mpi=pmi2 python -m mpi4py bin/train_es.py --population 32768 --n-layer 6 --n-embd 256
"""

from dataclasses import asdict, fields
from pathlib import Path

import typer

from runtime.cli import user_errors

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help=__doc__)


@app.command()
@user_errors
def main(
    data: Path = typer.Option(None, help="Corpus (.bin/.h5/.zarr); default: the embedded stdlib corpus."),
    n_layer: int = typer.Option(None, help="EGG blocks [1]."),
    n_embd: int = typer.Option(None, help="EGG width D [64]."),
    epochs: int = typer.Option(None, help="Epochs (updates) to run in total [1000]."),
    population: int = typer.Option(None, help="Population over all ranks [512]."),
    parallel_generations_per_gpu: int = typer.Option(None, help="Population per rank (nano-egg's name)."),
    sigma_shift: int = typer.Option(None, help="sigma = 2^-shift of the fixed-point unit [4]."),
    alpha: float = typer.Option(None, help=">= 1: decaying schedule exponent; < 1: constant z-test level [4]."),
    alpha_decay_timestep: int = typer.Option(None, help="Epochs over which alpha decays to 2^-alpha [1000]."),
    use_clt: bool = typer.Option(None, "--use-clt/--no-use-clt", help="Noise values (on) or their signs [on]."),
    fast_fitness: bool = typer.Option(None, "--fast-fitness/--no-fast-fitness",
                                      help="Sign of each antithetic difference (on) or z-scored differences [on]."),
    noise_reuse: int = typer.Option(None, help="Epochs sharing one perturbation; 0 = always the same [1]."),
    tokens_per_update: int = typer.Option(None, help="Bytes each member reads per epoch [100]."),
    group_size: int = typer.Option(None, help="Members sharing one data stream; even [64]."),
    rank: int = typer.Option(None, help="Perturbation rank; integer EGGROLL uses 1 [1]."),
    seed: int = typer.Option(None, help="Seed of initialisation and noise [0]."),
    validate_every: int = typer.Option(None, help="Epochs between validations [25]."),
    checkpoint_every: int = typer.Option(None, help="Epochs between checkpoints [100]."),
    val_rows: int = typer.Option(None, help="Validation rows, each from a zero state [64]."),
    val_tokens: int = typer.Option(None, help="Bytes scored per validation row [256]."),
    run_dir: Path = typer.Option(None, help="Run directory [runs/es-<time>]."),
    resume: Path = typer.Option(None, help="Continue the run in this directory from its latest checkpoint."),
    backend: str = typer.Option(None, help="auto, cpu or cuda [EGGNOG_BACKEND or auto]."),
):
    from corpus.default import default_corpus
    from corpus.reader import open_corpus
    from evolution.es_trainer import EsRunConfig, EsTrainer, check_resume
    from kernels.backend import select_backend
    from kernels.errors import BadInput
    from runtime.rundir import create_run_dir, read_config
    from runtime.world import init_world

    world = init_world()
    given = {k: v for k, v in locals().items() if k in {f.name for f in fields(EsRunConfig)} and v is not None}
    if parallel_generations_per_gpu is not None:
        per_rank_total = parallel_generations_per_gpu * world.size
        if population is not None and population != per_rank_total:
            raise BadInput(f"--population {population} disagrees with --parallel-generations-per-gpu "
                           f"{parallel_generations_per_gpu} on {world.size} rank(s)")
        given["population"] = per_rank_total
    if data is not None:
        given["data"] = str(data)
    if resume is not None:
        stored = read_config(resume)
        merged = {**stored, **given}
        check_resume(stored, merged)
        cfg = EsRunConfig(**{k: v for k, v in merged.items() if k in {f.name for f in fields(EsRunConfig)}})
    else:
        cfg = EsRunConfig(**given)
    cfg.check(world.size)
    chosen = select_backend(backend, world.local_rank)
    corpus = open_corpus(cfg.data) if cfg.data else world.root_first(default_corpus)
    trainer = EsTrainer(cfg, world, chosen, corpus)
    if resume is not None:
        trainer.restore(resume)
    path = create_run_dir(world, resume or run_dir, asdict(cfg), resume=resume is not None, name="es")
    if world.is_root:
        val = corpus.meta.get("splits", {}).get("val", {})
        print(f"run: {path}  backend: {chosen.name} ({chosen.device_name})  ranks: {world.size}")
        print(f"EGG {cfg.n_layer}x{cfg.n_embd}: {trainer.model.n_params:,} int8 parameters; population "
              f"{cfg.population} ({trainer.members} per rank), {cfg.tokens_per_update} bytes per member per epoch")
        if val:
            print(f"validation baselines: unigram {val['unigram_bpb']:.3f}, bigram {val['bigram_bpb']:.3f} bits/byte")
    summary = trainer.run(path)
    if world.is_root:
        print(f"done: {summary['epochs']} epochs in {summary['elapsed_s']:.0f} s; "
              f"val {summary['val_bpb']:.3f} bits/byte (best {summary['best_val_bpb']:.3f})")


if __name__ == "__main__":
    app()
