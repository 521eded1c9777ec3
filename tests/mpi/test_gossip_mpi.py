"""Gossip tournaments on 4 ranks with tiny BPTT islands: a loser ends with exactly the blend (or the
clone) of the winner's model, optimiser state included; whole runs with forced tournaments mix both
ways, log their events, keep their checkpoint links, finish with random per-rank delays, and resume.
Assertions that guard a collective are collective (`parallel_assert`)."""

from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest

from eggnog.corpus.reader import open_corpus
from eggnog.kernels.core.backend import Backend
from eggnog.runtime.rundir import create_run_dir, read_jsonl
from eggnog.training.gossip.fitness import FitnessEma
from eggnog.training.gossip.merge import blend, blend_scalar
from eggnog.training.gossip.mpi import Gossip, round_pairs
from eggnog.training.gossip.run import DELAY_VAR, GossipRun
from eggnog.training.mingru.island import BpttIsland, GossipRunConfig, island_data_seed
from tests.es_helpers import tiny_corpus

RANKS = 4
TINY = dict(dim=16, depth=1, chunk_size=8, context_chunks=2, batch_size=2, val_rows=4, val_tokens=16, seed=5,
            validate_every=4, checkpoint_every=3, population_every=3, elites=3, keep_checkpoints=1)


class Events(list):
    def write(self, **record):
        self.append(record)


def config(**overrides):
    return GossipRunConfig(**{**TINY, **overrides}).resolved()


def corpus_of(world, shared_dir):
    return open_corpus(world.root_first(lambda: tiny_corpus(shared_dir)))


def gathered(world, island, fitness):
    """Every rank's (parameters, z, v, scalars k/lr_max/weight_sum, fitness), stacked by rank."""
    arrays, scalars = island.optimizer_state()
    values = np.array([scalars["k"], scalars["lr_max"], scalars["weight_sum"], fitness.fitness])
    return [world.allgather_array(a[None]) for a in (island.parameters(), arrays["z"], arrays["v"], values)]


@pytest.mark.timeout(240)
def test_losers_take_the_blend_or_the_clone_of_the_winner(world, shared_dir, parallel_assert):
    assert world.size == RANKS
    cfg = config(steps=2, gossip_mixing_rate=1.0, gossip_merge="recombination", gossip_recombination_alpha=0.3)
    island = BpttIsland(cfg, world.alone(), Backend("cpu"), corpus_of(world, shared_dir),
                        island_data_seed(cfg.seed, world.rank))
    for _ in range(2):
        island.train_step()
    fitness = FitnessEma(ema=5.0 + world.rank)  # rank 0 is the fittest
    comm, events = world.comm.Dup(), Events()
    verdicts = []
    for round_number, merge in enumerate(("recombination", "clonal")):
        gossip = Gossip(comm, world.rank, world.size, replace(cfg, gossip_merge=merge), events)
        before = gathered(world, island, fitness)
        outcome = gossip.tournament(round_number, island.step, island, fitness)
        after = gathered(world, island, fitness)
        pairs = round_pairs(cfg.seed, round_number, RANKS, 1.0, merge, 0.5)
        peer = outcome["peer"] if outcome else -1
        me = world.rank
        ok = outcome is not None and len(pairs) == 2 and outcome["won"] == (me < peer)
        if ok and outcome["won"]:
            ok = all(np.array_equal(a[me], b[me]) for a, b in zip(after, before))
        elif ok and merge == "recombination":
            # parameters and all optimiser state (z too) blended, scalars alike (the step count stays an
            # integer); the loser keeps its own fitness
            ok = all(np.array_equal(after[i][me], blend(before[i][me], before[i][peer], 0.3)) for i in range(3))
            mine, theirs = before[3][me], before[3][peer]
            expected = [blend_scalar(int(mine[0]), int(theirs[0]), 0.3)] + [
                blend_scalar(mine[i], theirs[i], 0.3) for i in (1, 2)] + [mine[3]]
            ok &= after[3][me].tolist() == expected
        elif ok:
            ok = all(np.array_equal(a[me], b[peer]) for a, b in zip(after, before))  # fitness copied too
        verdicts.append(ok)
        # training goes on from the merged model
        parallel_assert(np.isfinite(island.train_step()))
    parallel_assert(all(verdicts), f"rank {world.rank}: {verdicts} {events}")
    sends = [e for e in events if e["event"] in ("mix_send", "mix_receive")]
    parallel_assert(len(sends) == 2 and all(e["bytes"] > 3 * 4 * island.n_params for e in sends))


