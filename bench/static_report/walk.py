"""Dynamic instruction counts and latency of a block's warps, from a kernel's SASS and a launch's values.

The walk follows the code in address order with the values of every lane of the block (machine.py): a
branch whose predicate is known sends each lane its way (a warp whose lanes disagree runs both paths,
one after the other: SIMT); an unknown one sends the whole flow both ways with probability 1/2 each. A
loop is walked once per visit and counted times each warp's trip count, which comes from running only
the instructions its back edge's predicate depends on (its slice) from the values at loop entry until no
lane goes round again. A second iteration is walked too where the first took a known branch on values
that change with the iterations, and for every innermost loop (so that its latency includes the
dependences its iterations carry). Along the way each warp's in-order scoreboard gives its own time:
an instruction issues when its sources are ready and its pipe is free (timing.py); flows.py adds it up.

What it cannot see: memory it was not given (branches on it are taken half the time; loops on it
counted once and listed as unknown), and where a global access hits (L1, L2, HBM).
"""

from collections import defaultdict

import numpy as np

from bench.static_report import machine
from bench.static_report.flows import Flow, Tally, merge
from bench.static_report.parse import MMA, find_loops
from bench.static_report.timing import GLOBAL, ON_CHIP

BRANCH_TAKEN = 0.5  # probability of a branch whose predicate the walk cannot evaluate
TRIP_CAP = 1 << 20
_CONTROL = {"BRA", "BRX", "EXIT", "RET", "CALL", "JMP", "JMX"}
SM_OPS = GLOBAL | ON_CHIP | MMA  # instructions that use the SM-wide pipes


class Kernel:
    """A kernel's instructions (the listing's first function), loops and per-instruction timing facts."""

    def __init__(self, instructions, timing):
        self.code = [i for i in instructions if i.base != "NOP"]
        self.index = {ins.address: k for k, ins in enumerate(self.code)}
        self.loops = find_loops(self.code)
        self.loop_at = {lp.start: lp for lp in self.loops}
        self.timing = timing
        for ins in self.code:
            machine.parsed(ins)
            ins._latency, ins._pipe, ins._cost = timing.classify(ins)
            ins._category = timing.category(ins)
            ins._sm = ins.base in SM_OPS
            ins._extra = timing.barrier_cycles if ins.base == "BAR" else 0

    def written(self, loop):
        if not hasattr(loop, "_written"):
            loop._written = {n for ins in self.body(loop) for n in ins._dst}
        return loop._written

    def body(self, loop):
        return self.code[self.index[loop.start]:self.index[loop.end] + 1]


