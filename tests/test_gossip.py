"""Gossip without MPI: the shared matching, the winner rule, snapshots on the wire, the merges (z
blended too), the fitness average, the population ranking and save rates, checkpoint links and
retention, rejuvenation on a real BPTT island, and bad flags refused before anything is written.
(The tournaments themselves run under MPI in tests/mpi/test_gossip_mpi.py.)"""

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from eggnog.corpus.reader import open_corpus
from eggnog.kernels.core.backend import Backend
from eggnog.runtime.checkpoint import save_checkpoint
from eggnog.runtime.world import init_world
from eggnog.training.gossip.checkpoints import checkpoint_name, elite_entries, tidy
from eggnog.training.gossip.fitness import FitnessEma
from eggnog.training.gossip.merge import Snapshot, blend, merged, needs_state
from eggnog.training.gossip.mpi import initiator_wins, pairing_of, round_pairs
from eggnog.training.gossip.population import FIELDS, percentiles, save_probability, summary_record
from eggnog.training.gossip.run import GossipRun
from eggnog.training.mingru.island import BpttIsland, GossipRunConfig
from tests.es_helpers import tiny_corpus
from tests.test_flags import load_script


def test_every_rank_derives_the_same_disjoint_matching():
    for round_number in range(50):
        pairs = round_pairs(3, round_number, 7, 1.0, "mixed", 0.5)
        assert pairs == round_pairs(3, round_number, 7, 1.0, "mixed", 0.5)
        members = [r for p in pairs for r in (p.initiator, p.responder)]
        assert len(pairs) == 3 and len(set(members)) == 6
        for p in pairs:
            assert pairing_of(pairs, p.responder) is p and p.peer_of(p.responder) == p.initiator
    matchings = {tuple((p.initiator, p.responder) for p in round_pairs(3, r, 8, 1.0, "clonal", 0)) for r in range(20)}
    assert len(matchings) > 10  # a fresh matching each round
    assert round_pairs(3, 0, 8, 0.0, "clonal", 0) == [] and round_pairs(3, 0, 1, 1.0, "clonal", 0) == []


def test_mixing_rate_and_mixed_merges_follow_their_probabilities():
    pairs = [p for r in range(2000) for p in round_pairs(1, r, 4, 0.25, "mixed", 0.8)]
    assert 0.22 < len(pairs) / 4000 < 0.28
    assert 0.76 < sum(p.merge == "recombination" for p in pairs) / len(pairs) < 0.84
    assert {p.merge for p in round_pairs(1, 0, 4, 1.0, "clonal", 1.0)} == {"clonal"}


def test_the_fitter_wins_and_the_initiator_wins_ties():
    assert initiator_wins(-3.0, -4.0) and not initiator_wins(-4.0, -3.0)
    assert initiator_wins(-3.0, -3.0) and initiator_wins(-math.inf, -math.inf)


def snapshot(rng, n=10, k=7, fitness=-3.0):
    return Snapshot(rng.normal(size=n).astype(np.float32),
                    {"z": rng.normal(size=n).astype(np.float32), "v": rng.random(n).astype(np.float32)},
                    {"k": k, "lr_max": 0.002, "weight_sum": 1e-5 * k}, fitness)


def test_a_snapshot_crosses_the_wire_as_two_flat_buffers():
    rng = np.random.default_rng(0)
    sent, template = snapshot(rng), snapshot(rng, k=1, fitness=-9.0)
    buffer, scalars = sent.pack()
    assert buffer.dtype == np.float32 and buffer.size == 30 and scalars.dtype == np.float64
    assert (buffer.size, scalars.size) == template.wire_sizes()
    got = template.unpack(buffer, scalars)
    assert np.array_equal(got.params, sent.params) and got.fitness == -3.0
    assert all(np.array_equal(got.arrays[k], sent.arrays[k]) for k in ("z", "v"))
    assert got.scalars == sent.scalars and isinstance(got.scalars["k"], int)
    buffer, scalars = sent.pack(with_state=False)
    assert buffer.size == 10 and template.wire_sizes(False) == (10, 1)
    assert template.unpack(buffer, scalars, False).arrays == {}


