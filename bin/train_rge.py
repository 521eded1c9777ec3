"""Train an LSTM, a DNC or a MinGRU on a sequence task without backpropagation (CD-RGE, FDRAS), or by
BPTT as the baseline; series in one process or split over MPI ranks.

    python bin/train_rge.py --overfit --lr 0.3 --sigma 0.01               # tiny LSTM, copy task, one process
    mpiexec -n 4 python -m mpi4py bin/train_rge.py --dist-mode seeds --overfit --lr 0.3 --sigma 0.01
    srun python -m mpi4py bin/train_rge.py --hidden-size 66000 --num-heads 220 --batch-size 1024 \\
        --task char_lm --overfit --probes-per-rank 12 --lr 0.01 --dist-mode reduce
"""

import typer

from eggnog.runtime.cli import cli_help
from eggnog.training.cli import config_command
from eggnog.training.launch import launch
from eggnog.zorn.rge.run import RgeRun, RgeRunConfig

SCRIPT = "train_rge.py"  # recorded in each run's config.json: a resume with another script is refused

# plain click help: rich truncates long flag names at 80 columns
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None, help=cli_help(__doc__))


@config_command(app, RgeRunConfig)
def main(config_cls, flags):
    launch(config_cls, RgeRun, flags, SCRIPT)


if __name__ == "__main__":
    app()
