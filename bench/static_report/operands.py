"""SASS operands, and the integer ALU instructions machine.py evaluates: adds with carries, multiply-
adds (wide and high halves), LEA, funnel shifts, LOP3/PLOP3 lookup tables, selects, compares (64-bit
through .EX chaining), min/max, moves. Each handler computes every lane at once and writes through
`w.write`, which keeps lanes the instruction does not run."""

import re

import numpy as np

M32 = np.uint64(0xFFFFFFFF)
SHIFT32 = np.uint64(32)
_ONE = np.uint64(1)
_REG = re.compile(r"^(U?R(?:Z|\d+))")
_PRED = re.compile(r"^(!?)(U?P(?:T|\d))$")
_CONST = re.compile(r"^c\[0x0\]\[(?:(U?R\d+|URZ|RZ)\+?)?(-?0x[0-9a-f]+)?\]$")
_ADDRESS = re.compile(r"^(?:desc\[[^\]]*\])?\[([^\]]*)\]$")
_FLOAT = re.compile(r"^-?(?:\d+\.\d*(?:e[-+]\d+)?|\d+e[-+]\d+|\+?INF|-INF|QNAN)$")
_INT = re.compile(r"-?0x[0-9a-f]+|-?\d+")
CMP = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal, "GT": np.greater,
       "GE": np.greater_equal}
WIDTH = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "64": 8, "128": 16}


def signed(x):
    return x.astype(np.int64) - ((x >> np.uint64(31)) & _ONE).astype(np.int64) * (1 << 32)


def f32(x):
    return (x & M32).astype(np.uint32).view(np.float32)


def bits(f):
    return np.asarray(f, np.float32).view(np.uint32).astype(np.uint64)


def sign_extend(x, size):
    top = np.uint64(1 << (8 * size - 1))
    return np.where(x & top, x | (~np.uint64((1 << (8 * size)) - 1)), x) & np.uint64(0xFFFFFFFFFFFFFFFF)


def pair_name(name, k):
    """The k-th register of a pair or quad starting at `name`."""
    if name in ("RZ", "URZ") or k == 0:
        return name
    prefix = "UR" if name.startswith("UR") else "R"
    return f"{prefix}{int(name[len(prefix):]) + k}"


class Operand:
    """One parsed operand: kind R (register, pair base), P (predicate), I (integer), F (float),
    C (constant bank), S (special register), A (address), X (anything else)."""

    def __init__(self, text):
        self.text, self.neg, self.inv, self.abs, self.not_ = text, False, False, False, False
        t = text.strip()
        self.kind, self.name, self.value = "X", t, None
        if _INT.fullmatch(t):
            self.kind, self.value = "I", int(t, 0)
            return
        if _FLOAT.match(t):
            self.kind, self.value = "F", float(t.replace("INF", "inf").replace("QNAN", "nan"))
            return
        if t.startswith("-"):
            self.neg, t = True, t[1:]
        if t.startswith("~"):
            self.inv, t = True, t[1:]
        if t.startswith("|"):
            self.abs, t = True, t[1:].replace("|", "", 1)
        if _REG.match(t):
            self.kind, self.name = "R", _REG.match(t).group(1)
        elif _PRED.match(t):
            self.kind, self.not_, self.name = "P", bool(_PRED.match(t).group(1)), _PRED.match(t).group(2)
        elif _CONST.match(t):
            index, offset = _CONST.match(t).groups()
            self.kind, self.name, self.value = "C", index, int(offset or "0", 16)
        elif t.startswith("SR"):
            self.kind, self.name = "S", t
        elif _ADDRESS.match(t):
            parts = _ADDRESS.match(t).group(1).split("+")
            self.kind, self.name = "A", [p.split(".")[0] for p in parts if _REG.match(p)]
            self.value = sum(int(p, 16) for p in parts if re.fullmatch(r"-?0x[0-9a-f]+", p))


def _negated(x):
    return (np.uint64(1 << 32) - x) & np.uint64((1 << 33) - 1)  # 2^32 - x: x = 0 carries out


def _split(ops):
    """Destinations (a register and carry-out predicates) and sources."""
    n = 1
    while n < len(ops) and ops[n].kind == "P" and ops[n].name != "PT" and n < 3 and len(ops) - n > 2:
        n += 1
    return ops[:n], ops[n:]


