"""What each SASS instruction costs on an H100 SM: its result latency (for one warp's scoreboard) and
the pipe it occupies (for the throughput of the warps sharing a scheduler or the SM).

Pipe costs are cycles per warp instruction from the CUDA programming guide's throughput table for compute
capability 9.0 (results per clock per SM, four schedulers): FP32 add/multiply/FMA 128 (1 cycle a
scheduler), 32-bit integer add, compare, logic, shift, min/max and multiply-add 64 (2 cycles; IMAD runs
on its own pipe beside the ALU), conversions and MUFU 16 (8 cycles). Per SM: shared and global memory
instructions move 128 bytes per clock (an instruction costs at least one), tensor-core MMAs run at the
dense peaks of limits.py. Spills (LDL, STL) are taken as L1 hits, at shared memory's cost. Latencies are
round figures of published Hopper microbenchmarks; the global load latency, which mixes L1 and L2 hits
and HBM, is the calibrated constant (calibration.py).
"""

import numpy as np

from bench.static_report.limits import H100_SXM, ISSUE_CLOCK_HZ, SM_COUNT
from bench.static_report.parse import MMA, warp_macs

FIXED_LATENCY = 4  # ALU, FP32 and IMAD pipes: dependent issue
XU_LATENCY = 16  # MUFU and conversions
SHARED_LATENCY = 30  # LDS, shared atomics
CONSTANT_LATENCY = 20  # LDC, S2R
MMA_LATENCY = 32  # mma.sync m16n8k*
BARRIER_CYCLES = 20
MEMORY_BYTES_PER_CLOCK = 128

ALU = {"IADD3", "IADD", "LOP3", "SHF", "ISETP", "FSETP", "SEL", "FSEL", "LEA", "IABS", "IMNMX", "VIMNMX", "VIMNMX3",
       "VIADDMNMX", "PRMT", "PLOP3", "MOV", "P2R", "R2P", "VIADD", "I2FP", "FMNMX", "BMSK", "SGXT", "LOP", "CS2R"}
FP32 = {"FFMA", "FMUL", "FADD", "FSWZADD", "HFMA2", "HADD2", "HMUL2"}
IMAD = {"IMAD", "IDP", "IMUL", "IMADSP", "IMNMX3"}
XU = {"MUFU", "I2F", "F2I", "F2F", "FRND", "POPC", "FLO", "BREV", "F2FP"}
SHARED = {"LDS", "STS", "ATOMS", "LDSM", "SHFL"}
LOCAL = {"LDL", "STL"}  # spills: a block's spill slots stay in L1, so they cost as shared memory does
ON_CHIP = SHARED | LOCAL
GLOBAL = {"LDG", "STG", "LD", "ST", "ATOMG", "ATOM", "RED", "LDGSTS"}
PIPE_COST = {"alu": 2, "fp32": 1, "imad": 2, "xu": 8}
WIDTH = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "64": 8, "128": 16}
# multiply-accumulates per clock per SM at the dense tensor peaks, by mma element type
TENSOR_MACS = {kind: H100_SXM[kind] / 2 / SM_COUNT / ISSUE_CLOCK_HZ for kind in ("int8_tensor", "bf16_tensor",
                                                                               "tf32_tensor")}


class Timing:
    """Latencies and pipe costs, with the calibrated constants: the latency of a global load (cycles)
    and the bandwidth from L2 to the SMs (bytes per second, shared by all SMs)."""

    def __init__(self, global_latency, l2_bandwidth):
        self.global_latency = global_latency
        self.l2_bytes_per_clock = l2_bandwidth / SM_COUNT / ISSUE_CLOCK_HZ
        self.barrier_cycles = BARRIER_CYCLES

    def classify(self, ins):
        """(result latency, scheduler pipe or None, cycles it holds that pipe)."""
        base = ins.base
        if base in GLOBAL:
            return self.global_latency, None, 0
        if base in ON_CHIP:
            return SHARED_LATENCY, None, 0
        if base in MMA:
            return MMA_LATENCY, None, 0
        if base in ("LDC", "S2R", "S2UR", "ULDC"):
            return CONSTANT_LATENCY, None, 0
        for pipe, names in (("alu", ALU), ("fp32", FP32), ("imad", IMAD), ("xu", XU)):
            if base in names:
                return (XU_LATENCY if pipe == "xu" else FIXED_LATENCY), pipe, PIPE_COST[pipe]
        return FIXED_LATENCY, None, 0

    def sm_costs(self, ins, lanes):
        """SM-wide pipe cycles of one warp instruction with `lanes` active lanes (per warp): the L1 /
        shared-memory datapath (at least one cycle an instruction), the L2-to-SM share of global
        accesses (at least one 32-byte sector), tensor cores."""
        base = ins.base
        if base in ON_CHIP or base in GLOBAL:
            width = max([WIDTH.get(m, 0) for m in ins.modifiers] or [0]) or 4
            moved = lanes * width
            costs = [("memory", np.maximum(1.0, moved / MEMORY_BYTES_PER_CLOCK))]
            if base in GLOBAL:
                costs.append(("l2", np.maximum(32.0, moved) / self.l2_bytes_per_clock))
            return costs
        if base in MMA:
            kind = "int8_tensor" if base in ("IMMA", "IGMMA") else (
                "tf32_tensor" if "TF32" in ins.modifiers else "bf16_tensor")
            return [("tensor", warp_macs(ins) / TENSOR_MACS[kind])]
        return []

    @staticmethod
    def category(ins):
        base = ins.base
        if base in MMA:
            return "mma"
        if base in GLOBAL:
            return "global"
        if base in ON_CHIP:
            return "shared"
        for name, names in (("alu", ALU), ("fp32", FP32), ("imad", IMAD), ("xu", XU)):
            if base in names:
                return name
        if base in ("BRA", "BSSY", "BSYNC", "BREAK", "EXIT", "CALL", "RET", "WARPSYNC", "BAR"):
            return "control"
        return "uniform" if base.startswith("U") else "other"
