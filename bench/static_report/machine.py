"""The integer (and a little float) meaning of SASS instructions, enough to follow a kernel's control
flow: loop counters, bounds read from parameters or from small tables whose contents a workload gives,
thread and block indices. State covers every lane of a block's warps at once (warp w is lanes 32w to
32w + 31); a register holds each lane's 32-bit pattern, or None where no lane is known, with `known`
marking registers known in some lanes only. Unknown values (a load from memory the model was not given,
a result it does not compute) make branches and trip counts unknown, never wrong (walk.py decides what
then). ALU semantics: operands.py."""

import numpy as np

from bench.static_report import operands as ops_
from bench.static_report.operands import M32, SHIFT32, WIDTH, Operand, bits, f32, pair_name, sign_extend, signed

LANE_SHIFT = 48  # a lane's local bytes lie above any 32-bit local address
NO_DEST = {"STG", "STS", "ST", "STL", "BRA", "BRX", "EXIT", "RET", "CALL", "BAR", "BSSY", "BSYNC", "BREAK", "NOP",
           "WARPSYNC", "MEMBAR", "DEPBAR", "YIELD", "ERRBAR", "CCTL", "FENCE", "BPT", "RED", "NANOSLEEP", "KILL"}


def parsed(ins):
    """The instruction's operands, guard predicate, and the registers and predicates it writes (_dst)
    and reads (_src), found once."""
    if not hasattr(ins, "_ops"):
        ins._ops = [Operand(o) for o in ins.operands]
        ins._guard = Operand(ins.predicate[1:]) if ins.predicate else None
        ins._dst, ins._src = _registers(ins)
    return ins._ops


def _registers(ins):
    n = max([{"64": 2, "128": 4}.get(m, 1) for m in ins.modifiers] or [1])
    if ins.base in ("IMMA", "HMMA", "HGMMA", "IGMMA"):
        n = 4
    elif "WIDE" in ins.modifiers:
        n = 2
    dst, src = [], []
    stores = ins.base in NO_DEST
    shuffle = ins.base == "SHFL"  # SHFL P, R, ...: the predicate and the register are both results
    for k, op in enumerate(ins._ops):
        names = []
        if op.kind == "R":
            names = [pair_name(op.name, j) for j in range(n)]
        elif op.kind == "P":
            names = [op.name]
        elif op.kind == "A":
            names = [x for name in op.name for x in ((name, pair_name(name, 1)) if ".64" in op.text else (name,))]
        elif op.kind == "C" and op.name:
            names = [op.name]
        is_dest = not stores and op.kind in ("R", "P") and (k == 0 or (k == 1 and (op.kind == "P" or shuffle)))
        (dst if is_dest else src).extend(n for n in names if n not in ("RZ", "URZ", "PT", "UPT"))
    if ins._guard is not None and ins._guard.name not in ("PT", "UPT"):
        src.append(ins._guard.name)
    return dst, src


