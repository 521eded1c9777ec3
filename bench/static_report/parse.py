"""Read `ptxas -v` logs and `cuobjdump -sass` listings: resource usage, loops, and the instruction mix
of loop bodies. Plain text in, plain dicts out (no CUDA needed), so the parser is tested on snippets.

Loops: every branch (BRA) to an earlier address closes a loop from its target to itself; back edges
to the same target are one loop. A loop is innermost when no other loop lies inside it. A branch to
its own address (the trap after the last EXIT) is not a loop. Body counts are static: each
instruction between the loop's first and last address counts once per iteration, whatever its
predicate.
"""

import re
from dataclasses import dataclass, field

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s*([^;]*?)\s*;")
_PREDICATE = re.compile(r"^@!?U?P[0-9T]$")
_CARRY_OUT = re.compile(r"^!?U?P[0-6]$")
_HEX = re.compile(r"0x([0-9a-fA-F]+)")

# Tensor-core (warp-level or warpgroup) matrix instructions; DMMA is f64 and counted there.
MMA = {"IMMA", "HMMA", "HGMMA", "IGMMA", "BMMA", "QMMA", "OMMA", "UTCHMMA", "UTCIMMA", "UTCQMMA"}
F64_OPS = {"DADD", "DMUL", "DFMA", "DSETP", "DSET", "DMNMX", "DMMA"}
# Integer ALU ops whose 64-bit forms are built from 32-bit halves (uniform-datapath forms included).
INT_ALU = {"IADD3", "IADD", "IMAD", "LEA", "ISETP", "SHF", "IMNMX", "VIADD", "IABS", "ISCADD"}
MEMORY = {"LDG", "LDS", "STS", "STG", "LDL", "STL", "LD", "ST"}
WIDTHS = {"U8": 8, "S8": 8, "U16": 16, "S16": 16, "64": 64, "128": 128}
# multiply-accumulates of one warp instruction, by opcode and shape (m, n, k of the mma)
MMA_SHAPES = {"16832": (16, 8, 32), "16816": (16, 8, 16), "1688": (16, 8, 8), "8816": (8, 8, 16),
              "8832": (8, 8, 32), "884": (8, 8, 4), "16864": (16, 8, 64)}
LANE_MACS = {"IDP.4A": 4, "IDP.2A": 2, "FFMA": 1, "HFMA2": 2, "DFMA": 1}

INT64_RULES = (
    "integer ALU ops (IADD3, IADD, IMAD, LEA, ISETP, SHF, IMNMX, VIADD, IABS, ISCADD and their uniform U-forms) "
    "that are halves of 64-bit arithmetic: .X (high half of an add/sub/lea, takes the carry), .EX (high half of a "
    "compare), IMAD.WIDE (32x32->64 product), IMAD.HI (high half of a product), SHF with .U64/.S64 (64-bit "
    "shift), SHF.R.S32.HI by 0x1f (sign extension to 64 bits), a .64 form, and IADD3/IADD/IMAD/LEA writing a "
    "carry-out predicate as second operand (low half of a 64-bit add). 64-bit logic ops (two LOP3) and moves "
    "are not distinguishable from 32-bit ones and are not counted.")
F64_RULES = ("DADD, DMUL, DFMA, DSETP, DSET, DMNMX, DMMA, and any instruction with an F64 modifier or a 64-bit "
             "MUFU (F2F.F64.F32, F2I.S64.F64, I2F.F64.S64, MUFU.RCP64H, ...).")
WIDTH_RULES = ("LDG/LDS/STS/STG (and LDL/STL, LD/ST) by access width: .U8/.S8 = 8 bits, .U16/.S16 = 16, no width "
               "modifier = 32, .64 = 64, .128 = 128.")


@dataclass
class Instruction:
    address: int
    opcode: str  # with modifiers, e.g. "IDP.4A.S8.S8"
    operands: list = field(default_factory=list)
    predicate: str = ""

    def __post_init__(self):
        self.base, *self.modifiers = self.opcode.split(".")

    def branch_target(self):
        """Target address of a direct BRA, else None."""
        if self.base != "BRA" or not self.operands:
            return None
        found = _HEX.findall(self.operands[-1])
        return int(found[-1], 16) if found else None


def parse_sass(text):
    """{function name: [Instruction, ...]} of a cuobjdump -sass listing, in address order."""
    functions, current = {}, None
    for line in text.splitlines():
        header = _FUNCTION.match(line)
        if header:
            current = functions.setdefault(header.group(1), [])
            continue
        match = _INSTRUCTION.match(line)
        if match is None or current is None:
            continue
        words = match.group(2).split(None, 1)
        predicate = ""
        if words and _PREDICATE.match(words[0]):
            predicate = words[0]
            words = words[1].split(None, 1) if len(words) > 1 else []
        if not words:
            continue
        operands = [op.strip() for op in words[1].split(",")] if len(words) > 1 else []
        current.append(Instruction(int(match.group(1), 16), words[0], operands, predicate))
    return functions


@dataclass
class Loop:
    start: int  # address of the first instruction (the back edge's target)
    end: int  # address of the last back edge
    depth: int = 1  # 1 for an outermost loop
    innermost: bool = True


def find_loops(instructions):
    """Loops of one function, outermost first; depth and innermost filled in."""
    ends = {}
    for ins in instructions:
        target = ins.branch_target()
        if target is not None and target < ins.address:
            ends[target] = max(ends.get(target, target), ins.address)
    loops = [Loop(start, end) for start, end in sorted(ends.items())]
    for loop in loops:
        inside = [o for o in loops if o is not loop and loop.start <= o.start and o.end <= loop.end]
        around = [o for o in loops if o is not loop and o.start <= loop.start and loop.end <= o.end]
        loop.innermost = not inside
        loop.depth = 1 + len(around)
    return loops


