"""Gossip tournaments on 4 ranks with tiny integer EGGROLL islands (`--trainer egg`): a recombination's
loser holds the winner's blend rounded half to even into int8 (AdamW state blended as floats), and a
whole run with a tournament every round completes. Assertions that guard a collective are collective
(`parallel_assert`)."""

from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from eggnog.corpus.reader import open_corpus
from eggnog.evolution.egg_island import EggIsland, GossipEggRunConfig, to_int8
from eggnog.kernels.core.backend import Backend
from eggnog.runtime.rundir import create_run_dir, read_jsonl
from eggnog.training.gossip.fitness import FitnessEma
from eggnog.training.gossip.merge import blend
from eggnog.training.gossip.mpi import Gossip, round_pairs
from eggnog.training.gossip.run import GossipRun
from eggnog.training.mingru.island import island_data_seed
from tests.es_helpers import TINY, tiny_corpus

RANKS = 4
TINY_EGG = {**{k: v for k, v in TINY.items() if k != "checkpoint_every"}, "population_every": 2}


def config(**overrides):
    return GossipEggRunConfig(**{**TINY_EGG, **overrides})


class Events(list):
    def write(self, **record):
        self.append(record)


def corpus_of(world, shared_dir):
    return open_corpus(world.root_first(lambda: tiny_corpus(shared_dir)))


@pytest.mark.timeout(240)
def test_the_loser_holds_the_rounded_blend(world, shared_dir, parallel_assert):
    assert world.size == RANKS
    alpha = 0.5  # half-way blends of integers land on halves: the rounding rule decides them
    cfg = config(steps=3, optimizer="adamw", gossip_mixing_rate=1.0, gossip_merge="recombination",
                 gossip_recombination_alpha=alpha)
    island = EggIsland(cfg, world.alone(), Backend("cpu"), corpus_of(world, shared_dir),
                       island_data_seed(cfg.seed, world.rank))
    for _ in range(3):
        island.train_step()
    fitness = FitnessEma(ema=5.0 + world.rank)  # rank 0 is the fittest

    def gathered():
        arrays, _ = island.optimizer_state()
        return [world.allgather_array(a[None]) for a in [island.parameters()] + [arrays[k] for k in sorted(arrays)]]

    before = gathered()
    outcome = Gossip(world.comm.Dup(), world.rank, world.size, cfg, Events()).tournament(0, island.step, island,
                                                                                         fitness)
    after = gathered()
    me, peer = world.rank, outcome["peer"] if outcome else -1
    ok = outcome is not None and len(round_pairs(cfg.seed, 0, RANKS, 1.0, "recombination", 0.5)) == 2
    ok = ok and outcome["won"] == (me < peer)
    halves = 0
    if ok and outcome["won"]:
        ok = all(np.array_equal(a[me], b[me]) for a, b in zip(after, before))
    elif ok:
        exact = blend(before[0][me], before[0][peer], alpha)
        halves = int(np.count_nonzero(exact != np.rint(exact)))
        ok = np.array_equal(after[0][me], to_int8(exact).astype(np.float32))
        ok &= all(np.array_equal(after[i][me], blend(before[i][me], before[i][peer], alpha))
                  for i in range(1, len(after)))
    parallel_assert(ok, f"rank {me}: {outcome}")
    # the islands differ after training on their own data and noise, so the blends hit halves
    parallel_assert(outcome["won"] or halves > 0, f"rank {me}: no halves in the blend")
    parallel_assert(np.isfinite(island.train_step()) and island.step == 4)


@pytest.mark.timeout(240)
def test_an_egg_gossip_run_completes(world, shared_dir, parallel_assert):
    cfg = config(steps=4, gossip_mixing_rate=1.0, gossip_merge="mixed")
    run_dir = Path(shared_dir) / "egg"
    path = create_run_dir(world, run_dir, asdict(cfg))
    run = GossipRun(cfg, world, Backend("cpu"), corpus_of(world, shared_dir), EggIsland)
    run.run(path)
    mine = run_dir / f"rank-{world.rank:02d}"
    parallel_assert([r["step"] for r in read_jsonl(mine / "metrics.jsonl")] == [1, 2, 3, 4])
    # two pairs every round: 8 tournaments
    parallel_assert(read_jsonl(run_dir / "metrics.jsonl")[-1]["tournaments"] == 8)
    latest = mine / "checkpoints" / "latest"
    params, meta = run.island.checkpoint_parameters(latest)
    parallel_assert(np.array_equal(params, run.island.parameters()) and meta["gossip"]["rank"] == world.rank)