def run_gossip(world, shared_dir, name, cfg, resume=False):
    run_dir = Path(shared_dir) / name
    path = create_run_dir(world, run_dir, asdict(cfg), resume=resume)
    run = GossipRun(cfg, world, Backend("cpu"), corpus_of(world, shared_dir), BpttIsland)
    if resume:
        run.restore(run_dir)
    summary = run.run(path)
    return run_dir, summary


def kinds(path, event):
    return [e for e in read_jsonl(path) if e["event"] == event]


@pytest.mark.timeout(240)
def test_gossip_run_mixes_both_ways_and_keeps_links(world, shared_dir, parallel_assert):
    assert world.size == RANKS
    cfg = config(steps=8, gossip_mixing_rate=1.0, gossip_merge="mixed", gossip_recombination_prob=0.5,
                 rejuvenation_rate=1.0, rejuvenation_threshold=0.5)
    run_dir, summary = run_gossip(world, shared_dir, "mixed", cfg)
    merges = [e["merge"] for r in range(RANKS) for e in kinds(run_dir / f"rank-{r:02d}" / "events.jsonl", "mix_merge")]
    parallel_assert({"clonal", "recombination"} <= set(merges), merges)
    mine = run_dir / f"rank-{world.rank:02d}"
    steps = [r["step"] for r in read_jsonl(mine / "metrics.jsonl")]
    parallel_assert(steps == list(range(1, 9)), steps)
    # two pairs every round: 16 tournaments, 16 merges
    lines = read_jsonl(run_dir / "metrics.jsonl")
    parallel_assert(lines[-1]["tournaments"] == 16 and len(merges) == 16 and lines[-1]["steps"] == [8] * RANKS)
    top = run_dir / "checkpoints"
    parallel_assert(all((top / n).is_file() for n in ("latest", "best", "elite_01", "elite_03"))
                    and not (top / "elite_04").exists())
    saved = sorted((mine / "checkpoints").glob("step-*.npz"))
    # this island's newest checkpoint (its `latest`) is always kept, and it holds the final step
    parallel_assert(saved and (mine / "checkpoints" / "latest").resolve() == saved[-1].resolve()
                    and saved[-1].name.startswith("step-00000008"))
    if world.is_root:
        assert summary["final"]["mean_fitness"] > summary["first"]["mean_fitness"]
    world.barrier()


@pytest.mark.timeout(240)
def test_random_delays_still_complete(world, shared_dir, parallel_assert, monkeypatch):
    monkeypatch.setenv(DELAY_VAR, "0.05")
    cfg = config(steps=10, gossip_mixing_rate=1.0, gossip_merge="recombination", gossip_optimizer_merge="reset")
    run_dir, _ = run_gossip(world, shared_dir, "delays", cfg)
    mine = run_dir / f"rank-{world.rank:02d}"
    parallel_assert([r["step"] for r in read_jsonl(mine / "metrics.jsonl")] == list(range(1, 11)))
    parallel_assert(len(kinds(mine / "events.jsonl", "mix_decision")) == 10)
    parallel_assert(read_jsonl(run_dir / "metrics.jsonl")[-1]["tournaments"] == 20)


@pytest.mark.timeout(240)
def test_resume_continues_every_island(world, shared_dir, parallel_assert):
    cfg = config(steps=5, gossip_mixing_rate=0.5, gossip_merge="clonal")
    run_dir, _ = run_gossip(world, shared_dir, "resumed", cfg)
    mine = run_dir / f"rank-{world.rank:02d}"
    last_save = kinds(mine / "events.jsonl", "save")[-1]
    run_gossip(world, shared_dir, "resumed", replace(cfg, steps=8), resume=True)
    parallel_assert([r["step"] for r in read_jsonl(mine / "metrics.jsonl")] == list(range(1, 9)))
    start = kinds(mine / "events.jsonl", "start")
    # the island goes on from its last checkpoint, with that checkpoint's fitness average
    parallel_assert(len(start) == 2 and start[1]["step"] == last_save["step"] == 5
                    and start[1]["fitness"] == -last_save["loss"])
