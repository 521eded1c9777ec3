"""What a tournament's loser does with the winner's model, on host arrays (training/gossip/mpi.py moves
them between ranks).

A model travels as one `Snapshot`: the trainer's flat parameter vector (where gradients are taken:
y for Schedule-Free AdamW), the optimiser's state arrays by name (z and v for Schedule-Free AdamW,
m and v for AdamW, the momentum buffer for SGD), the optimiser's scalars (step count and the like)
and the fitness. On the wire it is one contiguous float32 buffer (parameters, then the state arrays
in name order) and one float64 vector (fitness, then the scalars in name order).

- clonal: the loser becomes the winner: parameters, optimiser state and fitness copied.
- recombination: p <- (1 - a) p + a p_winner. Optimiser `interpolate` blends every state array and
  scalar the same way (z included: leaving it out, as gruboros did, moves Schedule-Free's averaged
  point x by about dy/beta1); integer scalars are rounded. `reset` starts a fresh optimiser at the
  blended parameters. The loser keeps its own fitness (it is re-earned by training).
"""

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Snapshot:
    params: np.ndarray
    arrays: dict = field(default_factory=dict)
    scalars: dict = field(default_factory=dict)
    fitness: float = -np.inf

    def pack(self, with_state=True):
        """(float32 buffer, float64 scalars) to send: the parameters, with the state when asked."""
        parts = [self.params] + ([self.arrays[k].reshape(-1) for k in sorted(self.arrays)] if with_state else [])
        scalars = [self.fitness] + ([float(self.scalars[k]) for k in sorted(self.scalars)] if with_state else [])
        return (np.ascontiguousarray(np.concatenate(parts), dtype=np.float32),
                np.array(scalars, dtype=np.float64))

    def wire_sizes(self, with_state=True):
        """(float32 count, float64 count) of `pack` for a snapshot shaped like this one."""
        n = self.params.size + (sum(a.size for a in self.arrays.values()) if with_state else 0)
        return n, 1 + (len(self.scalars) if with_state else 0)

    def unpack(self, buffer, scalars, with_state=True):
        """A snapshot shaped like this one (the receiver's own) holding the values received."""
        n = self.params.size
        params, arrays, offset = buffer[:n].copy(), {}, n
        values = {}
        if with_state:
            for name in sorted(self.arrays):
                size = self.arrays[name].size
                arrays[name] = buffer[offset:offset + size].reshape(self.arrays[name].shape).copy()
                offset += size
            values = {k: _like(self.scalars[k], v) for k, v in zip(sorted(self.scalars), scalars[1:])}
        return Snapshot(params, arrays, values, float(scalars[0]))


def _like(own, value):
    """A received scalar with the type of the receiver's own (step counts stay integers)."""
    return int(round(value)) if isinstance(own, (int, np.integer)) else float(value)


def blend(mine, theirs, alpha):
    """(1 - alpha) mine + alpha theirs in float32 (alpha 0: mine, 1: theirs, exactly)."""
    a = np.float32(alpha)
    return ((np.float32(1) - a) * mine + a * theirs).astype(np.float32)


def blend_scalar(mine, theirs, alpha):
    value = (1 - alpha) * float(mine) + alpha * float(theirs)
    return _like(mine, value)


def needs_state(merge, optimizer_merge):
    """Whether the winner must send its optimiser state: clonal copies it, interpolate blends it."""
    return merge == "clonal" or optimizer_merge == "interpolate"


def merged(loser: Snapshot, winner: Snapshot, merge, alpha, optimizer_merge):
    """(the loser's new snapshot, whether its optimiser restarts). A reset snapshot has no state."""
    if merge == "clonal":
        return Snapshot(winner.params.copy(), {k: v.copy() for k, v in winner.arrays.items()},
                        dict(winner.scalars), winner.fitness), False
    if merge != "recombination":
        raise ValueError(f"unknown merge {merge!r}")
    params = blend(loser.params, winner.params, alpha)
    if optimizer_merge == "reset":
        return Snapshot(params, {}, {}, loser.fitness), True
    arrays = {k: blend(loser.arrays[k], winner.arrays[k], alpha) for k in loser.arrays}
    scalars = {k: blend_scalar(loser.scalars[k], winner.scalars[k], alpha) for k in loser.scalars}
    return Snapshot(params, arrays, scalars, loser.fitness), False
