"""Coordinator mode on 4 ranks (rank 0 coordinates, 3 workers): bit-identical to the synchronous
trainer without stragglers (also with AdamW, with adaptive noise, its overlay included, and for d-eggs'
transformer), after a straggler's chunk is redone elsewhere, and after a checkpoint write interrupted
part-way and a resume."""

from pathlib import Path

import numpy as np
import pytest

from eggnog.corpus.reader import open_corpus
from eggnog.evolution.coordinator.coordinator import CRASH_VAR, CheckpointInterrupted
from eggnog.evolution.coordinator.trainer import CoordinatedEsTrainer
from eggnog.evolution.coordinator.worker import SLOW_WORKER_VAR
from eggnog.evolution.es_trainer import EsTrainer
from eggnog.kernels.core.backend import Backend
from eggnog.runtime.checkpoint import load_checkpoint
from eggnog.runtime.rundir import read_jsonl
from tests.es_helpers import tiny_config, tiny_corpus

STEPS = 6


def coordinator_config(**overrides):
    return tiny_config(steps=STEPS, mode="coordinator", population_chunk=2, checkpoint_every=2, validate_every=3,
                       **overrides)


def new_run_dir(world, root, name):
    path = Path(root) / name
    if world.is_root:
        (path / "checkpoints").mkdir(parents=True)
    world.barrier()
    return path


def coordinated_run(world, corpus_path, run_dir, resume=False, **overrides):
    trainer = CoordinatedEsTrainer(coordinator_config(**overrides), world, Backend("cpu"), open_corpus(corpus_path))
    if resume:
        trainer.restore(run_dir)
    return trainer.run(run_dir)


def sync_dir(shared_dir, overrides):
    return Path(shared_dir) / ("sync-" + "-".join(map(str, overrides.values())))


def synchronous_run(world, shared_dir, **overrides):
    """The final checkpoint's arrays of the synchronous trainer on one rank (rank 0 only)."""
    corpus_path = world.root_first(lambda: tiny_corpus(shared_dir))
    run_dir = sync_dir(shared_dir, overrides)
    if world.is_root:
        (run_dir / "checkpoints").mkdir(parents=True)
        alone = world.comm.Split(0, 0)
        from eggnog.runtime.world import World

        one = World(alone, 0, 1, 0, 1)
        EsTrainer(tiny_config(steps=STEPS, checkpoint_every=2, validate_every=3, **overrides), one, Backend("cpu"),
                  open_corpus(corpus_path)).run(run_dir)
        alone.Free()
    else:
        world.comm.Split(1, world.rank).Free()
    world.barrier(quiet=True)
    return corpus_path, (load_checkpoint(run_dir)[0] if world.is_root else None)


@pytest.fixture
def synchronous_result(world, shared_dir):
    return synchronous_run(world, shared_dir)


def same_as(world, run_dir, reference):
    if not world.is_root:
        return world.bcast_json(None)
    arrays, record = load_checkpoint(run_dir)
    kept = [k for k in arrays if not k.startswith("history")]  # the fitness history is the coordinator's own
    same = record["step"] == STEPS and set(kept) == set(reference)
    same = same and all(np.array_equal(arrays[k], reference[k]) for k in kept)
    return world.bcast_json(bool(same))


@pytest.mark.parametrize("settings", [{"optimizer": "ztest"}, {"optimizer": "adamw"},
                                      {"adaptive_noise": True, "alpha": 0.2}, {"model": "transformer"}],
                         ids=["ztest", "adamw", "adaptive-noise", "transformer"])
def test_coordinator_matches_the_synchronous_trainer(world, shared_dir, parallel_assert, settings):
    corpus_path, reference = synchronous_run(world, shared_dir, **settings)
    run_dir = new_run_dir(world, shared_dir, "coordinated-" + "-".join(map(str, settings.values())))
    coordinated_run(world, corpus_path, run_dir, **settings)
    parallel_assert(same_as(world, run_dir, reference), "coordinator parameters or states differ from sync mode")
    ok = True
    if world.is_root:
        lines = read_jsonl(run_dir / "metrics.jsonl")
        ok = [r["step"] for r in lines] == list(range(1, STEPS + 1)) and all(r["chunks"] == 4 for r in lines)
        ok &= sum("val_bpb" in r for r in lines) == 2
        losses = ["train_bpb"] + (["train_deggs_proxy"] if "transformer" in settings.values() else [])
        sync_lines = read_jsonl(sync_dir(shared_dir, settings) / "metrics.jsonl")
        ok &= all(r[k] == q[k] for r, q in zip(lines, sync_lines) for k in losses)
    parallel_assert(world.bcast_json(bool(ok)), "metrics.jsonl is not one line per step with chunks, val "
                    "and the synchronous run's losses")


def test_a_straggler_chunk_is_redone_and_the_result_is_unchanged(world, shared_dir, synchronous_result,
                                                                 parallel_assert, monkeypatch):
    corpus_path, reference = synchronous_result
    monkeypatch.setenv(SLOW_WORKER_VAR, "1:1:1.5")  # rank 1's first result from step 1 on comes 1.5 s late
    for attempt in range(3):  # scheduling decides whether rank 1 gets a chunk late enough: a few tries
        run_dir = new_run_dir(world, shared_dir, f"straggler-{attempt}")
        summary = coordinated_run(world, corpus_path, run_dir, straggler_timeout=0.3)
        parallel_assert(same_as(world, run_dir, reference), "a redone straggler chunk changed the result")
        counted, detail = True, None
        if world.is_root:
            logged = sum(r["requeued"] for r in read_jsonl(run_dir / "metrics.jsonl"))
            totals = summary["coordinator"]
            counted = logged == totals["requeued"] >= 1 and totals["duplicates"] + totals["stale"] >= 1
            detail = f"logged re-queues {logged}, totals {totals}"
        counted, detail = world.bcast_json([bool(counted), detail])
        if counted:
            break
    parallel_assert(counted, f"the re-queue or the dropped late result was not counted ({detail})")


def test_an_interrupted_checkpoint_write_leaves_the_previous_one_and_resume_continues(
        world, shared_dir, synchronous_result, parallel_assert, monkeypatch):
    corpus_path, reference = synchronous_result
    run_dir = new_run_dir(world, shared_dir, "interrupted")
    monkeypatch.setenv(CRASH_VAR, "4")
    raised = False
    try:
        coordinated_run(world, corpus_path, run_dir)
    except CheckpointInterrupted:
        raised = True
    parallel_assert(world.bcast_json(raised if world.is_root else None), "the test hook did not interrupt step 4")
    intact = True
    if world.is_root:
        arrays, record = load_checkpoint(run_dir)
        leftovers = [p.name for p in (run_dir / "checkpoints").iterdir() if ".tmp-" in p.name]
        intact = record["step"] == 3 and len(leftovers) == 1 and "step-00000004" in leftovers[0]
    parallel_assert(world.bcast_json(bool(intact)), "latest is not the intact step-3 checkpoint beside the torn one")
    monkeypatch.delenv(CRASH_VAR)
    coordinated_run(world, corpus_path, run_dir, resume=True)
    parallel_assert(same_as(world, run_dir, reference), "the resumed run differs from an uninterrupted one")
