"""Train a language model with EGGROLL, the population split over MPI ranks: the integer EGG
(`--model egg`, the default) or the float MinGRU LM (`--model mingru`, float EGGROLL).

    python bin/train_es.py                                   # embedded default corpus, one process
    srun --mpi=pmi2 python -m mpi4py bin/train_es.py --population 32768 --n-layer 6 --n-embd 256
    python bin/train_es.py --model mingru --dim 64 --depth 2 --population 256 --sigma 0.01
"""

from dataclasses import asdict, fields
from pathlib import Path

import typer

from eggnog.runtime.cli import user_errors

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help=__doc__)
EGG_ONLY = ("n_layer", "n_embd", "sigma_shift", "alpha", "alpha_decay_timestep", "use_clt", "fast_fitness")
MINGRU_ONLY = ("params", "dim", "depth", "expansion_factor", "ff_mult", "sigma", "fitness", "freeze_vectors",
               "optimizer", "lr", "beta1", "beta2", "weight_decay", "warmup_steps")


@app.command()
@user_errors
def main(
    model: str = typer.Option("egg", help="egg (integer EGGROLL) or mingru (float EGGROLL)."),
    data: Path = typer.Option(None, help="Corpus (.bin/.h5/.zarr); default: the embedded stdlib corpus."),
    n_layer: int = typer.Option(None, help="EGG blocks [1]."),
    n_embd: int = typer.Option(None, help="EGG width D [64]."),
    epochs: int = typer.Option(None, help="Epochs (updates) to run in total [1000; mingru 600]."),
    population: int = typer.Option(None, help="Population over all ranks [512; mingru 128]."),
    parallel_generations_per_gpu: int = typer.Option(None, help="Population per rank (nano-egg's name)."),
    sigma_shift: int = typer.Option(None, help="sigma = 2^-shift of the fixed-point unit [4]."),
    alpha: float = typer.Option(None, help=">= 1: decaying schedule exponent; < 1: constant z-test level [4]."),
    alpha_decay_timestep: int = typer.Option(None, help="Epochs over which alpha decays to 2^-alpha [1000]."),
    use_clt: bool = typer.Option(None, "--use-clt/--no-use-clt", help="Noise values (on) or their signs [on]."),
    fast_fitness: bool = typer.Option(None, "--fast-fitness/--no-fast-fitness",
                                      help="Sign of each antithetic difference (on) or z-scored differences [on]."),
    noise_reuse: int = typer.Option(None, help="Epochs sharing one perturbation; 0 = always the same [1]."),
    tokens_per_update: int = typer.Option(None, help="Bytes each member reads per epoch [100; mingru 128]."),
    group_size: int = typer.Option(None, help="Members sharing one data stream (mingru: one window); even [64; mingru 8]."),
    rank: int = typer.Option(None, help="Perturbation rank; integer EGGROLL uses 1 [1]."),
    params: str = typer.Option(None, help="MinGRU parameter budget, k/m/g = 1024^n (gruboros sizing)."),
    dim: int = typer.Option(None, help="MinGRU width [64 without --params]."),
    depth: int = typer.Option(None, help="MinGRU blocks [2 without --params]."),
    expansion_factor: float = typer.Option(None, help="MinGRU inner width / dim [1.5]."),
    ff_mult: float = typer.Option(None, help="MinGRU feed-forward width / dim [4]."),
    sigma: float = typer.Option(None, help="MinGRU: perturbation scale [0.01]."),
    fitness: str = typer.Option(None, help="MinGRU: z-score 'global' or per 'group' [global]."),
    freeze_vectors: bool = typer.Option(None, "--freeze-vectors/--perturb-vectors",
                                        help="MinGRU: leave norms and biases unperturbed [perturb]."),
    optimizer: str = typer.Option(None, help="MinGRU: sf-adamw, adamw or sgd [adamw]."),
    lr: float = typer.Option(None, help="MinGRU: learning rate of the optimizer [1e-2]."),
    beta1: float = typer.Option(None, help="MinGRU: first moment decay [0.9]."),
    beta2: float = typer.Option(None, help="MinGRU: second moment decay [0.999]."),
    weight_decay: float = typer.Option(None, help="MinGRU: weight decay [0]."),
    warmup_steps: int = typer.Option(None, help="MinGRU: warm-up epochs (sf-adamw) [0]."),
    seed: int = typer.Option(None, help="Seed of initialisation and noise [0]."),
    validate_every: int = typer.Option(None, help="Epochs between validations [25]."),
    checkpoint_every: int = typer.Option(None, help="Epochs between checkpoints [100]."),
    val_rows: int = typer.Option(None, help="Validation rows, each from a zero state [64]."),
    val_tokens: int = typer.Option(None, help="Bytes scored per validation row [256]."),
    run_dir: Path = typer.Option(None, help="Run directory [runs/es-<time>]."),
    resume: Path = typer.Option(None, help="Continue the run in this directory from its latest checkpoint."),
    backend: str = typer.Option(None, help="auto, cpu or cuda [EGGNOG_BACKEND or auto]."),
):
    from eggnog.corpus.default import default_corpus
    from eggnog.corpus.reader import open_corpus
    from eggnog.evolution.es_trainer import EsRunConfig, EsTrainer, check_resume
    from eggnog.kernels.backend import select_backend
    from eggnog.runtime.errors import BadInput
    from eggnog.runtime.rundir import create_run_dir, read_config
    from eggnog.runtime.world import init_world

    flags = {k: v for k, v in locals().items() if v is not None}
    if model not in ("egg", "mingru"):
        raise BadInput(f"unknown model {model!r}: choose egg or mingru")
    foreign = [k for k in (MINGRU_ONLY if model == "egg" else EGG_ONLY) if k in flags]
    if foreign:
        raise BadInput(f"--{foreign[0].replace('_', '-')} does not apply to --model {model}")
    if model == "mingru":
        return train_mingru(flags, parallel_generations_per_gpu, resume, run_dir, backend)
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


def train_mingru(flags, per_rank, resume, run_dir, backend):
    from eggnog.evolution.float_es_trainer import FloatEsRunConfig, FloatEsTrainer
    from eggnog.runtime.errors import BadInput
    from eggnog.runtime.world import init_world
    from eggnog.training.launch import launch

    given = {k: v for k, v in flags.items() if k in {f.name for f in fields(FloatEsRunConfig)}}
    if "data" in given:
        given["data"] = str(given["data"])
    if per_rank is not None:
        total = per_rank * init_world().size
        if given.get("population", total) != total:
            raise BadInput(f"--population {given['population']} disagrees with --parallel-generations-per-gpu {per_rank}")
        given["population"] = total
    launch(FloatEsRunConfig, FloatEsTrainer, given, resume, run_dir, backend, "es-mingru",
           lambda t: f"float EGGROLL: population {t.cfg.population} ({t.members} per rank), rank {t.cfg.rank}, "
                     f"sigma {t.cfg.sigma}, {t.cfg.tokens_per_update} bytes per member per epoch",
           lambda s: f"done: {s['epochs']} epochs in {s['elapsed_s']:.0f} s")


if __name__ == "__main__":
    app()