class Walker:
    def __init__(self, kernel, warps):
        self.k, self.start = kernel, warps
        self.n_warps = warps.n // 32
        self.dependent = set()  # loops whose iterations took different known paths

    def run(self):
        tally = Tally(self.n_warps)
        code = self.k.code
        self.walk(code[0].address, code[-1].address, Flow(self.start, 1.0, np.zeros(self.n_warps)), tally, None)
        return tally

    # ---- one instruction ----
    def issue(self, ins, flow, tally):
        act = flow.active()
        every = bool(act.all())
        ready, start = flow.ready, flow.clock.copy()
        for name in ins._src:
            t = ready.get(name)
            if t is not None:
                np.maximum(start, t, out=start)
        pipes = []
        if ins._pipe:
            free = flow.free.get(ins._pipe)
            if free is not None:
                np.maximum(start, free, out=start)
            flow.free[ins._pipe] = start + ins._cost if every or free is None else np.where(act, start + ins._cost,
                                                                                             free)
            pipes.append((ins._pipe, ins._cost))
        done = start + ins._latency
        for name in ins._dst:
            old = ready.get(name)
            ready[name] = done if every or old is None else np.where(act, done, old)
        end = start + 1 + ins._extra
        if ins._sm:
            pipes += self.k.timing.sm_costs(ins, flow.warps.mask.reshape(-1, 32).sum(axis=1))
        weight = flow.freq * act
        tally.count(weight, weight * (end - flow.clock), pipes)
        flow.clock = end if every else np.where(act, end, flow.clock)
        tally.classes[ins._category] += weight.sum()
        if ins._extra:
            tally.close()

    # ---- a region: straight code, branches and the loops directly inside it ----
    def walk(self, start, end, flow, tally, loop):
        """Walk addresses start..end from `flow`; returns (flow falling out of `end`, flows that went back
        to `loop`'s start, [(target, flow)] leaving the region)."""
        code, index = self.k.code, self.k.index
        pending, back, exits = defaultdict(list), [], []
        current, i, last = flow, index[start], index[end]
        while i <= last:
            ins = code[i]
            if ins.address in pending:
                current = merge([current, *pending.pop(ins.address)])
            if current is None:
                i += 1
                continue
            inner = self.k.loop_at.get(ins.address)
            if inner is not None and inner is not loop and inner.end <= end:
                current, leaving = self.run_loop(inner, current, tally)
                for target, f in leaving:
                    self._route(target, f, start, end, pending, exits)
                i = index[inner.end] + 1
                continue
            self.issue(ins, current, tally)
            if ins.base not in _CONTROL:
                machine.execute(ins, current.warps)
                current.propagate(ins)
            else:
                current = self.control(ins, current, tally, loop, start, end, pending, back, exits)
            i += 1
        return current, back, exits

    def _route(self, target, f, start, end, pending, exits):
        if start < target <= end:
            pending[target].append(f)
        else:
            exits.append((target, f))

    def control(self, ins, flow, tally, loop, start, end, pending, back, exits):
        w = flow.warps
        if ins.base == "EXIT":  # `@P2 EXIT P3` exits where both hold (a predicate operand gates it as a BRA's)
            guard = np.ones(w.n, bool)
            for op in ([ins._guard] if ins._guard is not None else []) + [o for o in ins._ops if o.kind == "P"]:
                p = w.pred(op)
                guard = None if p is None or guard is None else guard & p
            if guard is not None:
                w.mask = w.mask & ~guard
            return flow if w.mask.any() else None
        if ins.base == "RET":
            exits.append((None, flow))
            return None
        if ins.base == "CALL":  # a subroutine (64-bit division): walked from its address to its RET
            target = int(ins.operands[-1], 16) if ins.operands and ins.operands[-1].startswith("0x") else None
            ret = next((c.address for c in self.k.code[self.k.index[target]:] if c.base == "RET"), None) if (
                target in self.k.index and "ABS" not in ins.modifiers) else None
            if ret is None:  # another function of the listing (cudadevrt's division helpers): not walked
                tally.unknown_branches += flow.freq
                return flow
            returned = [f for t, f in self.walk(target, ret, flow, tally, None)[2] if t is None]
            return merge(returned) if returned else None
        target = ins.branch_target()
        if ins.base != "BRA" or target is None:
            tally.unknown_branches += flow.freq
            return None
        if target == ins.address:
            return None
        if "DIV" in ins.modifiers:  # taken by warps whose active lanes are not all their lanes
            lanes = w.mask.reshape(-1, 32)
            taken = np.repeat(lanes.any(axis=1) & ~lanes.all(axis=1), 32) & w.mask
        else:
            taken = w.mask
            for op in ([ins._guard] if ins._guard is not None else []) + [o for o in ins._ops if o.kind == "P"]:
                p = w.pred(op)
                taken = None if p is None or taken is None else taken & p
            if taken is None:
                tally.unknown_branches += flow.freq
                other = flow.split(flow.freq * BRANCH_TAKEN)
                flow.freq *= 1 - BRANCH_TAKEN
                self._send(target, other, loop, start, end, pending, back, exits)
                return flow
            for name in ins._src:  # a known decision on values that change with a loop's iterations
                self.dependent.update(flow.taint.get(name, ()))
        if not taken.any():
            return flow
        stay = w.mask & ~taken
        if not stay.any():
            self._send(target, flow, loop, start, end, pending, back, exits)
            return None
        other = flow.split()
        other.warps.mask, w.mask = taken, stay
        self._send(target, other, loop, start, end, pending, back, exits)
        return flow

    def _send(self, target, flow, loop, start, end, pending, back, exits):
        if loop is not None and target == loop.start:
            back.append(flow)
        else:
            self._route(target, flow, start, end, pending, exits)

    # ---- loops ----
    def run_loop(self, loop, entry, tally):
        lane_trips, inputs = self.trip_count(loop, entry.warps)
        for name in inputs:
            self.dependent.update(entry.taint.get(name, ()))
        if lane_trips is None:
            tally.unknown_loops[loop.start] = len(self.k.body(loop))
            trips = np.ones(self.n_warps)
        else:
            trips = lane_trips.reshape(-1, 32).max(axis=1).astype(float)
        first, start = Tally(self.n_warps), entry.split()
        for name in self.k.written(loop):
            start.taint[name] = start.taint.get(name, frozenset()) | {loop.start}
        self.dependent.discard(loop.start)
        out, back, leaving = self.walk(loop.start, loop.end, start, first, loop)
        first.finish()
        total = Tally(self.n_warps)
        total.add(first)
        again, again2 = (merge(back) if back else None), None
        more = np.maximum(trips - 1, 0)
        if more.any() and (loop.innermost or loop.start in self.dependent) and again is not None:
            second = Tally(self.n_warps)
            again.freq = entry.freq
            _, back2, _ = self.walk(loop.start, loop.end, again.split(), second, loop)
            again2 = merge(back2) if back2 else None
            second.finish()
            total.add(second, more)
        elif more.any():
            total.add(first, more)
        tally.add(total)
        after = self.exit_state(loop, entry, out, again, again2, trips.max(), lane_trips)
        after.clock = entry.clock + total.cycles / entry.freq
        for name in self.k.written(loop):
            after.ready[name] = after.clock
        return after, leaving

    def exit_state(self, loop, entry, out, again, again2, trips, lane_trips):
        """Values after the loop: exact after one trip; otherwise what the iterations leave unchanged (after
        the first one, where a second was walked), and registers that step by the same amount in the first
        two iterations, extrapolated."""
        written = self.k.written(loop)
        if trips == 1 and out is not None or again is None:
            after = (out or entry).split(entry.freq)
            after.warps.mask = entry.warps.mask.copy()
            if trips != 1:
                for name in written:
                    after.warps.forget(name)
                self.forget_spills(loop, after.warps)
            return after
        after = again.split(entry.freq)
        after.warps.mask = entry.warps.mask.copy()
        self.forget_spills(loop, after.warps)
        w0, w1, w2 = entry.warps, again.warps, again2.warps if again2 is not None else None
        for name in written:
            store = "r" if name.startswith(("R", "UR")) else "p"
            v0, v1 = getattr(w0, store).get(name), getattr(w1, store).get(name)
            v2 = getattr(w2, store).get(name) if w2 is not None else None
            if any(name in w.known for w in (w0, w1)) or v1 is None:
                after.warps.forget(name)
            elif v2 is not None and name not in w2.known and np.array_equal(v1, v2):  # settled after one trip
                getattr(after.warps, store)[name] = v1
            elif w2 is None and v0 is not None and np.array_equal(v0, v1):
                getattr(after.warps, store)[name] = v0
            elif store == "r" and v0 is not None and v2 is not None and lane_trips is not None and \
                    name not in w2.known:
                step = machine.signed((v1 - v0) & machine.M32)
                final = v0.astype(np.int64) + lane_trips * step
                if np.array_equal(step, machine.signed((v2 - v1) & machine.M32)) and final.min() >= 0 and \
                        final.max() < 1 << 32:
                    after.warps.r[name] = final.astype(np.uint64)
                else:
                    after.warps.forget(name)
            else:
                after.warps.forget(name)
        return after

    def forget_spills(self, loop, warps):
        """Local memory the loop's spill stores write is unknown after it (the walk saw one or two of its
        iterations); all of it where a store's address is unknown."""
        for ins in self.k.body(loop):
            if ins.base != "STL":
                continue
            addresses = warps.address(machine.parsed(ins)[0], np.ones(warps.n, bool))
            if addresses is None:
                warps.local.clear()
                return
            for lane, a in enumerate(addresses):
                for k in range(machine.access_bytes(ins)):
                    warps.local.pop((lane << machine.LANE_SHIFT) | (int(a) + k), None)

    def trip_count(self, loop, warps):
        """(each lane's trips, the registers the count reads at entry), from the back edge's slice;
        trips None if they depend on something unknown."""
        program, carried = self.slice(loop)
        if program is None:
            return None, ()
        guard = self.k.code[self.k.index[loop.end]]._guard
        w = warps.copy()
        w.local = dict(w.local)  # the slice's spill stores run ahead of the walk: kept off its state
        active = w.mask.copy()
        lane_trips = active.astype(np.int64)
        for _ in range(TRIP_CAP):
            for ins in program:
                machine.execute(ins, w)
            again = w.pred(guard)
            if again is None:
                return None, carried
            active = active & again
            if not active.any():
                return lane_trips, carried
            lane_trips += active
            w.mask = active
        return None, carried

    def invariant(self, ins, loop):
        """An instruction that recomputes a value from what the loop never writes (the compiler's
        rematerialisation of a bound inside an inner loop): it gives the same value wherever it runs."""
        return ins._guard is None and not set(ins._src) & self.k.written(loop)

    def slice(self, loop):
        """The loop's instructions its back edge's predicate depends on, and the names it reads from
        before the loop; (None, ()) when an inner loop (but for a loop-invariant recomputation in it) or an
        unconditional back edge is involved."""
        if hasattr(loop, "_slice"):
            return loop._slice
        loop._slice = None, ()
        branch = self.k.code[self.k.index[loop.end]]
        if branch.base != "BRA" or branch._guard is None:
            return loop._slice
        body = self.k.body(loop)
        inner = [lp for lp in self.k.loops if lp is not loop and loop.start <= lp.start and lp.end <= loop.end]
        chosen, carried, slots = set(), set(), set()
        for _ in range(4):  # backward liveness from the branch, round the back edge until nothing new
            live = {branch._guard.name} | carried
            reloaded = set(slots)
            for ins in reversed(body):
                # a reload (LDL) in the slice brings in the loop's spill stores to its slot
                stored = ins.base == "STL" and bool(_slot(ins) & slots)
                if ins.base in _CONTROL or not (stored or live.intersection(ins._dst)):
                    continue
                if any(lp.start <= ins.address <= lp.end for lp in inner) and not self.invariant(ins, loop):
                    return loop._slice
                chosen.add(id(ins))
                if ins.base == "LDL":
                    slots |= _slot(ins)
                if ins._guard is None:
                    live.difference_update(ins._dst)
                live.update(ins._src)
            if live <= carried and slots == reloaded:
                break
            carried |= live
        loop._slice = [ins for ins in body if id(ins) in chosen], carried
        return loop._slice


def _slot(ins):
    """The local-memory bytes a spill (STL) or reload (LDL) touches, as (base registers, byte) pairs."""
    ops = machine.parsed(ins)
    address = ops[0] if ins.base == "STL" else ops[1]
    return {(tuple(address.name), address.value + k) for k in range(machine.access_bytes(ins))}