def body(instructions, loop):
    return [ins for ins in instructions if loop.start <= ins.address <= loop.end]


def is_f64(ins):
    return ins.base in F64_OPS or "F64" in ins.modifiers or any(m.endswith("64H") for m in ins.modifiers)


def is_int64(ins):
    base = ins.base[1:] if ins.base.startswith("U") and ins.base[1:] in INT_ALU else ins.base
    if base not in INT_ALU:
        return False
    mods = set(ins.modifiers)
    if mods & {"X", "EX", "WIDE", "U64", "S64", "64"}:
        return True
    if base == "IMAD" and "HI" in mods:
        return True
    if base == "SHF" and {"R", "S32", "HI"} <= mods and len(ins.operands) > 2 and ins.operands[2] == "0x1f":
        return True
    carry_out = len(ins.operands) > 1 and bool(_CARRY_OUT.match(ins.operands[1]))
    return base in {"IADD3", "IADD", "IMAD", "LEA"} and carry_out


def access_width(ins):
    widths = [WIDTHS[m] for m in ins.modifiers if m in WIDTHS]
    return widths[-1] if widths else 32


def warp_macs(ins):
    """Multiply-accumulates one warp issue of this instruction performs (0 for anything else)."""
    if ins.base in MMA or ins.base == "DMMA":
        for m in ins.modifiers:
            if m in MMA_SHAPES:
                a, b, c = MMA_SHAPES[m]
                return a * b * c
            dims = re.fullmatch(r"(\d+)x(\d+)x(\d+)", m)
            if dims:  # warpgroup mma: four warps share the shape
                a, b, c = (int(d) for d in dims.groups())
                return a * b * c // 4
        return 0
    key = ins.base + ("." + ins.modifiers[0] if ins.base == "IDP" and ins.modifiers else "")
    return 32 * LANE_MACS.get(key, 0)


def instruction_mix(instructions):
    """Counts of the categories the report shows, over a list of instructions (NOPs not counted)."""
    mix = {"instructions": 0, "mma": 0, "idp4a": 0, "ffma": 0, "f64": 0, "int64": 0, "call": 0, "bar": 0,
           "shfl": 0, "warp_macs": 0}
    for ins in instructions:
        if ins.base == "NOP":
            continue
        mix["instructions"] += 1
        mix["warp_macs"] += warp_macs(ins)
        if ins.base in MMA:
            mix["mma"] += 1
        elif ins.base == "IDP":
            mix["idp4a"] += 1
        elif ins.base == "FFMA":
            mix["ffma"] += 1
        elif ins.base == "CALL":
            mix["call"] += 1
        elif ins.base == "BAR":
            mix["bar"] += 1
        elif ins.base == "SHFL":
            mix["shfl"] += 1
        elif ins.base in MEMORY:
            key = f"{ins.base.lower()}_{access_width(ins)}"
            mix[key] = mix.get(key, 0) + 1
        mix["f64"] += is_f64(ins)
        mix["int64"] += is_int64(ins)
    return mix


def add_mix(total, mix):
    for key, value in mix.items():
        total[key] = total.get(key, 0) + value
    return total


def analyze_sass(text):
    """Whole-kernel counts and the innermost loops of every function of one cubin's listing (a loop's
    function is its position in the listing)."""
    functions = parse_sass(text)
    everything, loops = [], []
    for position, instructions in enumerate(functions.values()):
        everything += instructions
        for loop in find_loops(instructions):
            if loop.innermost:
                mix = instruction_mix(body(instructions, loop))
                loops.append({"function": position, "start": loop.start, "end": loop.end, "depth": loop.depth, **mix})
    whole = instruction_mix(everything)
    local = sum(v for k, v in whole.items() if k.startswith(("ldl_", "stl_")))
    return {"functions": len(functions), "whole": whole, "innermost_loops": loops, "local_accesses": local}


_DYNAMIC_SHARED = re.compile(r"^\s*\.extern\s+\.shared\b", re.M)


def uses_dynamic_shared(ptx):
    """numba declares cuda.shared.array(0, ...) as an unsized extern in the PTX: its size is set at
    launch, so ptxas's smem figure leaves it out."""
    return bool(_DYNAMIC_SHARED.search(ptx))


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_FIELDS = {"barriers": re.compile(r"used (\d+) barriers"), "smem": re.compile(r"(\d+) bytes smem")}


def parse_ptxas(log):
    """Resources of the entry function of a `ptxas -v` log; stack frames and spills of every function
    (called device functions too) are summed into stack_frame / spill_stores / spill_loads."""
    entry, props_of, frames = None, None, {}
    out = {"registers": 0, "barriers": 0, "smem": 0}
    for line in log.splitlines():
        found = _ENTRY.search(line)
        if found:
            entry = found.group(1)
        found = _PROPERTIES.search(line)
        if found:
            props_of = found.group(1)
        found = _FRAME.search(line)
        if found and props_of:
            frames[props_of] = tuple(int(v) for v in found.groups())
        found = _USED.search(line)
        if found:
            out["registers"] = int(found.group(1))
            for key, pattern in _FIELDS.items():
                value = pattern.search(line)
                out[key] = int(value.group(1)) if value else 0
    if entry is None:
        raise ValueError("no entry function in the ptxas log")
    out["entry"] = entry
    out["stack_frame"] = sum(f[0] for f in frames.values())
    out["spill_stores"] = sum(f[1] for f in frames.values())
    out["spill_loads"] = sum(f[2] for f in frames.values())
    return out
