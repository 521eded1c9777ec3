"""A worker of coordinator mode (ranks 1...): asks rank 0 for work and does what it answers.

It keeps a full replica of the EGG, at its own step. A job names the step and chunk and carries the
chunk's member states; the worker evaluates those members, shapes their fitness (d-eggs options) and
returns the ternary-packed pair fitness, the log-likelihood sum and the updated states. A worker
behind the coordinator's step is sent the packed fitness of each step it missed and applies the
update of each in turn (the same update every replica applies), or, past the kept history, the path
of a checkpoint to load.
"""

import os
import time

import numpy as np

from eggnog.corpus.samplers import ContiguousStreams
from eggnog.evolution import coordinator_wire as wire
from eggnog.evolution.chunk_shaping import ternary_fitness
from eggnog.evolution.eggroll import IntEggroll, full_state
from eggnog.evolution.fitness import pack_ternary, unpack_ternary
from eggnog.kernels.core.backend import to_host
from eggnog.runtime.checkpoint import load_checkpoint
from eggnog.runtime.stop_signals import StopSignals

# Test hook: "RANK:STEP:SECONDS" delays this rank's first result of a job at STEP or later, as a straggler.
SLOW_WORKER_VAR = "EGGNOG_TEST_SLOW_WORKER"
WAIT_S = 0.01


def slow_hook(rank):
    """(step, seconds) of the straggler test hook for this rank, or None."""
    value = os.environ.get(SLOW_WORKER_VAR)
    if not value:
        return None
    who, step, seconds = value.split(":")
    return (int(step), float(seconds)) if int(who) == rank else None


class Worker:
    def __init__(self, cfg, world, backend, corpus, model, params, step, val_sample, optimizer_state=None):
        self.cfg, self.world, self.backend, self.corpus, self.model = cfg, world, backend, corpus, model
        self.chunk = cfg.population_chunk
        self.streams = ContiguousStreams(corpus.train, cfg.population // cfg.group_size, cfg.tokens_per_update)
        self.strategy = IntEggroll(model, cfg, cfg.seed, backend, params, epoch=step, members=self.chunk,
                                   optimizer_state=optimizer_state)
        self.val_rows, self.val_tokens = val_sample
        self.slow = slow_hook(world.rank)

    def run(self):
        """Serve until the coordinator says STOP; returns the exit status it sends. A stop signal
        (SIGINT, SIGTERM) goes to the coordinator with the next request; the worker goes on until then."""
        comm = self.world.comm
        with StopSignals() as signals:
            while True:
                status = self.serve_one(comm, signals.signum)
                if status is not None:
                    return status

    def serve_one(self, comm, signum):
        wire.send(comm, wire.encode([wire.REQUEST, self.strategy.epoch, signum]), 0, wire.UP)
        reply, _ = wire.receive(comm, 0, wire.DOWN)
        what = wire.kind(reply)
        if what == wire.STOP:
            return wire.header(reply, 2)[1]
        if what == wire.WAIT:
            time.sleep(WAIT_S)
        elif what == wire.CATCHUP:
            _, step = wire.header(reply, 2)
            assert step == self.strategy.epoch, (step, self.strategy.epoch)
            self.strategy.tell(unpack_ternary(wire.payload(reply, 2), self.cfg.population // 2))
        elif what == wire.JOB:
            _, step, chunk = wire.header(reply, 3)
            self.job(comm, step, chunk, wire.payload(reply, 3))
        elif what == wire.SNAPSHOT:
            _, step, validate = wire.header(reply, 3)
            self.snapshot(comm, step, validate)
        elif what == wire.LOAD:
            self.load(bytes(wire.payload(reply, 2)).decode())
        else:
            raise RuntimeError(f"unknown coordinator message kind {what}")
        return None

    def job(self, comm, step, chunk, states_bytes):
        cfg = self.cfg
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
        proxy = self.strategy.proxy_sum or 0  # 0 for a model without a proxy loss
        message = wire.encode([wire.RESULT, step, chunk, int(scores.sum()), proxy, packed.size], packed, updated)
        wire.send(comm, message, 0, wire.UP)

    def snapshot(self, comm, step, validate):
        from eggnog.evolution.es_trainer import val_loglik

        total = 0
        if validate:
            total = val_loglik(self.model, self.cfg, self.backend, self.strategy.params, step, self.corpus,
                               np.arange(self.val_rows), self.val_tokens)
        state = full_state(self.cfg, self.model, self.strategy.host_optimizer_state())
        message = wire.encode([wire.SNAPSHOT_RESULT, step, validate, total], self.strategy.host_params(),
                              *state.values())
        wire.send(comm, message, 0, wire.UP)

    def load(self, path):
        from eggnog.evolution.es_trainer import optimizer_state_of

        arrays, record = load_checkpoint(path)
        self.strategy = IntEggroll(self.model, self.cfg, self.cfg.seed, self.backend, arrays["params"],
                                   epoch=record["step"], members=self.chunk, optimizer_state=optimizer_state_of(arrays))