def _unknown(ins, ops, w, guard):
    for name in ins._dst:
        w.write(name, None, guard)


def _add(ins, ops, w, guard):
    """IADD3 / VIADD / IADD: a 3-input add with carry-outs; .X adds carry-in predicates."""
    dests, srcs = _split(ops)
    total = w.lanes(0)
    for op in srcs:
        if op.kind == "P":
            if "X" in ins.modifiers:
                p = w.pred(op)
                if p is None:
                    return _unknown(ins, ops, w, guard)
                total = total + p.astype(np.uint64)
            continue
        x = w.value(op)
        if x is None:
            return _unknown(ins, ops, w, guard)
        total = total + (_negated(x) if op.neg else x)
    w.write(dests[0].name, total, guard)
    carry = total >> SHIFT32
    for k, op in enumerate(dests[1:]):
        w.write(op.name, carry > k, guard)


def _imad(ins, ops, w, guard):
    """IMAD and its MOV / SHL / IADD / WIDE / HI / X forms: a * b + c."""
    dests, srcs = _split(ops)
    srcs = [op for op in srcs if op.kind != "P"]
    mods = set(ins.modifiers)
    wide = "WIDE" in mods
    if wide and "X" in mods or len(srcs) < 3:
        return _unknown(ins, ops, w, guard)
    a, b, c = (w.value(op) for op in srcs[:3])
    if a is None or b is None or c is None:
        return _unknown(ins, ops, w, guard)
    if srcs[0].neg:
        a = _negated(a) & M32
    if srcs[2].neg:
        c = _negated(c) & M32
    if wide:
        c_hi = w.reg(pair_name(srcs[2].name, 1)) if srcs[2].kind == "R" else w.lanes(0)
        if c_hi is None:
            return _unknown(ins, ops, w, guard)
        sa, sb = (a, b) if "U32" in mods else (signed(a).astype(np.uint64), signed(b).astype(np.uint64))
        result = sa * sb + (c | (c_hi << SHIFT32))
        w.write(dests[0].name, result & M32, guard)
        w.write(pair_name(dests[0].name, 1), result >> SHIFT32, guard)
        return
    if "HI" in mods:
        high = (a * b) >> SHIFT32
        if "U32" not in mods:  # signed high half from the unsigned one
            high = high - np.where(a >> np.uint64(31), b, 0) - np.where(b >> np.uint64(31), a, 0)
        total = (high & M32) + c
    else:
        total = a * b + c
    carry = lambda: w.pred(ops[-1]) if ops[-1].kind == "P" else np.zeros(w.n, bool)  # noqa: E731
    return _carry_in_and_write(ins, ops, w, guard, total, carry, dests)


def _carry_in_and_write(ins, ops, w, guard, total, carry, dests):
    """.X adds the carry-in predicate `carry()` (None: unknown); a second destination takes the carry out."""
    if "X" in ins.modifiers:
        p = carry()
        if p is None:
            return _unknown(ins, ops, w, guard)
        total = total + p.astype(np.uint64)
    w.write(dests[0].name, total, guard)
    if len(dests) > 1:
        w.write(dests[1].name, (total >> SHIFT32) > 0, guard)


def _lea(ins, ops, w, guard):
    """LEA: (a << s) + b; .HI: b + the high word of (c:a) << s (c = sign of a with .SX32)."""
    dests, srcs = _split(ops)
    mods = set(ins.modifiers)
    shift_op = next(op for op in reversed(srcs) if op.kind == "I")
    regs = [op for op in srcs if op.kind in ("R", "C", "I") and op is not shift_op]
    a, b = w.value(regs[0]), w.value(regs[1])
    if a is None or b is None:
        return _unknown(ins, ops, w, guard)
    s = np.uint64(shift_op.value)
    if "HI" in mods:
        if "SX32" in mods:
            hi = np.where(a >> np.uint64(31), M32, w.lanes(0))
        else:
            hi = w.value(regs[2]) if len(regs) > 2 else w.lanes(0)
            if hi is None:
                return _unknown(ins, ops, w, guard)
        total = b + ((((hi << SHIFT32) | a) << s) >> SHIFT32 & M32)
    else:
        total = ((a << s) & M32) + b
    carry = lambda: w.pred(srcs[-1]) if srcs[-1].kind == "P" else None  # noqa: E731
    return _carry_in_and_write(ins, ops, w, guard, total, carry, dests)


