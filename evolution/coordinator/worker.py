"""A worker of coordinator mode (ranks 1... over MPI, or a bin/es_worker.py process over TCP): asks
the coordinator for work and does what it answers.

It keeps a full replica of the EGG, at its own step. A job names the step and chunk and carries the
chunk's member states; the worker evaluates those members, shapes their fitness (d-eggs options) and
returns the ternary-packed pair fitness, the log-likelihood sum and the updated states. A worker
behind the coordinator's step is sent the packed fitness of each step it missed and applies the
update of each in turn (the same update every replica applies), or, past the kept history (or when a
restarted coordinator is behind it), a snapshot of the parameters to load.
"""

import os
import time

import numpy as np

from eggnog.corpus.samplers import ContiguousStreams
from eggnog.evolution.coordinator import messages, wire
from eggnog.evolution.coordinator.chunk_shaping import ternary_fitness
from eggnog.evolution.eggroll import IntEggroll, snapshot_arrays, snapshot_bytes
from eggnog.evolution.fitness import pack_ternary, unpack_ternary
from eggnog.kernels.core.placement import to_host
from eggnog.runtime.stop_signals import StopSignals, exit_status

# Test hooks. "RANK:STEP:SECONDS" delays this rank's first result of a job at STEP or later, as a
# straggler; JOB_SECONDS pads every job of this process to at least that long (a model of a fixed
# size); a factor F then makes each job take F times as long (a slower GPU).
SLOW_WORKER_VAR = "EGGNOG_TEST_SLOW_WORKER"
JOB_SECONDS_VAR = "EGGNOG_TEST_JOB_SECONDS"
SLOWDOWN_VAR = "EGGNOG_TEST_SLOWDOWN"
WAIT_S = 0.01


def slow_hook(rank):
    """(step, seconds) of the straggler test hook for this rank, or None."""
    value = os.environ.get(SLOW_WORKER_VAR)
    if not value:
        return None
    who, step, seconds = value.split(":")
    return (int(step), float(seconds)) if int(who) == rank else None


class Worker:
    def __init__(self, cfg, link, backend, corpus, model, params, step, val_sample, optimizer_state=None):
        """link: mpi.MpiWorkerLink or tcp_worker_link.TcpWorkerLink."""
        self.cfg, self.link, self.backend, self.corpus, self.model = cfg, link, backend, corpus, model
        self.chunk = cfg.population_chunk
        self.streams = ContiguousStreams(corpus.train, cfg.population // cfg.group_size, cfg.tokens_per_update)
        self.strategy = IntEggroll(model, cfg, backend, params, cfg.seed, step=step, members=self.chunk,
                                   optimizer_state=optimizer_state)
        self.val_rows, self.val_tokens = val_sample
        self.shape = messages.run_shape(cfg, model)  # what the coordinator's answers must look like
        self.slow = slow_hook(link.name)
        self.job_seconds = float(os.environ.get(JOB_SECONDS_VAR) or 0)
        self.slowdown = float(os.environ.get(SLOWDOWN_VAR) or 1)

    def run(self):
        """Serve until the coordinator says STOP; returns the exit status it sends. Over MPI a stop
        signal (SIGINT, SIGTERM) goes to the coordinator with the next request, which stops the run; over
        TCP it stops this worker alone, between jobs (exit status 128 + the signal)."""
        with StopSignals() as signals:
            while True:
                if signals.signum and self.link.elastic:
                    self.link.send(wire.encode([wire.LEAVE]))
                    return exit_status(signals.signum)
                status = self.serve_one(0 if self.link.elastic else signals.signum)
                if status is not None:
                    return status

    def serve_one(self, signum):
        """One request and what its answer says; wire.Malformed for an answer that does not check."""
        reply = self.link.request(wire.encode([wire.REQUEST, self.strategy.step, signum]))
        what = messages.kind_of(reply)
        if what == wire.STOP:
            return messages.parse_stop(reply)
        if what == wire.WAIT:
            messages.parse_wait(reply)
            time.sleep(WAIT_S)
        elif what == wire.CATCHUP:
            step, row = messages.parse_catchup(reply, self.shape)
            self.at_my_step("CATCHUP", step)
            self.strategy.update(unpack_ternary(row, self.cfg.population // 2))
        elif what == wire.JOB:
            step, chunk, states = messages.parse_job(reply, self.shape)
            self.at_my_step("JOB", step)
            self.job(step, chunk, states)
        elif what == wire.SNAPSHOT:
            step, validate = messages.parse_snapshot(reply, self.shape)
            self.at_my_step("SNAPSHOT", step)
            self.snapshot(step, validate)
        elif what == wire.LOAD:
            self.load(*messages.parse_load(reply, self.shape))
        else:
            raise wire.Malformed(f"an answer of unknown kind {what}")
        return None

    def at_my_step(self, what, step):
        if step != self.strategy.step:
            raise wire.Malformed(f"a {what} for step {step}, this worker being at step {self.strategy.step}")

    def warm_up(self):
        """Evaluate one chunk from zero states and drop the scores: the kernels compile here, before
        the worker asks for work, not during its first job (a compiler holding the interpreter would
        silence a TCP worker's heartbeats)."""
        layers, width = self.model.state_dims
        states = self.backend.to_device(np.zeros((layers, self.chunk, width), np.int8))
        self.strategy.first_member = 0
        self.strategy.evaluate(self.streams.member_batch(self.strategy.step, 0, self.chunk, self.cfg.group_size),
                               states)

    def job(self, step, chunk, states_bytes):
        cfg, started = self.cfg, time.perf_counter()
        first = chunk * self.chunk
        states = states_bytes.view(np.int8).reshape(self.chunk, *self.model.state_dims)
        device_states = self.backend.to_device(np.ascontiguousarray(states.transpose(1, 0, 2)))
        self.strategy.first_member = first
        windows = self.streams.member_batch(step, first, self.chunk, cfg.group_size)
        scores = self.strategy.evaluate(windows, device_states)
        packed = pack_ternary(ternary_fitness(scores, cfg.chunk_mean_filter, cfg.adaptive_threshold))
        updated = np.ascontiguousarray(to_host(device_states).transpose(1, 0, 2))
        if self.slow is not None and step >= self.slow[0]:
            time.sleep(self.slow[1])
            self.slow = None
        if self.job_seconds or self.slowdown > 1:
            took = time.perf_counter() - started
            time.sleep(max(took, self.job_seconds) * self.slowdown - took)
        proxy = self.strategy.proxy_sum or 0  # 0 for a model without a proxy loss
        self.link.send(wire.encode([wire.RESULT, step, chunk, int(scores.sum()), proxy, packed.size], packed, updated))

    def snapshot(self, step, validate):
        from eggnog.evolution.es_trainer import val_loglik

        total = 0
        if validate:
            total = val_loglik(self.model, self.cfg, self.backend, self.strategy.params, step, self.corpus,
                               np.arange(self.val_rows), self.val_tokens)
        body = snapshot_bytes(self.cfg, self.model, self.strategy.host_params(), self.strategy.host_optimizer_state())
        self.link.send(wire.encode([wire.SNAPSHOT_RESULT, step, validate, total], np.frombuffer(body, np.uint8)))

    def load(self, step, body):
        params, state = snapshot_arrays(self.cfg, self.model, body)
        self.strategy = IntEggroll(self.model, self.cfg, self.backend, params, self.cfg.seed, step=step,
                                   members=self.chunk, optimizer_state=state)
