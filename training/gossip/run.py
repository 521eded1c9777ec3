"""A gossip run: every rank an island (training/mingru/island.py) training its own model, tournaments at
step boundaries (training/gossip/mpi.py), the population summarised every --population-every rounds
(training/gossip/population.py), checkpoints and their links kept by rank 0
(training/gossip/checkpoints.py).

The run directory: config.json; metrics.jsonl (rank 0: one line per population summary);
checkpoints/ (the population's links: latest, best, elite_NN, archive_NNN); rank-NN/ per island:
metrics.jsonl (one line per step; with --log, also in RUN/tb/rank-NN and a W&B run of the island's own,
runtime/loggers.py), events.jsonl (tournaments, transfers, merges, saves,
rejuvenations; one writer per file, one line per write) and checkpoints/ with its own `latest`.

More in docs/internals.md (training/gossip/run.py)."""

import json
import math
import os
import signal
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from eggnog.kernels.core.first_compile import first_step_done
from eggnog.runtime.commands import this_program
from eggnog.runtime.errors import BadInput
from eggnog.runtime.files import write_atomic
from eggnog.runtime.loggers import open_island
from eggnog.runtime.progress import progress
from eggnog.runtime.rundir import JsonLog, check_resume, metrics_log
from eggnog.runtime.stop_signals import StopSignals, exit_status
from eggnog.training.gossip.checkpoints import checkpoint_name, elite_entries, island_ranks, rank_dir, tidy
from eggnog.training.gossip.fitness import FitnessEma, fitness_of_loss
from eggnog.training.gossip.merge import blend
from eggnog.training.gossip.mpi import Gossip, json_number
from eggnog.training.gossip.population import COUNTERS, FIELDS, Population, save_probability, summary_record
from eggnog.training.gossip.stop import StopAgreement
from eggnog.training.mingru.island import island_data_seed

# Test hook, read only by tests: each rank sleeps up to this many seconds (random) at every round.
DELAY_VAR = "EGGNOG_TEST_GOSSIP_DELAY"
REJUVENATION_ALPHA = 0.5  # gruboros's half-way blend with the elite
SAVE_DRAW, REJUVENATION_DRAW, DELAY_DRAW, ARCHIVE_DRAW = 1, 2, 3, 4


def agreed(world, fn):
    """Run fn on every rank; a BadInput on any rank is raised on all of them (one failing rank would
    otherwise leave the others waiting in the next collective)."""
    message = None
    try:
        fn()
    except BadInput as e:
        message = str(e)
    failed = world.allgather_array(np.array([message is not None], dtype=np.int32))
    if failed.any():
        raise BadInput(world.bcast_json(message, root=int(np.argmax(failed))))


