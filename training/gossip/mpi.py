"""Gossip tournaments between islands (gruboros over MPI): each rank trains its own model; at each
optimiser-step boundary it may meet one other rank, the fitter of the two sends its model and the
other merges it in (training/gossip/merge.py).

More in docs/internals.md (training/gossip/mpi.py)."""

import math
import time
from dataclasses import dataclass

import numpy as np

from eggnog.training.gossip.merge import Snapshot, merged, needs_state

GOSSIP_STREAM = 0x6055  # keeps the matching's random stream apart from other uses of --seed
TAG_FITNESS, TAG_BUFFER, TAG_SCALARS = 101, 102, 103


@dataclass(frozen=True)
class Pairing:
    initiator: int
    responder: int
    merge: str  # "clonal" or "recombination" ("mixed" is drawn per pairing)

    def peer_of(self, rank):
        return self.responder if rank == self.initiator else self.initiator


def round_pairs(seed, round_number, size, rate, merge, recombination_prob):
    """The pairings of a round: the same list on every rank (a function of its arguments only)."""
    rng = np.random.default_rng([GOSSIP_STREAM, seed, round_number])
    order = rng.permutation(size)
    draws = rng.random((size // 2, 2))
    pairs = []
    for i in range(size // 2):
        if draws[i, 0] < rate:
            kind = merge if merge != "mixed" else ("recombination" if draws[i, 1] < recombination_prob else "clonal")
            pairs.append(Pairing(int(order[2 * i]), int(order[2 * i + 1]), kind))
    return pairs


def pairing_of(pairs, rank):
    return next((p for p in pairs if rank in (p.initiator, p.responder)), None)


def initiator_wins(initiator_fitness, responder_fitness):
    return initiator_fitness >= responder_fitness


def json_number(value):
    """A float for a JSON line (null where not finite: -inf is the fitness before any step)."""
    return value if math.isfinite(value) else None


def merge_into(cfg, mine, theirs, merge, island, fitness, events, base):
    """The loser's side of a tournament, whatever carried the model: merge, load, log mix_merge."""
    before = fitness.fitness
    new, reset = merged(mine, theirs, merge, cfg.gossip_recombination_alpha, cfg.gossip_optimizer_merge)
    island.load(new.params, None if reset else new.arrays, None if reset else new.scalars)
    if merge == "clonal":
        fitness.inherit(theirs.fitness)
    events.write(event="mix_merge", **base, merge=merge,
                 alpha=cfg.gossip_recombination_alpha if merge == "recombination" else 1.0,
                 optimizer=("copy" if merge == "clonal" else cfg.gossip_optimizer_merge),
                 fitness_before=json_number(before), fitness_after=json_number(fitness.fitness))


def wait_quietly(requests, pause=0.002, poll=None):
    """Complete non-blocking requests, sleeping between polls rather than spinning; `poll()` is called
    at each (a stop signal is heard while waiting: training/gossip/stop.py)."""
    from mpi4py import MPI

    while not MPI.Request.Testall(requests):
        if poll is not None:
            poll()
        time.sleep(pause)


class Gossip:
    """The tournaments of one rank. `island` gives parameters(), optimizer_state() and
    load(params, arrays, scalars) (training/mingru/island.py); `fitness` is its FitnessEma; `events` takes
    one record per call of write(**record)."""

    def __init__(self, comm, rank, size, cfg, events, poll=None):
        self.comm, self.rank, self.size, self.cfg, self.events = comm, rank, size, cfg, events
        self.poll = poll  # called while waiting for a partner

    def pairing(self, round_number):
        cfg = self.cfg
        return pairing_of(round_pairs(cfg.seed, round_number, self.size, cfg.gossip_mixing_rate, cfg.gossip_merge,
                                      cfg.gossip_recombination_prob), self.rank)

    def tournament(self, round_number, step, island, fitness):
        """Take part in this round's tournament if paired; returns what happened (None if unpaired)."""
        pairing = self.pairing(round_number)
        if pairing is None:
            return None
        peer, initiator = pairing.peer_of(self.rank), pairing.initiator == self.rank
        base = {"round": round_number, "step": step, "peer": peer}
        self.events.write(event="mix_attempt", **base, initiator=initiator, merge=pairing.merge,
                          fitness=json_number(fitness.fitness))
        peer_fitness = self._swap_fitness(round_number, peer, fitness.fitness)
        by_role = (fitness.fitness, peer_fitness) if initiator else (peer_fitness, fitness.fitness)
        won = initiator_wins(*by_role) == initiator
        self.events.write(event="mix_decision", **base, won=won, fitness=json_number(fitness.fitness),
                          peer_fitness=json_number(peer_fitness), merge=pairing.merge)
        with_state = needs_state(pairing.merge, self.cfg.gossip_optimizer_merge)
        # the optimiser state crosses host memory only when the merge uses it
        mine = Snapshot(island.parameters(), *(island.optimizer_state() if with_state else ({}, {})), fitness.fitness)
        if won:
            seconds, size = self._send(mine, peer, with_state)
            self.events.write(event="mix_send", **base, bytes=size, seconds=round(seconds, 6))
            return {"won": True, "merge": pairing.merge, "peer": peer}
        theirs, seconds, size = self._receive(mine, peer, with_state)
        self.events.write(event="mix_receive", **base, bytes=size, seconds=round(seconds, 6))
        merge_into(self.cfg, mine, theirs, pairing.merge, island, fitness, self.events, base)
        return {"won": False, "merge": pairing.merge, "peer": peer}

    # ---- messages -----------------------------------------------------------------------------
    def _swap_fitness(self, round_number, peer, own):
        send = np.array([round_number, own], dtype=np.float64)
        got = np.empty(2, dtype=np.float64)
        wait_quietly([self.comm.Isend(send, dest=peer, tag=TAG_FITNESS),
                      self.comm.Irecv(got, source=peer, tag=TAG_FITNESS)], poll=self.poll)
        if int(got[0]) != round_number:  # a protocol bug, never a user's mistake
            raise RuntimeError(f"rank {self.rank} in round {round_number} heard rank {peer} in round {int(got[0])}")
        return float(got[1])

    def _send(self, snapshot, peer, with_state):
        started = time.perf_counter()
        buffer, scalars = snapshot.pack(with_state)
        self.comm.Send(scalars, dest=peer, tag=TAG_SCALARS)
        self.comm.Send(buffer, dest=peer, tag=TAG_BUFFER)
        return time.perf_counter() - started, buffer.nbytes + scalars.nbytes

    def _receive(self, own, peer, with_state):
        started = time.perf_counter()
        count, scalar_count = own.wire_sizes(with_state)
        buffer, scalars = np.empty(count, np.float32), np.empty(scalar_count, np.float64)
        self.comm.Recv(scalars, source=peer, tag=TAG_SCALARS)
        self.comm.Recv(buffer, source=peer, tag=TAG_BUFFER)
        return own.unpack(buffer, scalars, with_state), time.perf_counter() - started, buffer.nbytes + scalars.nbytes
