"""Train a population of LMs by gossip tournaments (gruboros over MPI): every rank an island training
its own model (`--trainer bptt`, the default: the MinGRU LM by truncated BPTT, Schedule-Free AdamW by
default; `--trainer egg`: the integer EGG by EGGROLL, a population per island; `--trainer rge`: an
LSTM, DNC or MinGRU on a sequence task by CD-RGE); at step boundaries random pairs of ranks compare
fitness, and the loser takes the winner's model (clonal copy or recombination).

    mpiexec -n 4 python bin/train_gossip.py                   # embedded default corpus, laptop size
    mpiexec -n 4 python bin/train_gossip.py --trainer egg --population 256 --group-size 32
    mpiexec -n 4 python bin/train_gossip.py --trainer rge --task copy --lr 0.3 --sigma 0.01
    srun --mpi=pmi2 python -m mpi4py bin/train_gossip.py --params 100m --gossip-mixing-rate 0.002
    srun python bin/train_gossip.py --transport tcp --run-dir runs/g1    # islands over TCP, peers from SLURM
    python bin/train_gossip.py --transport tcp --island 1 --run-dir runs/g1 --rendezvous runs/g1/peers \\
        --listen 127.0.0.1:0                                               # or by hand, found in a shared folder
"""

from functools import partial

import typer

from eggnog.evolution.egg_island import EggIsland, GossipEggRunConfig
from eggnog.runtime.cli import cli_help
from eggnog.training.cli import config_command
from eggnog.training.gossip.run import GossipRun
from eggnog.training.gossip.tcp_run import launch_tcp
from eggnog.training.launch import launch
from eggnog.training.mingru.island import BpttIsland, GossipRunConfig
from eggnog.zorn.rge.island import GossipRgeRunConfig, RgeIsland

SCRIPT = "train_gossip.py"  # recorded in each run's config.json: a resume with another script is refused

# plain click help: rich truncates long flag names at 80 columns
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None, help=cli_help(__doc__))

# the island trainers are chosen here, so that evolution/ needs no trainer of its own
ISLANDS = {GossipRunConfig: BpttIsland, GossipEggRunConfig: EggIsland, GossipRgeRunConfig: RgeIsland}


@config_command(app, {"bptt": GossipRunConfig, "egg": GossipEggRunConfig, "rge": GossipRgeRunConfig},
                choose="trainer", choose_help="bptt (MinGRU LM, truncated BPTT), egg (integer EGG, EGGROLL) or "
                                              "rge (zero-order RNN on a task, CD-RGE).")
def main(config_cls, flags):
    if flags.get("transport") == "tcp":  # islands as plain processes, peer to peer
        launch_tcp(config_cls, ISLANDS[config_cls], flags, SCRIPT)
    else:
        launch(config_cls, partial(GossipRun, island_cls=ISLANDS[config_cls]), flags, SCRIPT)


if __name__ == "__main__":
    app()
