"""What the walk (walk.py) carries and adds up: a Flow is one path through the code (the lanes' values,
its frequency, each warp's clock and scoreboard, which loops its registers change with); a Tally sums
what a block's warps issue, per warp, and the block's lockstep time over segments between barriers."""

from collections import defaultdict

import numpy as np

from bench.static_report.limits import SCHEDULERS_PER_SM

SM_PIPES = ("memory", "l2", "tensor")


def per_scheduler(x):
    """Sums of a per-warp array over the warps of each scheduler (warp w on scheduler w % 4)."""
    return np.bincount(np.arange(len(x)) % SCHEDULERS_PER_SM, weights=x, minlength=SCHEDULERS_PER_SM)


class Tally:
    """Per-warp frequency-weighted sums (arrays over the block's warps), and the block's lockstep time
    of the segments closed so far: between barriers a block's warps move in step, so a segment costs the
    longest of one warp's latency-bound cycles, a scheduler's issue slots or busiest pipe over its warps,
    and the SM's memory, L2 and tensor pipes."""

    def __init__(self, warps):
        self.warps = warps
        self.issued, self.cycles, self.pipes = np.zeros(warps), np.zeros(warps), defaultdict(lambda: np.zeros(warps))
        self.open_issued, self.open_cycles = np.zeros(warps), np.zeros(warps)
        self.open_pipes = defaultdict(lambda: np.zeros(warps))
        self.closed, self.barriers = 0.0, False
        self.classes = defaultdict(float)
        self.unknown_loops, self.unknown_branches = {}, 0.0

    def count(self, weight, cycles, pipes):
        self.issued += weight
        self.open_issued += weight
        self.cycles += cycles
        self.open_cycles += cycles
        for name, cost in pipes:
            self.pipes[name] += weight * cost
            self.open_pipes[name] += weight * cost

    def close(self):
        """End a segment at a barrier."""
        terms = [self.open_cycles.max(), per_scheduler(self.open_issued).max()]
        for name, v in self.open_pipes.items():
            terms.append(v.sum() if name in SM_PIPES else per_scheduler(v).max())
        self.closed += max(terms)
        self.open_issued, self.open_cycles = np.zeros(self.warps), np.zeros(self.warps)
        self.open_pipes = defaultdict(lambda: np.zeros(self.warps))
        self.barriers = True

    def finish(self):
        """A loop body's end: one with barriers closes its last stretch (it meets the next iteration's
        first at a barrier too)."""
        if self.barriers and (self.open_cycles.any() or self.open_issued.any()):
            self.close()

    def block_cycles(self):
        """The block's lockstep time, alone on an SM."""
        other = Tally(self.warps)
        other.add(self)
        other.close()
        return other.closed

    def add(self, other, scale=1.0):
        """Add `other` times `scale` (a number, or per-warp trip counts)."""
        self.issued += scale * other.issued
        self.cycles += scale * other.cycles
        self.open_issued += scale * other.open_issued
        self.open_cycles += scale * other.open_cycles
        for mine, theirs in ((self.pipes, other.pipes), (self.open_pipes, other.open_pipes)):
            for key, value in theirs.items():
                mine[key] += scale * value
        most = float(np.max(scale))
        self.closed += most * other.closed
        self.barriers |= other.barriers
        for key, value in other.classes.items():
            self.classes[key] += most * value
        self.unknown_loops.update(other.unknown_loops)
        self.unknown_branches += most * other.unknown_branches


class Flow:
    """One path through the code: the lanes' values, how often it runs, each warp's clock and
    scoreboard, and for each register the loops (by start address) its value changes with (taint)."""

    def __init__(self, warps, freq, clock, ready=None, free=None, taint=None):
        self.warps, self.freq, self.clock = warps, freq, clock
        self.ready, self.free = ready if ready is not None else {}, free if free is not None else {}
        self.taint = taint if taint is not None else {}

    def split(self, freq=None):
        return Flow(self.warps.copy(), self.freq if freq is None else freq, self.clock, dict(self.ready),
                    dict(self.free), dict(self.taint))

    def active(self):
        """Warps with an active lane."""
        return self.warps.mask.reshape(-1, 32).any(axis=1)

    def propagate(self, ins):
        found = [self.taint[n] for n in ins._src if n in self.taint]
        loops = frozenset().union(*found) if found else None
        for name in ins._dst:
            if loops:
                self.taint[name] = loops
            else:
                self.taint.pop(name, None)


def merge(flows):
    """Join flows arriving at one address: lanes take their own path's values; flows over the same
    lanes (a probabilistic split) add their frequencies and keep only values they agree on."""
    flows = [f for f in flows if f is not None]
    if len(flows) == 1:
        return flows[0]
    groups = defaultdict(float)
    for f in flows:
        groups[f.warps.mask.tobytes()] += f.freq
    base = flows[0]
    out = base.split(max(groups.values()))
    w = out.warps
    w.mask = np.logical_or.reduce([f.warps.mask for f in flows])
    out.clock = np.maximum.reduce([f.clock for f in flows])
    partial = set().union(*(f.warps.known.keys() for f in flows))
    for attr in ("r", "p"):
        target = getattr(w, attr)
        for name in set().union(*(getattr(f.warps, attr).keys() for f in flows)):
            values = [getattr(f.warps, attr).get(name) for f in flows]
            if all(v is values[0] for v in values[1:]):
                knowns = [f.warps.known.get(name) for f in flows]
                if name in partial and not all(k is knowns[0] for k in knowns):
                    w.forget(name)
                continue
            target[name] = None if name in partial else _join([f.warps.mask for f in flows], values)
            w.known.pop(name, None)
    for f in flows[1:]:
        for mine, theirs in ((out.ready, f.ready), (out.free, f.free)):
            for name, t in theirs.items():
                mine[name] = t if name not in mine else np.maximum(mine[name], t)
        for name, loops in f.taint.items():
            out.taint[name] = out.taint.get(name, frozenset()) | loops
    return out


def _join(masks, values):
    if any(v is None for v in values):
        return None
    if all(np.array_equal(values[0], v) for v in values[1:]):
        return values[0]
    result, owner = values[0], np.full(len(masks[0]), -1)
    for k, (mask, value) in enumerate(zip(masks, values)):
        if (mask & (owner >= 0) & (result != value)).any():
            return None
        result, owner = np.where(mask, value, result), np.where(mask, k, owner)
    return result
