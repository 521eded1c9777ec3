"""One island of a gossip run over TCP (`--transport tcp`): a process of its own, with no MPI world,
that trains, meets its peers (training/gossip/tcp.py) and keeps the run's books on the shared run
folder (training/gossip/file_population.py). The folder is the MPI run's: rank-NN/ per island
(metrics.jsonl, events.jsonl, checkpoints/ with its `latest`, and here a `lock` and status.json),
the population's metrics.jsonl and checkpoint links at the top.

An island started on a folder that holds its rank-NN checkpoints continues from its own `latest`; one
without checkpoints of its own starts from the population's `best` on disk when there is one (a new
or replaced island joins at the front), else from the shared initialisation. An island that falls
--catch-up-steps behind the furthest one loads that island's newest checkpoint. A stop signal stops
this island alone, saved; the others go on."""

import os
import signal
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from eggnog.runtime.auth import config_hash, token_key
from eggnog.runtime.errors import BadInput
from eggnog.runtime.files import write_atomic
from eggnog.runtime.loggers import open_island
from eggnog.runtime.progress import progress
from eggnog.runtime.rundir import JsonLog, check_resume, check_script, read_config, write_config
from eggnog.runtime.secure_socket import derive_keys
from eggnog.runtime.stop_signals import StopSignals, exit_status
from eggnog.training.gossip.checkpoints import rank_dir, scan, tidy
from eggnog.training.gossip.file_population import FilePopulation
from eggnog.training.gossip.messages import finite_number
from eggnog.training.gossip.mpi import json_number
from eggnog.training.gossip.peers import PeerBook, Rendezvous, advertised, listed_peers, slurm_peers
from eggnog.training.gossip.population import summary_record
from eggnog.training.gossip.run import ARCHIVE_DRAW, GossipRun, drop_steps_after
from eggnog.training.gossip.tcp import TcpGossip, bind_router
from eggnog.training.gossip.tcp_wire import max_body_bytes

# Test hooks, read only by tests and bench/faults/__main__.py: each step lasts at least this many seconds
# (times the slowdown), so that a run's pace is known whatever the machine.
STEP_SECONDS_VAR, SLOWDOWN_VAR = "EGGNOG_TEST_GOSSIP_STEP_SECONDS", "EGGNOG_TEST_GOSSIP_SLOWDOWN"
CLAIM = ".config.claim"  # made by the first island to come: it writes config.json
RUN_ID = "run_id"  # a random id of the run, which every message names
STALE_TIMEOUTS = 10  # a status older than this many --peer-timeout is an island not heard from