class Warps:
    """Registers, predicates and the active mask of a block's lanes; `special` holds the thread and
    block indices per lane, `const` the constant bank (parameters at 0x210), `memory` the global buffers
    of known contents as (start address, bytes), `shared` the bytes of shared memory stored so far."""

    def __init__(self, const, special, memory, lanes):
        self.n = lanes
        self.r, self.p, self.known = {}, {}, {}
        self.const, self.special, self.memory = const, special, list(memory)
        self.cache = {}  # constant-bank words and immediates as lane arrays, shared by copies
        self.shared = {}
        self.local = {}  # spilled registers: bytes keyed by lane << 48 | address (local memory is per thread)
        self.mask = np.ones(lanes, bool)
        self.cur = None  # lanes in which the current instruction's sources are all known (None: all)

    def copy(self):
        other = Warps.__new__(Warps)
        other.__dict__.update(self.__dict__)
        other.r, other.p, other.known, other.cur = dict(self.r), dict(self.p), dict(self.known), None
        return other

    def lanes(self, value):
        found = self.cache.get(("v", value))
        if found is None:
            found = self.cache[("v", value)] = np.full(self.n, value, np.uint64)
        return found

    def known_in(self, name, where):
        part = self.known.get(name)
        return part is None or bool((part | ~where).all())

    # ---- reading operands ----
    def reg(self, name):
        return self.lanes(0) if name in ("RZ", "URZ") else self.r.get(name)

    def pred(self, op):
        """A predicate operand's lanes; None unless known in every active lane."""
        if op.name in ("PT", "UPT"):
            value = np.ones(self.n, bool)
        else:
            value = self.p.get(op.name)
            if value is not None and not self.known_in(op.name, self.mask):
                return None
        return None if value is None else (~value if op.not_ else value)

    def value(self, op):
        """The operand's 32-bit lanes (|x| and ~x applied; negation is the instruction's business)."""
        if op.kind == "R":
            x = self.reg(op.name)
        elif op.kind == "I":
            x = self.lanes(op.value & 0xFFFFFFFF)
        elif op.kind == "F":
            x = self.lanes(int(bits(np.float32(op.value))))
        elif op.kind == "C":
            x = self.constant(op, 4)
        elif op.kind == "S":
            x = self.lanes(0) if op.name in ("SRZ", "SR_CgaCtaId") else self.special.get(op.name)
        else:
            return None
        if x is None:
            return None
        if op.abs:  # |R| only appears on float operands
            x = x & np.uint64(0x7FFFFFFF)
        if op.inv:
            x = ~x & M32
        return x

    def constant(self, op, size):
        if op.name is None:
            key = ("c", op.value, size)
            if key not in self.cache:
                self.cache[key] = self.lanes(self._word(op.value, size)) if op.value + size <= len(self.const) else None
            return self.cache[key]
        index = self.reg(op.name)
        if index is None or not self.known_in(op.name, self.mask):
            return None
        offsets = (index + np.uint64(op.value)).astype(np.int64)
        if offsets.max() + size > len(self.const):
            return None
        return np.array([self._word(int(o), size) for o in offsets], np.uint64)

    def _word(self, offset, size):
        return int.from_bytes(self.const[offset:offset + size], "little")

    # ---- writing ----
    def write(self, name, value, guard):
        """Set the lanes where the instruction runs (active, its predicate true: `guard`, or None if that
        is unknown); a lane's result is known where all its sources were."""
        if name in ("RZ", "URZ", "PT", "UPT"):
            return
        store = self.p if name[0] == "P" or name.startswith("UP") else self.r
        if value is not None and store is self.r:
            value = value & M32
        if guard is None:
            if store.get(name) is None or value is None or not np.array_equal(store[name], value):
                store[name] = None
            self.known.pop(name, None)
            return
        if self.cur is None and value is not None and guard.all():
            store[name] = value
            self.known.pop(name, None)
            return
        if not guard.any():
            return
        old = store.get(name)
        old_known = self.known.get(name, np.full(self.n, old is not None))
        written = np.full(self.n, value is not None) if self.cur is None else self.cur & (value is not None)
        known = np.where(guard, written, old_known)
        filler = old if old is not None else np.zeros(self.n, bool if store is self.p else np.uint64)
        store[name] = None if not known.any() else (filler if value is None else np.where(guard, value, filler))
        if known.all() or not known.any():
            self.known.pop(name, None)
        else:
            self.known[name] = known

    def forget(self, name):
        (self.p if name[0] == "P" or name.startswith("UP") else self.r)[name] = None
        self.known.pop(name, None)

    # ---- memory ----
    def address(self, op, used):
        """Byte addresses of a memory operand ([R+UR+imm], desc[..][R.64+imm]) in lanes `used`."""
        total = self.lanes(op.value & 0xFFFFFFFFFFFFFFFF)
        for name in op.name:
            lo = self.reg(name)
            if lo is None or not self.known_in(name, used):
                return None
            if ".64" in op.text and not name.startswith("UR"):
                hi = self.reg(pair_name(name, 1))
                if hi is None or not self.known_in(pair_name(name, 1), used):
                    return None
                lo = lo | (hi << SHIFT32)
            total = total + lo
        return total

    def load(self, addresses, size, used, space):
        """Per-lane Python ints read at `addresses` by lanes `used` (0 elsewhere) from "global",
        "shared" or "local" memory; None if unknown."""
        out, cache = [0] * self.n, {}
        for lane in np.flatnonzero(used):
            a = int(addresses[lane])
            if space == "local":
                out[lane] = self._read_bytes(self.local, (int(lane) << LANE_SHIFT) | a, size)
            else:
                if a not in cache:
                    shared = space == "shared"
                    cache[a] = self._read_bytes(self.shared, a, size) if shared else self._read_global(a, size)
                out[lane] = cache[a]
            if out[lane] is None:
                return None
        return out

    def _read_global(self, a, size):
        for start, data in self.memory:
            if start <= a and a + size <= start + len(data):
                return int.from_bytes(data[a - start:a - start + size], "little")
        return None

    @staticmethod
    def _read_bytes(stored, a, size):
        got = [stored.get(a + k) for k in range(size)]
        return None if None in got else int.from_bytes(bytes(got), "little")