def _shf(ins, ops, w, guard):
    """SHF: funnel shift of the 64-bit (hi:lo), keeping the low or (.HI) high word."""
    lo, s, hi = (w.value(op) for op in ops[1:4])
    if lo is None or s is None or hi is None:
        return _unknown(ins, ops, w, guard)
    mods = set(ins.modifiers)
    s = np.minimum(s & np.uint64(0x7F), np.uint64(64 if mods & {"U64", "S64"} else 32))
    whole = (hi << SHIFT32) | lo
    big = s >= 64
    s = np.minimum(s, np.uint64(63))
    if "L" in mods:
        out = np.where(big, 0, whole << s)
    elif mods & {"S32", "S64"}:
        shifted = whole.view(np.int64) >> s.astype(np.int64)
        out = np.where(big, np.where(whole.view(np.int64) < 0, -1, 0), shifted).astype(np.int64).view(np.uint64)
    else:
        out = np.where(big, 0, whole >> s)
    out = out.astype(np.uint64)
    w.write(ops[0].name, (out >> SHIFT32) if "HI" in mods else out & M32, guard)


def _lop3(ins, ops, w, guard):
    """LOP3.LUT: any function of three inputs by its truth table; a predicate destination gets != 0."""
    dests, srcs = ops[:len(ops) - 5], ops[len(ops) - 5:]
    a, b, c = (w.value(op) for op in srcs[:3])
    if a is None or b is None or c is None or srcs[3].kind != "I":
        return _unknown(ins, ops, w, guard)
    lut, result = srcs[3].value, w.lanes(0)
    for i in range(8):
        if lut >> i & 1:
            result = result | ((a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c) & M32)
    for op in dests:
        w.write(op.name, result if op.kind == "R" else result != 0, guard)


