"""Gossip tournaments on 4 ranks with tiny CD-RGE islands (`--trainer rge`): a recombination's loser
holds the winner's blend (Adam state and step count blended too), and a whole run with a tournament
every round completes. Assertions that guard a collective are collective (`parallel_assert`)."""

from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from eggnog.kernels.core.backend import Backend
from eggnog.runtime.rundir import create_run_dir, read_jsonl
from eggnog.training.gossip.fitness import FitnessEma
from eggnog.training.gossip.merge import blend, blend_scalar
from eggnog.training.gossip.mpi import Gossip
from eggnog.training.gossip.run import GossipRun
from eggnog.training.mingru.island import island_data_seed
from eggnog.zorn.rge.island import GossipRgeRunConfig, RgeIsland

RANKS = 4
TINY = dict(input_size=8, hidden_size=8, num_heads=2, batch_size=4, probes=4, lr=0.3, sigma=0.01, seed=6,
            validate_every=2, population_every=2)


class Events(list):
    def write(self, **record):
        self.append(record)


def config(**overrides):
    return GossipRgeRunConfig(**{**TINY, **overrides})


@pytest.mark.timeout(240)
def test_the_loser_holds_the_blend(world, parallel_assert):
    assert world.size == RANKS
    cfg = config(steps=3, optimizer="adam", gossip_mixing_rate=1.0, gossip_merge="recombination",
                 gossip_recombination_alpha=0.3)
    island = RgeIsland(cfg, world.alone(), Backend("cpu"), None, island_data_seed(cfg.seed, world.rank))
    for _ in range(1 + world.rank):  # different step counts: the blended count is rounded
        island.train_step()
    fitness = FitnessEma(ema=5.0 + world.rank)  # rank 0 is the fittest

    def gathered():
        arrays, scalars = island.optimizer_state()
        return [world.allgather_array(a[None]) for a in (island.parameters(), arrays["m"], arrays["v"],
                                                          np.array([scalars["k"]], dtype=np.float64))]

    before = gathered()
    outcome = Gossip(world.comm.Dup(), world.rank, world.size, cfg, Events()).tournament(0, island.step, island,
                                                                                         fitness)
    after = gathered()
    me, peer = world.rank, outcome["peer"] if outcome else -1
    ok = outcome is not None and outcome["won"] == (me < peer)
    if ok and outcome["won"]:
        ok = all(np.array_equal(a[me], b[me]) for a, b in zip(after, before))
    elif ok:
        ok = all(np.array_equal(after[i][me], blend(before[i][me], before[i][peer], 0.3)) for i in range(3))
        ok &= after[3][me][0] == blend_scalar(int(before[3][me][0]), int(before[3][peer][0]), 0.3)
    parallel_assert(ok, f"rank {me}: {outcome}")
    parallel_assert(np.isfinite(island.train_step()))


@pytest.mark.timeout(240)
def test_an_rge_gossip_run_completes(world, shared_dir, parallel_assert):
    cfg = config(steps=4, gossip_mixing_rate=1.0, gossip_merge="mixed")
    run_dir = Path(shared_dir) / "rge"
    path = create_run_dir(world, run_dir, asdict(cfg))
    run = GossipRun(cfg, world, Backend("cpu"), None, RgeIsland)
    run.run(path)
    mine = run_dir / f"rank-{world.rank:02d}"
    parallel_assert([r["step"] for r in read_jsonl(mine / "metrics.jsonl")] == [1, 2, 3, 4])
    parallel_assert(read_jsonl(run_dir / "metrics.jsonl")[-1]["tournaments"] == 8)
    params, meta = run.island.checkpoint_parameters(mine / "checkpoints" / "latest")
    parallel_assert(np.array_equal(params, run.island.parameters()) and meta["gossip"]["rank"] == world.rank)
