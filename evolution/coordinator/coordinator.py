"""Coordinator mode of integer EGGROLL (d-eggs' coordinator): one process hands out chunks of the
population and holds no model; workers (`worker.py`) evaluate them. Over MPI rank 0
coordinates ranks 1... (`mpi.py`); over TCP workers join, leave and return while the run
goes on (`tcp.py`). The protocol below is the same for both.

More in docs/internals.md (evolution/coordinator/coordinator.py)."""

import os
import signal
import time
from collections import deque
from statistics import median

import numpy as np

from eggnog.evolution.coordinator import messages, wire
from eggnog.evolution.eggroll import full_state, snapshot_arrays, snapshot_bytes
from eggnog.evolution.fitness import bits_per_byte, deggs_proxy, pack_ternary, unpack_ternary
from eggnog.kernels.core.first_compile import first_step_done
from eggnog.runtime.checkpoint import encode_checkpoint, prune_checkpoints, save_checkpoint
from eggnog.runtime.commands import this_program
from eggnog.runtime.files import temp_name
from eggnog.runtime.rundir import resumed_metrics_log
from eggnog.runtime.stop_signals import StopSignals, exit_status
from eggnog.training.run.schedule import improves

# Test hook: a step number; the checkpoint of that step stops half-written, as if the job died there.
CRASH_VAR = "EGGNOG_TEST_CHECKPOINT_CRASH"


class CheckpointInterrupted(RuntimeError):
    pass


