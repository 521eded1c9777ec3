"""Train a population of MinGRU LMs by gossip tournaments (gruboros over MPI): every rank an island
training its own model by truncated BPTT (Schedule-Free AdamW by default); at step boundaries random
pairs of ranks compare fitness, and the loser takes the winner's model (clonal copy or recombination).

    mpiexec -n 4 python bin/train_gossip.py                   # embedded default corpus, laptop size
    srun --mpi=pmi2 python -m mpi4py bin/train_gossip.py --params 100m --gossip-mixing-rate 0.002
"""

from functools import partial

import typer

from eggnog.evolution.gossip_config import GossipRunConfig
from eggnog.evolution.gossip_run import GossipRun
from eggnog.training.cli import config_command
from eggnog.training.island import BpttIsland
from eggnog.training.launch import launch

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help=__doc__)


@config_command(app, GossipRunConfig)
def main(config_cls, flags):
    # the island trainer is chosen here, so that evolution/ needs no trainer of its own
    launch(config_cls, partial(GossipRun, island_cls=BpttIsland), flags)


if __name__ == "__main__":
    app()