def _plop3(ins, ops, w, guard):
    a, b, c = (w.pred(op) for op in ops[2:5])
    if a is None or b is None or c is None:
        return _unknown(ins, ops, w, guard)
    lut, result = ops[5].value, np.zeros(w.n, bool)
    for i in range(8):
        if lut >> i & 1:
            result |= (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
    w.write(ops[0].name, result, guard)


def _sel(ins, ops, w, guard):
    a, b, p = w.value(ops[1]), w.value(ops[2]), w.pred(ops[3])
    if p is not None and a is not None and b is not None:
        w.write(ops[0].name, np.where(p, a, b), guard)
    elif p is not None and (p.all() and a is not None or (~p).all() and b is not None):
        w.write(ops[0].name, a if p.all() else b, guard)
    else:
        _unknown(ins, ops, w, guard)


def _isetp(ins, ops, w, guard):
    """ISETP / FSETP: compare, combined with a predicate; .EX compares high words, chaining the low
    words' result (the last operand) for 64-bit compares."""
    mods = ins.modifiers
    cmp = next((m.rstrip("U") for m in mods if m.rstrip("U") in CMP), None)
    combine = next((m for m in mods if m in ("AND", "OR", "XOR")), "AND")
    a, b, c = w.value(ops[2]), w.value(ops[3]), w.pred(ops[4])
    if cmp is None or a is None or b is None or c is None:
        return _unknown(ins, ops, w, guard)
    if ins.base.endswith("FSETP"):
        x, y = f32(a), f32(b)
    else:
        x, y = (a, b) if "U32" in mods else (signed(a), signed(b))
    result = CMP[cmp](x, y)
    if "EX" in mods:
        low = w.pred(ops[5])
        if low is None:
            return _unknown(ins, ops, w, guard)
        equal = np.equal(x, y)
        if cmp in ("EQ", "NE"):
            result = (equal & low) if cmp == "EQ" else (~equal | low)
        else:
            result = CMP[cmp[0] + "T"](x, y) | (equal & low)
    join = {"AND": np.logical_and, "OR": np.logical_or, "XOR": np.logical_xor}[combine]
    w.write(ops[0].name, join(result, c), guard)
    w.write(ops[1].name, join(~result, c), guard)


def _minmax(ins, ops, w, guard):
    """IMNMX / VIMNMX / VIMNMX3 / VIADDMNMX: min where the last predicate is true, else max."""
    values = [w.value(op) for op in ops[1:] if op.kind != "P"]
    choose = w.pred(ops[-1]) if ops[-1].kind == "P" else np.ones(w.n, bool)
    if any(v is None for v in values) or choose is None:
        return _unknown(ins, ops, w, guard)
    if ins.base == "VIADDMNMX":
        values = [(values[0] + values[1]) & M32, values[2]]
    conv = (lambda v: v.astype(np.int64)) if "U32" in ins.modifiers else signed
    low = high = conv(values[0])
    for v in values[1:]:
        low, high = np.minimum(low, conv(v)), np.maximum(high, conv(v))
    w.write(ops[0].name, np.where(choose, low, high).astype(np.uint64), guard)


def _mov(ins, ops, w, guard):
    """MOV / S2R / CS2R (a pair) / UMOV."""
    x = w.value(ops[1])
    w.write(ops[0].name, x, guard)
    if ins.base == "CS2R":
        w.write(pair_name(ops[0].name, 1), x, guard)


def _iabs(ins, ops, w, guard):
    x = w.value(ops[1])
    w.write(ops[0].name, None if x is None else np.abs(signed(x)).astype(np.uint64), guard)


def _prmt(ins, ops, w, guard):
    """PRMT: bytes of (b:a) picked by the selector's nibbles (bit 3: replicate the sign)."""
    a, sel, b = (w.value(op) for op in ops[1:4])
    if a is None or sel is None or b is None or ins.modifiers:
        return _unknown(ins, ops, w, guard)
    source = (b << SHIFT32) | a
    out = w.lanes(0)
    for i in range(4):
        nib = (sel >> np.uint64(4 * i)) & np.uint64(0xF)
        byte = (source >> ((nib & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
        byte = np.where(nib & np.uint64(8), np.where(byte & np.uint64(0x80), 0xFF, 0), byte).astype(np.uint64)
        out = out | (byte << np.uint64(8 * i))
    w.write(ops[0].name, out, guard)


def _hfma2(ins, ops, w, guard):
    """HFMA2 -RZ, RZ, hi, lo: the compiler's way to set a 32-bit constant from two half immediates."""
    if len(ops) == 5 and ops[1].name == "RZ" and ops[2].name == "RZ" and all(op.kind in ("I", "F") for op in ops[3:]):
        halves = np.array([ops[3].value, ops[4].value], np.float16).view(np.uint16)
        return w.write(ops[0].name, w.lanes(int(halves[0]) << 16 | int(halves[1])), guard)
    _unknown(ins, ops, w, guard)


def _p2r(ins, ops, w, guard):
    """P2R Rd, PR, Rs, mask: predicates P0..P6 into the bits of `mask`, the rest from Rs."""
    base, mask = w.value(ops[2]), w.value(ops[3])
    if base is None or mask is None:
        return _unknown(ins, ops, w, guard)
    bits_, packed = int(mask[0]), w.lanes(0)
    for k in range(7):
        if bits_ >> k & 1:
            p = w.p.get(f"P{k}")
            if p is None or f"P{k}" in w.known:
                return _unknown(ins, ops, w, guard)
            packed = packed | (p.astype(np.uint64) << np.uint64(k))
    w.write(ops[0].name, (base & ~mask & M32) | packed, guard)


def _r2p(ins, ops, w, guard):
    """R2P PR, Rs, mask: bits of Rs under `mask` into P0..P6."""
    value, mask = w.value(ops[1]), w.value(ops[2])
    for k in range(7):
        if mask is None or int(mask[0]) >> k & 1:
            w.write(f"P{k}", None if value is None or mask is None else (value >> np.uint64(k) & _ONE) == 1, guard)


HANDLERS = {"IADD3": _add, "VIADD": _add, "IADD": _add, "IMAD": _imad, "LEA": _lea, "SHF": _shf, "LOP3": _lop3,
            "PLOP3": _plop3, "SEL": _sel, "FSEL": _sel, "ISETP": _isetp, "FSETP": _isetp, "IMNMX": _minmax,
            "VIMNMX": _minmax, "VIMNMX3": _minmax, "VIADDMNMX": _minmax, "MOV": _mov, "S2R": _mov, "S2UR": _mov,
            "CS2R": _mov, "IABS": _iabs, "PRMT": _prmt, "HFMA2": _hfma2, "P2R": _p2r, "R2P": _r2p}
