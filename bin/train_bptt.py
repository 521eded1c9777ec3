"""Train the float MinGRU LM by truncated BPTT (gruboros style), data-parallel over MPI ranks.

    python bin/train_bptt.py                                  # embedded default corpus, laptop size
    srun --mpi=pmi2 python -m mpi4py bin/train_bptt.py --params 100m --chunk-size 2048 --context-chunks 8
"""

import typer

from eggnog.runtime.cli import cli_help
from eggnog.training.cli import config_command
from eggnog.training.launch import launch
from eggnog.training.mingru.bptt import BpttRunConfig, BpttTrainer

SCRIPT = "train_bptt.py"  # recorded in each run's config.json: a resume with another script is refused

# plain click help: rich truncates long flag names at 80 columns
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None, help=cli_help(__doc__))


@config_command(app, BpttRunConfig)
def main(config_cls, flags):
    launch(config_cls, BpttTrainer, flags, SCRIPT)


if __name__ == "__main__":
    app()