def interrupted_save(directory, step, arrays, meta, link_latest=True):
    """What a job killed while writing a checkpoint leaves behind: half a temporary file."""
    from eggnog.runtime.checkpoint import checkpoint_path

    data = encode_checkpoint(step, arrays, meta)
    with open(temp_name(checkpoint_path(directory, step)), "wb") as f:
        f.write(data[:len(data) // 2])
    raise CheckpointInterrupted(f"checkpoint of step {step} interrupted (test hook)")


def history_arrays(history):
    """The fitness history as arrays for a checkpoint: steps and their packed rows."""
    steps = np.array(sorted(history), dtype=np.int64)
    width = max((history[s].size for s in history), default=0)
    rows = np.zeros((steps.size, width), dtype=np.uint8)
    for i, s in enumerate(steps):
        rows[i] = history[s]
    return {"history_steps": steps, "history": rows}


def history_from(arrays):
    if "history_steps" not in arrays:
        return {}
    return {int(s): row.copy() for s, row in zip(arrays["history_steps"], arrays["history"])}


POLL_S = 0.05  # longest wait for a message before looking for lost workers again
RECENT_CHUNKS = 64  # chunk times the backup rule's median is taken over


class Coordinator:
    def __init__(self, cfg, world, link, step, states, history, best_val, val_sample, latest=None):
        """link: mpi.MpiCoordinatorLink or tcp.TcpCoordinatorLink; step: the
        steps done; latest: (step, snapshot bytes) of the parameters at the step the run resumed from,
        for workers that fall behind."""
        self.cfg, self.world, self.link = cfg, world, link
        self.model = cfg.build_model()  # its tensor table only, to read a worker's snapshot
        self.shape = messages.run_shape(cfg, self.model)  # what a worker's message must look like
        self.step, self.states, self.history, self.best_val = step, states, history, best_val
        self.val_rows, self.val_tokens = val_sample
        self.chunk = cfg.population_chunk
        self.n_chunks = cfg.population // self.chunk
        self.latest = latest  # (step, snapshot bytes) of the newest snapshot
        self.chunk_seconds = deque(maxlen=RECENT_CHUNKS)
        self.snapshot = None  # {"step", "validate", "assigned_at"} while one is due
        crash = os.environ.get(CRASH_VAR)
        self.crash_step = int(crash) if crash else None
        self.totals = {"requeued": 0, "duplicates": 0, "stale": 0}
        self.counts = dict.fromkeys(self.totals, 0)  # of the step under way
        self.unanswered = None
        self.stop_signal, self.stopped, self.status = 0, False, 0  # a stop signal of any rank; its step saved
        self.time_up = False  # the step just finished ended past --max-minutes

    # ---- one step's bookkeeping ----------------------------------------------------------------
    def begin_step(self):
        self.queue = deque(range(self.n_chunks))
        self.done = np.zeros(self.n_chunks, dtype=bool)
        self.assigned_at = np.full(self.n_chunks, -np.inf)
        self.holder = {}  # chunk -> the worker it was last handed to
        self.fitness = np.zeros(self.cfg.population // 2, dtype=np.int8)
        self.packed = [None] * self.n_chunks
        self.loglik = self.proxy = 0
        for key, value in self.counts.items():
            self.totals[key] += value
        self.counts = dict.fromkeys(self.totals, 0)
        self.step_started = time.perf_counter()

    def next_chunk(self):
        """A chunk to hand out, or None: d-eggs' queue walk (done chunks leave the queue; one in
        progress and younger than the timeout goes to the back), then the backup rule."""
        now = time.perf_counter()
        for _ in range(len(self.queue)):
            chunk = self.queue.popleft()
            if self.done[chunk]:
                continue
            self.queue.append(chunk)
            age = now - self.assigned_at[chunk]
            if age < self.cfg.straggler_timeout:
                continue
            if np.isfinite(self.assigned_at[chunk]):
                self.counts["requeued"] += 1
            self.assigned_at[chunk] = now
            return chunk
        return self.backup_chunk(now)

    def backup_chunk(self, now):
        """The oldest chunk in progress, once older than --straggler-factor x the median chunk time."""
        if self.cfg.straggler_factor <= 0 or len(self.chunk_seconds) < 2:
            return None
        waiting = [c for c in self.queue if not self.done[c]]
        if not waiting:
            return None
        chunk = min(waiting, key=lambda c: self.assigned_at[c])
        if now - self.assigned_at[chunk] < self.cfg.straggler_factor * median(self.chunk_seconds):
            return None
        self.counts["requeued"] += 1
        self.assigned_at[chunk] = now
        return chunk

    def forget(self, worker):
        """A lost worker's chunks (and snapshot) go to the next worker that asks."""
        for chunk, holder in self.holder.items():
            if holder == worker and not self.done[chunk] and np.isfinite(self.assigned_at[chunk]):
                self.assigned_at[chunk] = -np.inf
                self.counts["requeued"] += 1
        if self.snapshot is not None and self.snapshot.get("holder") == worker:
            self.snapshot["assigned_at"] = -np.inf

    # ---- messages ------------------------------------------------------------------------------
    def reply(self, dest, *parts):
        self.link.send(dest, wire.encode(*parts))

    def on_request(self, source, worker_step):
        if worker_step != self.step:
            self.catch_up(source, worker_step)
            return
        if self.snapshot is not None:
            now = time.perf_counter()
            if now - self.snapshot["assigned_at"] >= self.cfg.straggler_timeout:
                self.snapshot.update(assigned_at=now, holder=source)
                self.reply(source, [wire.SNAPSHOT, self.step, self.snapshot["validate"]])
            else:
                self.reply(source, [wire.WAIT])
            return
        chunk = self.next_chunk() if self.step < self.cfg.steps else None
        if chunk is None:
            self.reply(source, [wire.WAIT])
            return
        self.holder[chunk] = source
        self.reply(source, [wire.JOB, self.step, chunk], self.states[chunk * self.chunk:(chunk + 1) * self.chunk])

    def catch_up(self, source, worker_step):
        """The next step's fitness for a worker behind, or the latest snapshot where that is past the
        history, moves more bytes than the snapshot, or the worker is ahead (a resumed coordinator, or a
        worker of an earlier run). Before the run's first snapshot that is the initial parameters."""
        replay = worker_step < self.step and worker_step in self.history
        snapshot = self.latest or self.initial_snapshot()
        if replay and (snapshot is None or snapshot[0] <= worker_step
                       or sum(self.history[s].size for s in range(worker_step, snapshot[0])) <= len(snapshot[1])):
            self.reply(source, [wire.CATCHUP, worker_step], self.history[worker_step])
        elif snapshot is not None and (snapshot[0] in self.history or snapshot[0] == self.step):
            self.reply(source, [wire.LOAD, snapshot[0]], np.frombuffer(snapshot[1], np.uint8))
        else:  # refused, not a crash: the run goes on without this worker
            raise wire.Malformed(f"a worker at step {worker_step} that neither the fitness history nor the latest "
                                 f"snapshot can bring to step {self.step} (raise --history)")

    def initial_snapshot(self):
        """(0, snapshot bytes) of the run's initial parameters, while every step since is in the history."""
        if any(s not in self.history for s in range(self.step)):
            return None
        params = self.model.init_params(self.cfg.seed)
        self.latest = (0, snapshot_bytes(self.cfg, self.model, params, full_state(self.cfg, self.model, {})))
        return self.latest

    def on_result(self, message):
        result = messages.parse_result(message, self.shape)
        if result.step != self.step:
            self.counts["stale"] += 1
            return
        chunk, pairs = result.chunk, self.chunk // 2
        if self.done[chunk]:
            self.counts["duplicates"] += 1
            return
        self.chunk_seconds.append(time.perf_counter() - self.assigned_at[chunk])
        if pairs % 5:
            self.fitness[chunk * pairs:(chunk + 1) * pairs] = unpack_ternary(result.packed, pairs)
        else:  # a chunk's packed bytes are those of its place in the step's row: no unpacking
            self.packed[chunk] = result.packed.copy()
        self.states[chunk * self.chunk:(chunk + 1) * self.chunk] = \
            result.states.view(np.int8).reshape(self.chunk, *self.model.state_dims)
        self.loglik += result.loglik
        self.proxy += result.proxy
        self.done[chunk] = True
        if self.done.all():
            self.finish_step()

    def finish_step(self):
        cfg = self.cfg
        first_step_done()  # the workers compiled their kernels in the run's first step
        self.history[self.step] = pack_ternary(self.fitness) if self.chunk // 2 % 5 else np.concatenate(self.packed)
        for old in [s for s in self.history if s <= self.step - cfg.history]:
            del self.history[old]
        seconds = time.perf_counter() - self.step_started
        tokens = cfg.population * cfg.tokens_per_update
        self.step += 1
        self.record = {"step": self.step, "train_bpb": round(bits_per_byte(self.loglik, tokens), 5),
                       "chunks": self.n_chunks, **self.counts, "tokens_per_s": round(tokens / seconds, 1),
                       "step_s": round(seconds, 4)}
        if self.model.has_proxy_loss:
            self.record["train_deggs_proxy"] = round(deggs_proxy(self.proxy, tokens), 5)
        self.time_up = cfg.out_of_time(time.perf_counter() - self.started)
        last = cfg.last_step(self.step, self.time_up)
        validate = cfg.validation_due(self.step, last)
        if validate or cfg.checkpoint_due(self.step, last) or self.stop_signal:
            self.snapshot = {"step": self.step, "validate": int(validate), "assigned_at": -np.inf}
        else:
            self.log_step()
        self.begin_step()

    def on_snapshot(self, message, run_dir):
        step, validated, val_loglik, body = messages.parse_snapshot_result(message, self.shape)
        if self.snapshot is None or step != self.snapshot["step"]:
            self.counts["duplicates"] += 1
            return
        if validated != self.snapshot["validate"]:
            raise wire.Malformed(f"a snapshot validated={validated} where {self.snapshot['validate']} was asked")
        params, state = snapshot_arrays(self.cfg, self.model, body)
        self.latest = (self.step, body.tobytes())
        improved = False
        if validated:
            val = bits_per_byte(val_loglik, self.val_rows * self.val_tokens)
            self.record["val_bpb"] = round(val, 5)
            improved = improves(val, self.best_val)
            if improved:
                self.best_val = val
        last = self.cfg.last_step(self.step, self.time_up)
        if self.cfg.checkpoint_due(self.step, last, improved) or self.stop_signal:
            self.save(run_dir, params, state, improved)
        self.snapshot = None
        self.stopped = bool(self.stop_signal)  # the step a signal asked to end at is saved
        self.log_step()

    def save(self, run_dir, params, optimizer_state, best):
        from eggnog.evolution.es_trainer import write_es_checkpoint

        write = interrupted_save if self.crash_step == self.step else save_checkpoint
        path = write_es_checkpoint(run_dir, self.cfg, self.step, params, self.states, self.best_val, best,
                                   extra={**optimizer_state, **history_arrays(self.history)}, write=write)
        prune_checkpoints(run_dir / "checkpoints", self.cfg.keep_checkpoints)
        print(f"checkpoint: {path}", flush=True)

    def log_step(self):
        r = self.record
        val = f"  val {r['val_bpb']:.4f}" if "val_bpb" in r else ""
        print(f"step {r['step']}/{self.cfg.steps}  chunks {r['chunks']}  requeued {r['requeued']}  "
              f"duplicates {r['duplicates']}  stale {r['stale']}  tokens/s {r['tokens_per_s']:,.0f}  "
              f"loss {r['train_bpb']:.4f} bits/byte{val}", flush=True)
        self.log.write(**r, elapsed_s=round(time.perf_counter() - self.started, 3))

    # ---- the loop ------------------------------------------------------------------------------
    def serve(self, run_dir):
        for worker in self.link.lost():
            self.forget(worker)
        got = self.link.receive(POLL_S)
        if got is None:
            return
        message, source = got
        try:
            self.dispatch(message, source, run_dir)
        except wire.Malformed as e:
            self.unanswered = None
            self.link.refuse(source, str(e))
            self.forget(source)

    def dispatch(self, message, source, run_dir):
        what = messages.kind_of(message)
        if what == wire.REQUEST:
            worker_step, signum = messages.parse_request(message, self.shape)
            self.unanswered = source  # answered with STOP if handling the request fails
            self.stop_signal = self.stop_signal or signum
            self.on_request(source, worker_step)
            self.unanswered = None
        elif what == wire.RESULT:
            self.on_result(message)
        elif what == wire.SNAPSHOT_RESULT:
            self.on_snapshot(message, run_dir)
        else:
            raise wire.Malformed(f"unknown worker message kind {what}")

    def finished(self):
        """The last step is done (its snapshot may still be on its way)."""
        return self.step >= self.cfg.steps or self.stopped or self.time_up

    def run(self, run_dir):
        """Serve the workers until the last step's snapshot is in; then (or on an error, before it
        propagates) answer every worker's next request with STOP, so no rank is left waiting."""
        self.log, elapsed = resumed_metrics_log(self.world, run_dir, self.step)
        self.started = time.perf_counter() - elapsed
        self.begin_step()
        status = 0
        try:
            with StopSignals() as signals:
                while not self.finished() or self.snapshot is not None:
                    self.serve(run_dir)
                    self.stop_signal = self.stop_signal or signals.signum
            status = exit_status(self.stop_signal) if self.stopped else 0
        finally:
            for key, value in self.counts.items():  # those since the last step's record
                self.totals[key] += value
            self.stop_workers(status)
            self.log.close()
        print("coordinator: " + ", ".join(f"{v} {k}" for k, v in self.totals.items()), flush=True)
        if status:
            print(f"\nstopped by {signal.Signals(self.stop_signal).name} after step {self.step}: checkpoint "
                  f"{run_dir}/checkpoints/latest; continue with: {this_program()} --resume {run_dir}",
                  flush=True)
        self.status = status
        return time.perf_counter() - self.started

    def stop_workers(self, status=0):
        self.link.closing(status)
        if self.unanswered is not None:
            self.reply(self.unanswered, [wire.STOP, status])
            self.link.stopped_worker(self.unanswered)
        while self.link.waiting():
            self.link.lost()
            got = self.link.receive(POLL_S)
            if got is None:
                continue
            message, source = got
            try:
                what = messages.kind_of(message)
            except wire.Malformed:
                what = None
            if what == wire.REQUEST:
                self.reply(source, [wire.STOP, status])
                self.link.stopped_worker(source)
            else:
                self.totals["stale"] += 1  # a straggler's result after the last step
