"""A signal that reaches one rank only stops every rank after the same step, with one checkpoint of
that step and the signal's exit status on every rank."""

import os
import signal
from pathlib import Path

from eggnog.corpus.reader import open_corpus
from eggnog.evolution.es_trainer import EsTrainer
from eggnog.kernels.core.backend import Backend
from eggnog.runtime.checkpoint import checkpoint_step
from eggnog.runtime.rundir import read_jsonl
from tests.es_helpers import tiny_config, tiny_corpus

SIGNALLED_RANK, SIGNALLED_AT = 1, 2


def fresh_run_dir(world, shared_dir, name):
    run_dir = Path(shared_dir) / name
    if world.is_root:
        (run_dir / "checkpoints").mkdir(parents=True)
    world.barrier()
    return run_dir


def exit_statuses(world, run):
    """Every rank's exit status of `run()` (-1 where it returned)."""
    try:
        run()
        status = -1
    except SystemExit as e:
        status = e.code
    return world.allgather_array([status])


def test_a_signal_on_one_rank_stops_all_after_the_same_step(world, shared_dir, parallel_assert, monkeypatch):
    corpus_path = world.root_first(lambda: tiny_corpus(shared_dir))
    run_dir = fresh_run_dir(world, shared_dir, "signalled")
    trainer = EsTrainer(tiny_config(steps=50, checkpoint_every=100, validate_every=100), world, Backend("cpu"),
                        open_corpus(corpus_path))
    step = trainer.loop_step

    def loop_step(clock):
        if world.rank == SIGNALLED_RANK and trainer.steps_done() == SIGNALLED_AT:
            os.kill(os.getpid(), signal.SIGTERM)
        return step(clock)

    monkeypatch.setattr(trainer, "loop_step", loop_step)
    statuses = exit_statuses(world, lambda: trainer.run(run_dir))
    parallel_assert(bool((statuses == 143).all()), f"exit statuses {statuses.tolist()}, expected 143 everywhere")
    ok = True
    if world.is_root:
        stopped = SIGNALLED_AT + 1
        ok = checkpoint_step(run_dir) == stopped
        ok &= [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl")] == list(range(1, stopped + 1))
    parallel_assert(world.bcast_json(bool(ok)), "the checkpoint or the log is not of the step after the signal")


def test_a_signal_on_a_worker_stops_a_coordinated_run_after_a_saved_step(world, shared_dir, parallel_assert,
                                                                        monkeypatch):
    from eggnog.evolution.coordinator.trainer import CoordinatedEsTrainer
    from eggnog.evolution.coordinator.worker import Worker

    corpus_path = world.root_first(lambda: tiny_corpus(shared_dir))
    run_dir = fresh_run_dir(world, shared_dir, "coordinated")
    job, sent = Worker.job, []

    def signalled_job(self, step, chunk, states):
        if world.rank == SIGNALLED_RANK and step >= SIGNALLED_AT and not sent:
            sent.append(step)
            os.kill(os.getpid(), signal.SIGINT)
        return job(self, step, chunk, states)

    monkeypatch.setattr(Worker, "job", signalled_job)
    cfg = tiny_config(steps=50, mode="coordinator", population_chunk=2, checkpoint_every=100, validate_every=100)
    trainer = CoordinatedEsTrainer(cfg, world, Backend("cpu"), open_corpus(corpus_path))
    statuses = exit_statuses(world, lambda: trainer.run(run_dir))
    parallel_assert(bool((statuses == 130).all()), f"exit statuses {statuses.tolist()}, expected 130 everywhere")
    signalled_at = max(world.allgather_array([sent[0] if sent else -1]))
    ok = True
    if world.is_root:
        stopped = checkpoint_step(run_dir)  # the step under way when the request came in, or the next
        ok = stopped in (signalled_at + 1, signalled_at + 2)
        ok &= [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl")] == list(range(1, stopped + 1))
    parallel_assert(world.bcast_json(bool(ok)), "the coordinated run did not stop at a saved step")