class TcpGossipRun(GossipRun):
    def __init__(self, cfg, world, backend, corpus, island_cls):
        number = cfg.island_number()
        super().__init__(cfg, world, backend, corpus, island_cls, number=number)
        self.keys = derive_keys(token_key(cfg.token_file, sharers="every island of the run"))
        self.config_hash = config_hash(cfg, corpus)
        host, _, base = cfg.listen.rpartition(":")
        base = int(base)
        arrays, scalars = self.island.optimizer_state()
        self.max_bytes = max_body_bytes(self.island.parameters().size + sum(a.size for a in arrays.values()),
                                        1 + len(scalars))
        # a taken port is refused before the run folder is touched
        self.router, port = bind_router(host, base + world.local_rank if base else 0, self.keys,
                                       self.max_bytes)
        self.address = advertised(host, port)
        rendezvous = Rendezvous(cfg.rendezvous) if cfg.rendezvous else None
        peers = cfg.peers or ("slurm" if rendezvous is None else None)
        fixed = slurm_peers(base) if peers == "slurm" else listed_peers(peers) if peers else None
        self.book, self.rendezvous = PeerBook(self.address, fixed, rendezvous), rendezvous
        self.start_note = "from the shared initialisation"

    # ---- where the island starts ---------------------------------------------------------------
    def restore(self, run_dir):
        """Continue from this island's own `latest`, else start from the population's `best`."""
        latest = rank_dir(run_dir, self.number) / "checkpoints" / "latest"
        if latest.is_file():
            self._restore_island(latest)
            self.resumed, self.start_note = True, f"from its own checkpoint at step {self.island.step}"
            return
        best = Path(run_dir) / "checkpoints" / "best"
        if best.is_file():
            self.adopt(best.resolve())
            self.start_note = f"from the population's best checkpoint ({best.resolve().name})"

    def adopt(self, path):
        """Take a checkpoint's parameters (a fresh optimiser) and its fitness; the step stays this island's."""
        params, meta = self.island.checkpoint_parameters(path)
        if not np.isfinite(params).all():
            raise BadInput(f"checkpoint {str(path)!r} holds values that are not finite")
        self.island.load(params)
        self.fitness.ema = checkpoint_loss(meta)

    def take_over(self, path):
        """Continue from another island's checkpoint: its parameters, optimiser, step and schedule, and its
        fitness; this island's counters stay its own."""
        params, _ = self.island.checkpoint_parameters(path)
        if not np.isfinite(params).all():
            raise BadInput(f"checkpoint {str(path)!r} holds values that are not finite")
        self.fitness.ema = checkpoint_loss(self.island.restore(path))

    def save(self, round_number, reason, percentile=None):
        """Nothing that is not finite is saved (it would become this island's `latest`)."""
        if not np.isfinite(self.island.parameters()).all():
            self.unsaved = False
            self.events.write(event="save_skipped", step=self.island.step, reason="parameters not finite")
            return
        super().save(round_number, reason, percentile)

    # ---- the loop ------------------------------------------------------------------------------
    def run(self, run_dir):
        cfg, island = self.cfg, self.island
        self.run_dir, self.home = Path(run_dir), rank_dir(run_dir, self.number)
        (self.home / "checkpoints").mkdir(parents=True, exist_ok=True)
        if self.resumed:
            drop_steps_after(self.home / "metrics.jsonl", island.step)
        self.events = JsonLog(self.home / "events.jsonl")
        island_mirror = open_island(run_dir, self.home, asdict(cfg))
        steps_log = JsonLog(self.home / "metrics.jsonl", mirror=island_mirror)
        self.summaries = JsonLog(self.run_dir / "metrics.jsonl")  # lines appended by whichever island summarises
        self.population = FilePopulation(run_dir, self.number, cfg.population_every, STALE_TIMEOUTS * cfg.peer_timeout,
                                         warn=self.bad_file)
        run_id = read_run_id(run_dir)  # before registering: a registered island's run has its id
        if self.rendezvous is not None:
            self.rendezvous.warn = self.bad_file
            self.rendezvous.register(self.number, self.address)
        gossip = TcpGossip(cfg, self.number, self.address, self.router, self.book, self.keys, self.config_hash,
                           self.events, cfg.peer_timeout, run_id, self.max_bytes)
        self.caught_up = set()
        try:
            with StopSignals() as signals:
                signum = self.steps(gossip, signals, steps_log)
        finally:
            gossip.close()
            for log in (steps_log, island_mirror, self.events, self.summaries):
                log.close()
        if signum:
            print(f"\nstopped by {signal.Signals(signum).name} at step {island.step}: island {self.number} saved; "
                  f"start the same command again to continue it", flush=True)
            raise SystemExit(exit_status(signum))
        return {"steps": cfg.steps, "elapsed_s": self.elapsed(), "first": self.first_summary, "final": self.final,
                "gossip": gossip.counts}

    def steps(self, gossip, signals, steps_log):
        cfg, island = self.cfg, self.island
        self.started, self.first_summary, self.final, self.unsaved = time.perf_counter(), None, None, False
        self.events.write(event="start", step=island.step, round=island.step, rounds=cfg.steps - island.step,
                          fitness=json_number(self.fitness.fitness), address=self.address, origin=self.start_note)
        self.population_point()
        bar = progress(cfg.steps, self.world, "steps", initial=island.step)
        pace = float(os.environ.get(STEP_SECONDS_VAR, "0") or 0) * float(os.environ.get(SLOWDOWN_VAR, "1") or 1)
        while island.step < cfg.steps and not signals.signum:
            began = time.perf_counter()
            self.last_loss = island.train_step()
            self.fitness.update(self.last_loss)
            self.unsaved = True
            bar.update(1)
            if pace:
                time.sleep(max(0.0, pace - (time.perf_counter() - began)))
            step = island.step
            outcomes = gossip.boundary(step, island, self.fitness)
            for outcome in outcomes:
                self.count(outcome)
            self.maybe_rejuvenate(step)
            self.step_done(step, outcomes[-1] if outcomes else None, steps_log)
            bar.set_postfix(fitness=round(self.fitness.fitness, 3))
            if step % cfg.population_every == 0:
                self.population_point()
        bar.close()
        if self.unsaved:
            self.save(island.step, "final" if island.step >= cfg.steps else "stopped")
        self.population_point(final=True)
        if signals.signum:
            self.events.write(event="stop", round=island.step, step=island.step,
                              signal=signal.Signals(signals.signum).name)
        self.events.write(event="gossip_counts", step=island.step, **gossip.counts)
        return signals.signum

    def bad_file(self, **record):
        self.events.write(event="bad_shared_file", step=self.island.step, **record)

    def population_point(self, final=False):
        """Post this island's record, read the others', summarise if due (and when this island is done,
        so that a late island's last checkpoint is counted), catch up if far behind."""
        table, live = self.population.post(self.record())
        seen = {**summary_record(table, self.island.step, self.elapsed()), "islands_heard": live}
        if self.first_summary is None and seen["mean_fitness"] is not None:
            self.first_summary = seen  # this island's view, for its closing line
        self.final = seen
        self.population.summarize_if_due(lambda point: self.write_summary(table, live, point), final)
        if not final:
            self.catch_up()

    def write_summary(self, table, live, point):
        cfg = self.cfg
        record = {**summary_record(table, point, self.elapsed()), "islands_heard": live, "written_by": self.number}
        rng = np.random.default_rng([cfg.seed, point, ARCHIVE_DRAW])
        record["checkpoints"] = tidy(self.run_dir, cfg.elites, cfg.keep_checkpoints, cfg.archive_rate, rng)
        self.summaries.write(**record)

    def catch_up(self):
        furthest = self.population.furthest()
        if not self.cfg.catch_up_steps or furthest is None:
            return
        number, step = furthest
        if step - self.island.step < self.cfg.catch_up_steps:
            return
        newest = max((e for e in scan(self.run_dir) if e.rank == number), key=lambda e: e.step, default=None)
        if newest is None or newest.path in self.caught_up:
            return
        before, behind = self.fitness.fitness, step - self.island.step
        try:
            self.take_over(newest.path)
        except (BadInput, OSError) as e:  # removed or replaced since it was listed
            self.events.write(event="catch_up_skipped", step=self.island.step, reason=str(e))
            return
        self.caught_up.add(newest.path)
        self.unsaved = True
        self.events.write(event="catch_up", step=self.island.step, source=str(newest.path.relative_to(
            self.run_dir.resolve())), behind=behind, fitness_before=json_number(before),
            fitness_after=json_number(self.fitness.fitness))