def test_merges_on_the_loser():
    rng = np.random.default_rng(1)
    loser, winner = snapshot(rng, k=4, fitness=-5.0), snapshot(rng, k=8, fitness=-2.0)
    clone, reset = merged(loser, winner, "clonal", 0.3, "reset")
    assert not reset and clone.fitness == -2.0 and clone.scalars == winner.scalars
    assert np.array_equal(clone.params, winner.params) and np.array_equal(clone.arrays["z"], winner.arrays["z"])
    mix, reset = merged(loser, winner, "recombination", 0.3, "interpolate")
    assert not reset and mix.fitness == -5.0
    expected = 0.7 * loser.params.astype(np.float64) + 0.3 * winner.params
    assert np.allclose(mix.params, expected, atol=1e-6)
    # Schedule-Free's z is blended like everything else (gruboros left it out)
    assert np.allclose(mix.arrays["z"], 0.7 * loser.arrays["z"].astype(np.float64) + 0.3 * winner.arrays["z"],
                       atol=1e-6)
    assert mix.scalars["k"] == 5 and mix.scalars["weight_sum"] == pytest.approx(1e-5 * 5.2)
    fresh, reset = merged(loser, winner, "recombination", 0.3, "reset")
    assert reset and fresh.arrays == {} and np.array_equal(fresh.params, mix.params)
    assert np.array_equal(blend(loser.params, winner.params, 0.0), loser.params)
    assert np.array_equal(blend(loser.params, winner.params, 1.0), winner.params)
    assert needs_state("clonal", "reset") and needs_state("recombination", "interpolate")
    assert not needs_state("recombination", "reset")


def test_fitness_is_minus_the_loss_average():
    ema = FitnessEma(0.9)
    assert ema.fitness == -math.inf and ema.loss == math.inf
    ema.update(8.0)
    assert ema.fitness == -8.0
    ema.update(6.0)
    assert ema.fitness == pytest.approx(-7.8)
    ema.inherit(-2.5)
    assert ema.loss == 2.5


def test_ranking_and_fitness_weighted_saving():
    assert percentiles([-3.0, -1.0, -2.0, -1.0]).tolist() == [1.0, 0.0, 2 / 3, 1 / 3]
    assert percentiles([-7.0]).tolist() == [0.5]
    assert save_probability(100, 4.0, 0.0) == pytest.approx(0.04)
    assert save_probability(100, 4.0, 1.0) == pytest.approx(0.01)
    assert save_probability(1, 4.0, 0.0) == 1.0
    table = np.zeros((2, len(FIELDS)))
    table[:, FIELDS.index("fitness")] = [-math.inf, -3.0]
    table[:, FIELDS.index("mixes")] = [3, 3]
    table[:, FIELDS.index("clonal")] = [1, 1]
    record = summary_record(table, 7, 1.5)
    assert record["fitness"] == [None, -3.0] and record["best_rank"] == 1 and record["mean_fitness"] == -3.0
    assert record["tournaments"] == 3 and record["clonal"] == 2
    json.dumps(record, allow_nan=False)


def fake_checkpoint(run_dir, rank, step, loss, age=0.0):
    path = Path(run_dir) / f"rank-{rank:02d}" / "checkpoints" / checkpoint_name(step, loss)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    os.utime(path, (path.stat().st_mtime - age,) * 2)
    return path


def test_retention_keeps_elites_last_k_and_archives(tmp_path):
    run = tmp_path / "run"
    paths = {(r, s): fake_checkpoint(run, r, s, 5.0 - 0.1 * s - r, age=100 - 2 * s + r)
             for r in range(2) for s in range(6)}
    stale = run / "rank-00" / "checkpoints" / ".step-00000009-loss-1.0000.npz.tmp-1-abc"
    fresh = run / "rank-01" / "checkpoints" / ".step-00000009-loss-1.0000.npz.tmp-2-def"
    for p, age in ((stale, 3600), (fresh, 0)):
        p.write_bytes(b"")
        os.utime(p, (p.stat().st_mtime - age,) * 2)
    (run / "checkpoints").mkdir()
    os.symlink("../rank-00/checkpoints/" + paths[0, 0].name, run / "checkpoints" / "archive_004")
    os.symlink("nowhere", run / "checkpoints" / "elite_07")
    result = tidy(run, elites=2, keep_last=2, archive_rate=0.0, rng=np.random.default_rng(0))
    left = {key for key, p in paths.items() if p.exists()}
    # elites: rank 1's two newest (lowest loss); last 2 of each rank; the archived file
    assert left == {(1, 5), (1, 4), (0, 5), (0, 4), (0, 0)}
    assert result["removed"] == 7 and result["stale_removed"] == 1 and not stale.exists() and fresh.exists()
    top = run / "checkpoints"
    assert (top / "best").resolve() == paths[1, 5].resolve() == (top / "elite_01").resolve()
    assert (top / "elite_02").resolve() == paths[1, 4].resolve() and not os.path.lexists(top / "elite_07")
    assert (top / "latest").resolve() == paths[0, 5].resolve()  # the newest file
    assert [(e.rank, e.step) for e in elite_entries(run)] == [(1, 5), (1, 4)]
    newest = fake_checkpoint(run, 0, 6, 9.0)
    result = tidy(run, elites=2, keep_last=1, archive_rate=1.0, rng=np.random.default_rng(0))
    # rank 0's steps 4 and 5 are no longer kept: archived instead of removed
    assert result["archived"] == 2 and result["removed"] == 0 and (top / "latest").resolve() == newest.resolve()
    assert {(top / f"archive_00{i}").resolve() for i in (5, 6)} == {paths[0, 4].resolve(), paths[0, 5].resolve()}


