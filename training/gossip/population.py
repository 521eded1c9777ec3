"""The population view of a gossip run. Every --population-every rounds each rank posts its record
(one float64 vector) in a non-blocking allgather and completes it at the next summary, so between
summaries no rank waits for the population (every rank walks the same rounds, so the collectives
line up). The table gives each rank its percentile (0 best, 1 worst), which sets how often it saves
(fitness-weighted checkpointing, as gruboros) and whether it may be rejuvenated; rank 0 writes
each table as one line of the run's metrics.jsonl.
"""

import math

import numpy as np

from eggnog.training.gossip.mpi import wait_quietly

FIELDS = ("step", "fitness", "train_bpb", "val_bpb", "mixes", "wins", "losses", "clonal", "recombination",
          "saves", "rejuvenations")
COUNTERS = FIELDS[4:]


def percentiles(fitness):
    """Each rank's place, 0 for the fittest and 1 for the least fit (ties to the lower rank); 0.5
    for a population of one."""
    fitness = np.asarray(fitness, dtype=np.float64)
    fitness = np.where(np.isnan(fitness), -np.inf, fitness)  # an island not heard from ranks last
    n = fitness.size
    if n == 1:
        return np.array([0.5])
    order = sorted(range(n), key=lambda r: (-fitness[r], r))
    places = np.empty(n)
    places[order] = np.arange(n) / (n - 1)
    return places


def save_probability(every, multiplier, percentile):
    """Per step: 1/every for the least fit rank, `multiplier` times that for the fittest."""
    return min(1.0, (1 + (multiplier - 1) * (1 - percentile)) / every)


def finite_or_none(value):
    value = float(value)
    return value if math.isfinite(value) else None


def summary_record(table, round_number, elapsed):
    """The metrics.jsonl line of a population table (ranks x FIELDS; a row of NaN: an island not
    heard from, over TCP)."""
    column = {name: table[:, i] for i, name in enumerate(FIELDS)}
    fitness = column["fitness"]
    finite = fitness[np.isfinite(fitness)]
    record = {"round": round_number, "elapsed_s": round(elapsed, 3),
              "steps": [None if np.isnan(s) else int(s) for s in column["step"]],
              "fitness": [finite_or_none(round(f, 5)) for f in fitness],
              "best_fitness": finite_or_none(finite.max()) if finite.size else None,
              "mean_fitness": finite_or_none(finite.mean()) if finite.size else None,
              "best_rank": int(np.argmax(np.where(np.isnan(fitness), -np.inf, fitness))),
              "train_bpb": [finite_or_none(round(v, 5)) for v in column["train_bpb"]],
              "val_bpb": [finite_or_none(round(v, 5)) for v in column["val_bpb"]]}
    # each pairing is counted by both of its ranks
    record["tournaments"] = int(np.nansum(column["mixes"])) // 2
    record.update({name: int(np.nansum(column[name]))
                   for name in ("clonal", "recombination", "saves", "rejuvenations")})
    return record


class Population:
    """Posted records and completed tables; a tag (e.g. the round) travels with each gather."""

    def __init__(self, comm, size, poll=None):
        self.comm, self.size = comm, size  # comm None: a world of one
        self.poll = poll  # called while waiting for the other ranks
        self.pending = None  # (tag, request, send buffer, receive buffer) of a posted gather
        self.table = None  # the last completed table

    def post(self, record, tag):
        """Complete the previous gather (returning (its tag, its table), or None) and post this record."""
        done = self.complete()
        send = np.ascontiguousarray(record, dtype=np.float64)
        recv = np.empty((self.size, send.size), dtype=np.float64)
        if self.comm is None:
            recv[0] = send
            self.pending = (tag, None, send, recv)
        else:
            self.pending = (tag, self.comm.Iallgather(send, recv), send, recv)
        return done

    def complete(self):
        if self.pending is None:
            return None
        tag, request, _, recv = self.pending
        if request is not None:
            wait_quietly([request], poll=self.poll)
        self.pending, self.table = None, recv
        return tag, recv

    def gather(self, record, tag):
        """(tag, every rank's record now); complete() a posted gather first."""
        if self.pending is not None:
            raise RuntimeError("a posted gather is still pending")
        self.post(record, tag)
        return self.complete()

    def percentile(self, rank):
        """This rank's place in the last completed table (0.5 before any)."""
        return 0.5 if self.table is None else float(percentiles(self.table[:, FIELDS.index("fitness")])[rank])