def checkpoint_loss(meta):
    """The fitness average a checkpoint's metadata gives (None when absent or not a finite number)."""
    gossip = meta.get("gossip") if isinstance(meta, dict) else None
    ema = gossip.get("ema_loss") if isinstance(gossip, dict) else None
    return float(ema) if finite_number(ema) else None


def read_run_id(run_dir, wait_s=10.0):
    """The run's id, made by the first island to need it (32 hex digits in RUN/run_id)."""
    path = Path(run_dir) / RUN_ID
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        fd = None
    if fd is not None:
        os.close(fd)
        write_atomic(path, os.urandom(16).hex().encode())
    deadline = time.monotonic() + wait_s
    while True:
        try:
            text = path.read_text().strip()
        except OSError:
            text = ""
        if len(text) == 32 and all(c in "0123456789abcdef" for c in text):
            return text
        if time.monotonic() > deadline:
            raise BadInput(f"{str(path)!r} does not hold a run id (32 hex digits): remove it to make a new one")
        time.sleep(0.05)


def join_run_dir(run_dir, config, fixed, script):
    """This island's place in the shared run folder. The first island to come writes config.json;
    the others' configurations are checked against it, as a resumed run's would be."""
    path = Path(run_dir)
    try:
        (path / "checkpoints").mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BadInput(f"cannot create the run folder {str(path)!r} ({e.strerror})") from None
    stored = path / "config.json"
    try:
        os.close(os.open(path / CLAIM, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        first = not stored.is_file()
    except FileExistsError:
        first = False
    if first:
        write_config(path, config, script)
        return path
    deadline = time.monotonic() + 10
    while not stored.is_file():  # the first island is writing it
        if time.monotonic() > deadline:
            raise BadInput(f"{str(path)!r} has no config.json: is it another kind of folder?")
        time.sleep(0.05)
    check_script(path, script)
    check_resume(read_config(path), config, fixed)
    return path


def launch_tcp(config_cls, island_cls, flags, script):
    """bin/train_gossip.py --transport tcp: this process is one island of the run at --run-dir (or
    --resume), which every island names alike."""
    from eggnog.kernels.core.backend import select_backend
    from eggnog.runtime.run_lock import acquire_lock, release_lock
    from eggnog.runtime.threads import set_threads
    from eggnog.runtime.world import world_without_mpi
    from eggnog.training.launch import open_run_corpus, resolve

    world = world_without_mpi()
    run_dir = flags.get("resume") or flags.get("run_dir")
    if not run_dir:
        raise BadInput("--transport tcp needs --run-dir RUN: the folder every island of the run shares")
    joined = (Path(run_dir) / "config.json").is_file()
    if joined:
        check_script(run_dir, script)
    cfg = resolve(config_cls, flags, 1, run_dir if joined else None)
    chosen = select_backend(flags.get("backend"), world.local_rank)
    threads = set_threads(flags.get("threads"), world)
    corpus = open_run_corpus(cfg, world) if cfg.uses_corpus else None
    run = TcpGossipRun(cfg, world, chosen, corpus, island_cls)
    path = join_run_dir(run_dir, asdict(cfg), cfg.fixed_on_resume(), script)
    home = rank_dir(path, run.number)
    home.mkdir(exist_ok=True)
    acquire_lock(home)  # one process per island
    try:
        run.restore(path)
        print(f"run: {path}  island {run.number} at {run.address}  backend: {chosen.name} ({chosen.device_name})  "
              f"threads: {threads}  (starts {run.start_note})")
        for line in cfg.describe(run):
            print(line)
        print(f"peers: {describe_peers(cfg)}; if it stops, start the same command again", flush=True)
        summary = run.run(path)
        print(cfg.summarize(summary))
        counts = summary["gossip"]
        print(f"island {run.number}: {counts['refused']} messages refused, {counts['timeouts']} exchanges timed out")
        return summary
    finally:
        release_lock(home)


def describe_peers(cfg):
    if cfg.rendezvous:
        return f"rendezvous folder {cfg.rendezvous}"
    return "SLURM's node list" if (cfg.peers or "slurm") == "slurm" else cfg.peers