TINY = dict(dim=16, depth=1, chunk_size=8, context_chunks=2, batch_size=2, val_rows=4, val_tokens=16, steps=3,
            seed=2, rejuvenation_rate=1.0, rejuvenation_threshold=0.5)


class Events(list):
    def write(self, **record):
        self.append(record)


def test_rejuvenation_blends_with_a_fitter_elite_and_restarts_the_optimizer(tmp_path):
    cfg = GossipRunConfig(**TINY).resolved()
    run = GossipRun(cfg, init_world(), Backend("cpu"), open_corpus(tiny_corpus(tmp_path)), BpttIsland)
    run.run_dir, run.events, run.unsaved = tmp_path / "run", Events(), False
    run.population = type("Alone", (), {"percentile": lambda self, rank: 0.5})()
    island = run.island
    mine = island.parameters()
    island.load(mine, {"z": mine + 1, "v": np.ones_like(mine)}, {"k": 9, "lr_max": 1e-3, "weight_sum": 2.0})
    run.fitness.ema = 6.0
    run.maybe_rejuvenate(0)
    assert run.events[-1]["event"] == "rejuvenation_skipped"  # no elite yet
    elite = np.random.default_rng(0).normal(size=mine.size).astype(np.float32)
    save_checkpoint(run.run_dir / "rank-03" / "checkpoints", 40, {"train_params": elite, "params": elite},
                    {"model": "mingru", "trainer": "bptt", "gossip": {"ema_loss": 4.25}},
                    name=checkpoint_name(40, 4.25))
    tidy(run.run_dir, 1, 1, 0.0, np.random.default_rng(0))
    run.maybe_rejuvenate(1)
    event = run.events[-1]
    assert event["event"] == "rejuvenation" and event["source"].startswith("rank-03/")
    assert np.array_equal(island.parameters(), blend(mine, elite, 0.5))
    arrays, scalars = island.optimizer_state()
    assert scalars["k"] == 0 and not arrays["v"].any() and np.array_equal(arrays["z"], island.parameters())
    assert run.fitness.loss == 4.25 and run.counters["rejuvenations"] == 1 and run.unsaved
    run.population = type("Worst", (), {"percentile": lambda self, rank: 0.2})()
    run.maybe_rejuvenate(2)  # fitter than the threshold: left alone
    assert len(run.events) == 2


def invoke(args):
    """The script in this process, with no backend chosen yet (another test file may have chosen one)."""
    from eggnog.kernels.core import backend

    chosen, backend._selected = backend._selected, None
    try:
        return CliRunner().invoke(load_script("train_gossip.py").app, [str(a) for a in args])
    finally:
        backend._selected = chosen


def assert_refused(result, fragment):
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert fragment in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("args,message", [
    (["--gossip-recombination-alpha", "1.5"], "--gossip-recombination-alpha must lie in [0, 1], got 1.5"),
    (["--gossip-mixing-rate", "-0.1"], "--gossip-mixing-rate must lie in [0, 1], got -0.1"),
    (["--rejuvenation-rate", "-1"], "--rejuvenation-rate must lie in [0, 1]"),
    (["--archive-rate", "2"], "--archive-rate must lie in [0, 1]"),
    (["--gossip-fitness-decay", "1"], "--gossip-fitness-decay must lie in [0, 1)"),
    (["--gossip-merge", "sexual"], "unknown --gossip-merge 'sexual': choose clonal, recombination, mixed"),
    (["--gossip-optimizer-merge", "keep"], "unknown --gossip-optimizer-merge 'keep'"),
    (["--keep-last", "0"], "--keep-checkpoints must be positive, got 0"),
    (["--elite-checkpoint-multiplier", "0.5"], "--elite-checkpoint-multiplier must be at least 1"),
    (["--dim", "0", "--depth", "1"], "--dim must be positive"),
])
def test_bad_flags_are_refused_before_anything_is_written(tmp_path, args, message):
    assert_refused(invoke(["--run-dir", tmp_path / "run", *args]), message)
    assert not (tmp_path / "run").exists()


def test_resume_needs_a_gossip_run_of_the_same_size(tmp_path):
    assert_refused(invoke(["--resume", tmp_path]), "cannot read run configuration")
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"dim": 16, "depth": 1}))
    before = sorted(p.name for p in run.iterdir())
    data = ["--data", tiny_corpus(tmp_path), "--backend", "cpu"]
    assert_refused(invoke(["--resume", run, *data]), "is not a gossip run (no rank-NN island directories)")
    for rank in range(3):
        (run / f"rank-{rank:02d}").mkdir()
    assert_refused(invoke(["--resume", run, *data]), "holds 3 islands; resume it on as many ranks (mpiexec -n 3)")
    assert sorted(p.name for p in run.iterdir()) == sorted(before + ["rank-00", "rank-01", "rank-02"])