class GossipRun:
    island_checkpoints = True  # each rank-NN island resumes from its own checkpoints (restore)

    def __init__(self, cfg, world, backend, corpus, island_cls, number=None):
        """number: the island's (its rank-NN folder, data stream and draws); the MPI rank by default."""
        cfg.check(world.size)
        self.cfg, self.world, self.backend = cfg, world, backend
        self.number = world.rank if number is None else number
        self.island = island_cls(cfg, world.alone(), backend, corpus, island_data_seed(cfg.seed, self.number))
        self.fitness = FitnessEma(cfg.gossip_fitness_decay)
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.last_loss = self.last_val = math.nan
        self.resumed = False

    # ---- resume --------------------------------------------------------------------------------
    def restore(self, resume):
        ranks = island_ranks(resume)
        if not ranks:
            raise BadInput(f"cannot resume: {str(resume)!r} is not a gossip run (no rank-NN island directories)")
        if ranks != list(range(self.world.size)):
            raise BadInput(f"cannot resume: {str(resume)!r} holds {len(ranks)} islands; resume it on as many "
                           f"ranks (mpiexec -n {len(ranks)})")
        agreed(self.world, lambda: self._restore_island(rank_dir(resume, self.world.rank) / "checkpoints" / "latest"))
        self.resumed = True

    def _restore_island(self, latest):
        if not latest.is_file():
            return  # this island never saved: it starts afresh
        meta = self.island.restore(latest)
        check_resume(meta.get("config", {}), asdict(self.cfg), self.cfg.fixed_on_resume())
        gossip = meta.get("gossip", {})
        self.fitness.ema = gossip.get("ema_loss")
        self.counters.update({k: int(v) for k, v in gossip.get("counters", {}).items() if k in self.counters})

    # ---- one rank's loop ------------------------------------------------------------------------
    def record(self):
        values = {"step": self.island.step, "fitness": self.fitness.fitness, "train_bpb": self.last_loss,
                  "val_bpb": self.last_val, **self.counters}
        return np.array([values[name] for name in FIELDS], dtype=np.float64)

    def draw(self, round_number, purpose):
        """A random number of this rank, round and purpose (the same after a resume)."""
        return np.random.default_rng([self.cfg.seed, self.number, round_number, purpose]).random()

    def run(self, run_dir):
        cfg, world, island = self.cfg, self.world, self.island
        self.run_dir, self.home = Path(run_dir), rank_dir(run_dir, world.rank)
        (self.home / "checkpoints").mkdir(parents=True, exist_ok=True)
        if self.resumed:  # steps after the island's checkpoint are run again: log each step once
            drop_steps_after(self.home / "metrics.jsonl", island.step)
        self.events = JsonLog(self.home / "events.jsonl")
        island_mirror = open_island(run_dir, self.home, asdict(cfg))  # --log: this island's own lines
        steps_log = JsonLog(self.home / "metrics.jsonl", mirror=island_mirror)
        self.summaries = metrics_log(world, run_dir)
        comm = world.comm.Dup() if world.size > 1 else None
        stop_comm = world.comm.Dup() if world.size > 1 else None  # the stop agreement's own
        # every rank walks the same rounds: from the furthest island's step, until the last island is done
        steps = world.allgather_array(np.array([island.step], dtype=np.int64))
        first_round, end = int(steps.max()), int(steps.max()) + cfg.steps - int(steps.min())
        with StopSignals() as signals:
            stop = StopAgreement(stop_comm, world.rank, world.size, signals, first_round)
            gossip = Gossip(comm, world.rank, world.size, cfg, self.events, poll=stop.poll)
            self.population = Population(comm, world.size, poll=stop.poll)
            last = self.rounds(first_round, end, gossip, stop, steps_log)
            if self.unsaved:  # e.g. an island that finished first and then lost a tournament
                self.save(last, "final" if last == end else "stopped")
            self.summarize(self.population.complete())
            self.summarize(self.population.gather(self.record(), (last, self.elapsed())))
            signum = stop.settle()
        if signum:
            self.events.write(event="stop", round=last, step=island.step, signal=signal.Signals(signum).name)
        steps_log.close()
        island_mirror.close()
        self.events.close()
        self.summaries.close()
        world.barrier(quiet=True)
        for c in (comm, stop_comm):
            if c is not None:
                c.Free()
        if signum:
            if world.is_root:
                print(f"\nstopped by {signal.Signals(signum).name} at round {last}: every island saved "
                      f"(rank-NN/checkpoints/latest); continue with: {this_program()} --resume {run_dir}",
                      flush=True)
            raise SystemExit(exit_status(signum))
        return {"steps": cfg.steps, "elapsed_s": self.elapsed(), "first": self.first_summary, "final": self.final}

    def rounds(self, first_round, end, gossip, stop, steps_log):
        """Walk rounds first_round.. until `end`, or the round a stop signal is agreed on; returns where
        it stopped."""
        cfg, island = self.cfg, self.island
        self.started, self.first_summary, self.final = time.perf_counter(), None, None
        self.events.write(event="start", step=island.step, round=first_round, rounds=end - first_round,
                          fitness=json_number(self.fitness.fitness))
        self.summarize(self.population.gather(self.record(), (first_round, 0.0)))
        bar = progress(cfg.steps, self.world, "steps", initial=island.step)
        delay = float(os.environ.get(DELAY_VAR, "0") or 0)
        self.unsaved = False  # the model differs from its last checkpoint
        r = first_round
        while r < end:
            stop_at = stop.stop_round()
            if stop_at is not None and r >= stop_at:
                break
            stop.started = r + 1
            trained = island.step < cfg.steps
            if trained:
                self.last_loss = island.train_step()
                first_step_done()
                self.fitness.update(self.last_loss)
                self.unsaved = True
                bar.update(1)
            if delay:
                time.sleep(delay * self.draw(r, DELAY_DRAW))
            outcome = gossip.tournament(r, island.step, island, self.fitness)
            self.count(outcome)
            if trained:
                self.maybe_rejuvenate(r)
                self.step_done(r, outcome, steps_log)
                bar.set_postfix(fitness=round(self.fitness.fitness, 3))
            if (r - first_round + 1) % cfg.population_every == 0 and r + 1 < end:
                self.summarize(self.population.post(self.record(), (r + 1, self.elapsed())))
            r += 1
        bar.close()
        return r

    def elapsed(self):
        return time.perf_counter() - self.started

    def count(self, outcome):
        if outcome is None:
            return
        self.counters["mixes"] += 1
        self.counters["wins" if outcome["won"] else "losses"] += 1
        if not outcome["won"]:
            self.counters[outcome["merge"]] += 1
            self.unsaved = True

    def step_done(self, round_number, outcome, steps_log):
        """Validate, log and (the last step, or by the fitness-weighted draw) save after a training step."""
        cfg, island = self.cfg, self.island
        record = {"step": island.step, "train_bpb": round(self.last_loss, 5),
                  "fitness": round(self.fitness.fitness, 5)}
        if cfg.validation_due(island.step, cfg.last_step(island.step)):
            self.last_val = island.validate()
            record["val_bpb"] = round(self.last_val, 5)
        if outcome is not None:
            record["tournament"] = "won" if outcome["won"] else outcome["merge"]
        steps_log.write(**record, elapsed_s=round(self.elapsed(), 3))
        percentile = self.population.percentile(self.number)
        if island.step == cfg.steps:
            self.save(round_number, "final")
        elif self.draw(round_number, SAVE_DRAW) < save_probability(cfg.checkpoint_every,
                                                                    cfg.elite_checkpoint_multiplier, percentile):
            self.save(round_number, "fitness-weighted", percentile)

    def save(self, round_number, reason, percentile=None):
        started = time.perf_counter()
        self.counters["saves"] += 1
        self.unsaved = False
        meta = {"gossip": {"rank": self.number, "round": round_number, "ema_loss": self.fitness.ema,
                           "counters": dict(self.counters)}}
        path = self.island.save(self.home / "checkpoints", checkpoint_name(self.island.step, self.fitness.loss), meta)
        self.events.write(event="save", round=round_number, step=self.island.step, reason=reason,
                          path=str(path.relative_to(self.run_dir)), loss=json_number(self.fitness.loss),
                          percentile=percentile, seconds=round(time.perf_counter() - started, 6))

    def maybe_rejuvenate(self, round_number):
        """With --rejuvenation-rate, an island ranked at or past --rejuvenation-threshold blends
        half-way with the best elite checkpoint that beats it and restarts its optimiser, taking that
        checkpoint's fitness."""
        cfg = self.cfg
        if cfg.rejuvenation_rate == 0 or self.draw(round_number, REJUVENATION_DRAW) >= cfg.rejuvenation_rate:
            return
        percentile = self.population.percentile(self.number)
        if percentile < cfg.rejuvenation_threshold:
            return
        base = {"round": round_number, "step": self.island.step, "percentile": percentile}
        better = [e for e in elite_entries(self.run_dir) if e.loss < self.fitness.loss]
        if not better:
            self.events.write(event="rejuvenation_skipped", **base, reason="no elite checkpoint is fitter")
            return
        source = better[0]
        try:
            params, meta = self.island.checkpoint_parameters(source.path)
        except (BadInput, OSError) as e:  # removed or replaced since the links were read
            self.events.write(event="rejuvenation_skipped", **base, reason=str(e))
            return
        before = self.fitness.fitness
        self.island.load(blend(self.island.parameters(), params, REJUVENATION_ALPHA))
        ema = meta.get("gossip", {}).get("ema_loss")
        self.fitness.inherit(fitness_of_loss(source.loss if ema is None else ema))
        self.counters["rejuvenations"] += 1
        self.unsaved = True
        self.events.write(event="rejuvenation", **base, source=str(source.path.relative_to(self.run_dir.resolve())),
                          alpha=REJUVENATION_ALPHA, fitness_before=before, fitness_after=self.fitness.fitness)

    # ---- population ---------------------------------------------------------------------------
    def summarize(self, done):
        """Rank 0: write a completed population table and tidy the checkpoints."""
        if done is None or not self.world.is_root:
            return
        (round_number, elapsed), table = done
        record = summary_record(table, round_number, elapsed)
        cfg = self.cfg
        rng = np.random.default_rng([cfg.seed, round_number, ARCHIVE_DRAW])
        record["checkpoints"] = tidy(self.run_dir, cfg.elites, cfg.keep_checkpoints, cfg.archive_rate, rng)
        self.summaries.write(**record)
        if self.first_summary is None and record["mean_fitness"] is not None:
            self.first_summary = record
        self.final = record


def drop_steps_after(path, step):
    if path.is_file():
        kept = [line for line in path.read_text().splitlines(keepends=True)
                if line.strip() and json.loads(line).get("step", 0) <= step]
        write_atomic(path, "".join(kept).encode())