def execute(ins, w):
    """Apply one instruction to the lanes of `w` (control flow is walk.py's)."""
    ops = parsed(ins)
    guard = w.mask
    if ins._guard is not None:
        p = w.pred(ins._guard)
        guard = None if p is None else (w.mask & p)
    if w.known:
        w.cur = None
        for op in ops[1:]:
            for name in (op.name if op.kind == "A" else [op.name] if op.kind in ("R", "P", "C") else []):
                part = w.known.get(name)
                if part is not None:
                    w.cur = part if w.cur is None else w.cur & part
    handler = HANDLERS.get(ins.base)
    if handler is None and ins.base.startswith("U"):
        handler = HANDLERS.get(ins.base[1:])
    (handler or unknown)(ins, ops, w, guard)
    w.cur = None


def unknown(ins, ops, w, guard):
    for name in ins._dst:
        w.write(name, None, guard)


def access_bytes(ins):
    """Bytes a memory instruction moves per lane: its width modifier, else a 32-bit word."""
    return max([WIDTH[m] for m in ins.modifiers if m in WIDTH] or [4])


def _load(ins, ops, w, guard):
    size = access_bytes(ins)
    addresses = w.address(ops[1], guard) if ops[1].kind == "A" and guard is not None else None
    space = {"LDS": "shared", "LDL": "local"}.get(ins.base, "global")
    value = None if addresses is None else w.load(addresses, size, guard, space)
    for k in range(max(1, size // 4)):
        part = None
        if value is not None:
            part = np.array([(v >> (32 * k)) & 0xFFFFFFFF for v in value], np.uint64)
            if size < 4 and any(m in ("S8", "S16") for m in ins.modifiers):
                part = sign_extend(part, size) & M32
        w.write(pair_name(ops[0].name, k), part, guard)


def _ldc(ins, ops, w, guard):
    size = 8 if "64" in ins.modifiers else 4
    x = w.constant(ops[1], size) if ops[1].kind == "C" else None
    if size == 8:
        w.write(ops[0].name, None if x is None else x & M32, guard)
        w.write(pair_name(ops[0].name, 1), None if x is None else x >> SHIFT32, guard)
    elif x is not None and ins.modifiers and ins.modifiers[-1] in ("U8", "S8", "U16", "S16"):
        size = WIDTH[ins.modifiers[-1]]
        x = x & np.uint64((1 << 8 * size) - 1)
        w.write(ops[0].name, sign_extend(x, size) & M32 if ins.modifiers[-1][0] == "S" else x, guard)
    else:
        w.write(ops[0].name, x, guard)


def _store(ins, ops, w, guard):
    """STS, and STL (a spill: per-lane bytes, so that a loop counter or bound spilled and reloaded stays
    known)."""
    size = access_bytes(ins)
    used = w.mask if guard is None else guard
    addresses = w.address(ops[0], used)
    if addresses is None:  # data-dependent addresses: assumed not to hit the tables control flow reads
        if ins.base == "STL":  # a spill slot the walk cannot place: every spilled value is forgotten
            w.local.clear()
        return
    local = ins.base == "STL"
    stored = w.local if local else w.shared
    words = [w.value(ops[1])]  # 8 and 16 bytes: a pair or quad of registers from the named one
    words += [w.reg(pair_name(ops[1].name, k)) for k in range(1, size // 4)]
    value = None if any(x is None for x in words) else words
    known = w.cur if w.cur is not None else np.ones(w.n, bool)
    for lane in np.flatnonzero(used):
        for k in range(size):
            key = ((int(lane) << LANE_SHIFT) if local else 0) | (int(addresses[lane]) + k)
            if value is None or guard is None or not known[lane]:
                stored.pop(key, None)
            else:
                stored[key] = (int(value[k // 4][lane]) >> (8 * (k % 4))) & 0xFF


def _r2ur(ins, ops, w, guard):
    """R2UR: a register of the first active lane of each warp, into a uniform one."""
    x = w.value(ops[-1])
    if x is None:
        return unknown(ins, ops, w, guard)
    per_warp = x.reshape(-1, 32)
    first = np.argmax(w.mask.reshape(-1, 32), axis=1)
    w.write(ops[0].name, np.repeat(per_warp[np.arange(len(first)), first], 32), guard)


def _float(ins, ops, w, guard):
    """I2F / I2FP / F2I / FMUL / FADD / FFMA / MUFU.RCP: exact where an integer division's float steps
    need it (the quotient is corrected in integer code afterwards); other MUFU results are unknown."""
    mods, base = ins.modifiers, ins.base
    src = [w.value(op) for op in ops[1:] if op.kind in ("R", "I", "F", "C")]
    if any(v is None for v in src) or any(m in mods for m in ("64", "S64", "U64", "F64")):
        return unknown(ins, ops, w, guard)
    with np.errstate(all="ignore"):
        if base in ("I2F", "I2FP"):
            x = src[0].astype(np.float64) if "U32" in mods else signed(src[0]).astype(np.float64)
            out = bits(x.astype(np.float32))
        elif base == "F2I":
            x = np.nan_to_num(np.trunc(f32(src[0]).astype(np.float64)), nan=0.0, posinf=2**32 - 1, neginf=-2**31)
            low, high = (0, 2**32 - 1) if "U32" in mods else (-2**31, 2**31 - 1)
            out = np.clip(x, low, high).astype(np.int64).astype(np.uint64) & M32
        elif base == "MUFU" and "RCP" in mods:
            out = bits(np.float32(1.0) / f32(src[0]))
        elif base == "MUFU":  # exp2, log2, rsqrt...: values that steer no loop here
            return unknown(ins, ops, w, guard)
        else:
            xs = [-f32(v) if op.neg else f32(v) for v, op in zip(src, [o for o in ops[1:] if o.kind != "P"])]
            out = {"FMUL": lambda: xs[0] * xs[1], "FADD": lambda: xs[0] + xs[1],
                   "FFMA": lambda: xs[0] * xs[1] + xs[2]}[base]()
            out = bits(np.clip(out, 0, 1) if "SAT" in mods else out)
    w.write(ops[0].name, out, guard)


HANDLERS = {**ops_.HANDLERS, "LDG": _load, "LDS": _load, "LD": _load, "LDL": _load, "LDC": _ldc,
            "STS": _store, "STL": _store, "R2UR": _r2ur, "I2F": _float, "I2FP": _float, "F2I": _float,
            "FMUL": _float, "FADD": _float, "FFMA": _float, "MUFU": _float}
