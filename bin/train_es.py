"""Train a language model with EGGROLL, the population split over MPI ranks: the integer EGG
(`--model egg`, the default), d-eggs' integer transformer (`--model transformer`, `--preset d-eggs` for
its own configuration) or the float MinGRU LM (`--model mingru`, float EGGROLL).

    python bin/train_es.py                                   # embedded default corpus, one process
    srun --mpi=pmi2 python -m mpi4py bin/train_es.py --population 32768 --depth 6 --dim 256
    python bin/train_es.py --model mingru --dim 64 --depth 2 --population 256 --sigma 0.01
    mpiexec -n 4 python bin/train_es.py --mode coordinator --population-chunk 64   # rank 0 hands out chunks
    python bin/train_es.py --model transformer --depth 2 --dim 64 --head-dim 16
"""

import sys

import typer

from eggnog.evolution.coordinator.trainer import CoordinatedEsTrainer
from eggnog.evolution.es_trainer import EsRunConfig, EsTrainer
from eggnog.evolution.float_es_trainer import FloatEsRunConfig, FloatEsTrainer
from eggnog.evolution.transformer_es_config import TransformerEsRunConfig, with_preset
from eggnog.runtime.cli import cli_help
from eggnog.training.cli import config_command
from eggnog.training.launch import launch

SCRIPT = "train_es.py"  # recorded in each run's config.json: a resume with another script is refused

# plain click help: rich truncates long flag names at 80 columns
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None, help=cli_help(__doc__))


def egg_trainer(cfg, world, backend, corpus):
    trainer = CoordinatedEsTrainer if cfg.mode == "coordinator" else EsTrainer
    return trainer(cfg, world, backend, corpus)


TRAINERS = {EsRunConfig: egg_trainer, TransformerEsRunConfig: egg_trainer, FloatEsRunConfig: FloatEsTrainer}


@config_command(app, {"egg": EsRunConfig, "transformer": TransformerEsRunConfig, "mingru": FloatEsRunConfig},
                choose="model", choose_help="egg (integer EGGROLL), transformer (d-eggs' model, integer EGGROLL) or "
                                            "mingru (float EGGROLL).")
def main(config_cls, flags):
    launch(config_cls, TRAINERS[config_cls], flags, SCRIPT)


def cli():
    """The program (`python bin/train_es.py`, the `eggnog-train-es` command): `--preset NAME` becomes its flags."""
    sys.argv[1:] = with_preset(sys.argv[1:])
    app()


if __name__ == "__main__":
    cli()
