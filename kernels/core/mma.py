"""Warp-level tensor-core products (int8 and TF32) as CUDA device functions (vector loads and
stores are in `loads`).

    d0, d1, d2, d3 = mma_s8_16832(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)
    d0, d1, d2, d3 = mma_tf32_1688(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)   # float32 registers
    t = to_tf32(x)                                     # x rounded to TF32 (cvt.rna: nearest, ties away)

More in docs/internals.md (kernels/core/mma.py)."""

import threading
from typing import Any

import numpy as np

from eggnog.kernels.core.cuda_api import SIMULATED

MMA_M, MMA_N, MMA_K = 16, 8, 32


def _fragment_maps():
    """Where each byte of each lane's registers sits in A and B, and where each C element sits, as
    index arrays in (lane, register, byte) order: the int8 layout above, written once."""
    a_rows: list[int] = []
    a_cols: list[int] = []
    b_rows: list[int] = []
    b_cols: list[int] = []
    c_rows: list[int] = []
    c_cols: list[int] = []
    for lane in range(32):
        g, q = lane // 4, lane % 4
        for row, col in ((g, 4 * q), (g + 8, 4 * q), (g, 16 + 4 * q), (g + 8, 16 + 4 * q)):
            a_rows += [row] * 4
            a_cols += range(col, col + 4)
        for k in (4 * q, 16 + 4 * q):
            b_rows += range(k, k + 4)
            b_cols += [g] * 4
        c_rows += [g, g, g + 8, g + 8]
        c_cols += [2 * q, 2 * q + 1, 2 * q, 2 * q + 1]
    return tuple(np.array(v) for v in (a_rows, a_cols, b_rows, b_cols, c_rows, c_cols))


def _tf32_fragment_maps():
    """The same for the TF32 layout: one element per register, (lane, register) order."""
    a_rows, a_cols, b_rows, b_cols = [], [], [], []
    for lane in range(32):
        g, q = lane // 4, lane % 4
        a_rows += [g, g + 8, g, g + 8]
        a_cols += [q, q, q + 4, q + 4]
        b_rows += [q, q + 4]
        b_cols += [g, g]
    return tuple(np.array(v) for v in (a_rows, a_cols, b_rows, b_cols))


A_ROWS, A_COLS, B_ROWS, B_COLS, C_ROWS, C_COLS = _fragment_maps()
TF32_A_ROWS, TF32_A_COLS, TF32_B_ROWS, TF32_B_COLS = _tf32_fragment_maps()
TF32_K = 8


def _bytes_of(registers):
    """The signed bytes of 32-bit registers (any nesting), lowest byte first."""
    words = np.array(registers, dtype=np.int64).ravel() & 0xFFFFFFFF
    return words.astype(np.uint32).view(np.int8).astype(np.int64)


def fragments_to_matrices(a_regs, b_regs):
    """A (16x32) and B (32x8) from the 32 lanes' registers: a_regs (32, 4), b_regs (32, 2)."""
    a = np.zeros((MMA_M, MMA_K), np.int64)
    b = np.zeros((MMA_K, MMA_N), np.int64)
    a[A_ROWS, A_COLS] = _bytes_of(a_regs)
    b[B_ROWS, B_COLS] = _bytes_of(b_regs)
    return a, b


def round_tf32(x):
    """float32 values rounded to TF32 as cvt.rna.tf32.f32 does: to the nearest 10-bit mantissa, ties away
    from zero (adding half a unit to the magnitude bits carries into the exponent when it must)."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x1000) & 0xFFFFE000).astype(np.uint32).view(np.float32)


def tf32_fragments_to_matrices(a_regs, b_regs):
    """A (16x8) and B (8x8) in float64 from the 32 lanes' TF32 registers: a_regs (32, 4), b_regs (32, 2).
    The tensor core reads only the TF32 bits of a register: the low 13 mantissa bits are dropped."""
    a = np.zeros((MMA_M, TF32_K))
    b = np.zeros((TF32_K, MMA_N))
    truncate = lambda regs: (np.array(regs, np.float32).ravel().view(np.uint32) & 0xFFFFE000).view(np.float32)  # noqa: E731
    a[TF32_A_ROWS, TF32_A_COLS] = truncate(a_regs)
    b[TF32_B_ROWS, TF32_B_COLS] = truncate(b_regs)
    return a, b


def c_positions(lane):
    """(row, col) of c0..c3 in the 16x8 result for one lane."""
    return tuple(zip(C_ROWS[4 * lane:4 * lane + 4].tolist(), C_COLS[4 * lane:4 * lane + 4].tolist()))


class _WarpCall:
    """One mma of one simulated warp: the lanes' registers, complete when the 32nd lane arrives."""

    def __init__(self):
        self.a: list[Any] = [None] * 32
        self.b: list[Any] = [None] * 32
        self.c: list[Any] = [None] * 32
        self.arrived = self.left = 0
        self.done = threading.Event()
        self.d: Any = None


_calls: dict[tuple[object, int, int], "_WarpCall"] = {}
_calls_lock = threading.Lock()


def _s8_product(a_regs, b_regs, c_regs):
    a, b = fragments_to_matrices(a_regs, b_regs)
    d = a @ b
    d[C_ROWS, C_COLS] += np.array(c_regs, dtype=np.int64).ravel()
    return (d & 0xFFFFFFFF).astype(np.uint32).view(np.int32)  # wrapped to 32 bits, as the hardware does


def _tf32_product(a_regs, b_regs, c_regs):
    # products of TF32 values are exact in float64; the sum is rounded to fp32 once (the hardware's
    # accumulation order and rounding are its own: results agree to fp32 accumulation error)
    a, b = tf32_fragments_to_matrices(a_regs, b_regs)
    d = a @ b
    d[C_ROWS, C_COLS] += np.array(c_regs, dtype=np.float32).ravel()
    return d.astype(np.float32)


def _warp_call(product, a_regs, b_regs, c_regs):
    """Meet the other 31 lanes of this thread's warp at their matching call, apply `product` to the
    lanes' registers once, and return this lane's four result registers."""
    thread: Any = threading.current_thread()  # a simulated CUDA thread, with its thread_id and block
    lane = thread.thread_id % 32
    # a lane's n-th mma meets the other lanes' n-th: mma.sync requires the warp to call it in step
    n = getattr(thread, "mma_calls", 0)
    thread.mma_calls = n + 1
    key = (thread._manager, thread.thread_id // 32, n)
    with _calls_lock:
        call = _calls.get(key)
        if call is None:
            call = _calls[key] = _WarpCall()
        call.a[lane], call.b[lane], call.c[lane] = a_regs, b_regs, c_regs
        call.arrived += 1
        last = call.arrived == 32
    if last:
        try:
            call.d = product(call.a, call.b, call.c)
        finally:
            call.done.set()  # on an error the other lanes find no product and raise too
    while not call.done.wait(0.05):
        if thread.abort:  # another thread of the block failed: this warp will never be complete
            raise RuntimeError("block aborted while this lane waited in mma")
    if call.d is None:
        raise RuntimeError("the warp's mma failed in another lane")
    out = tuple(call.d[C_ROWS[4 * lane + i], C_COLS[4 * lane + i]] for i in range(4))
    with _calls_lock:
        call.left += 1
        if call.left == 32:
            del _calls[key]
    return out


def simulated_mma_s8_16832(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    return _warp_call(_s8_product, (a0, a1, a2, a3), (b0, b1), (c0, c1, c2, c3))


def simulated_mma_tf32_1688(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    return _warp_call(_tf32_product, (a0, a1, a2, a3), (b0, b1), (c0, c1, c2, c3))


def simulated_to_tf32(x):
    return np.float32(round_tf32(x))


def _float_mma_codegen(instruction):
    """The codegen of a float `mma.sync` instruction with fp32 accumulators: A (4) and B (2) registers arrive
    as float32 bit patterns; C is tied to D ("0".."3"), so the accumulators stay in their registers from one
    mma to the next."""
    from llvmlite import ir

    i32, f32 = ir.IntType(32), ir.FloatType()
    asm = instruction + " {$0,$1,$2,$3}, {$4,$5,$6,$7}, {$8,$9}, {$10,$11,$12,$13};"

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.LiteralStructType([f32] * 4), [i32] * 6 + [f32] * 4)
        operands = [builder.bitcast(v, i32) for v in args[:6]] + list(args[6:])
        call = builder.call(ir.InlineAsm(fnty, asm, "=f,=f,=f,=f," + ",".join(["r"] * 6 + list("0123"))), operands)
        values = [builder.extract_value(call, i) for i in range(4)]
        return context.make_tuple(builder, signature.return_type, values)

    return codegen


def _build_intrinsics():
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    i32 = ir.IntType(32)

    @intrinsic
    def mma_s8_16832(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        sig = types.UniTuple(types.int32, 4)(*([types.int32] * 10))

        def codegen(context, builder, signature, args):
            fnty = ir.FunctionType(ir.LiteralStructType([i32] * 4), [i32] * 10)
            asm = ("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
                   "{$0,$1,$2,$3}, {$4,$5,$6,$7}, {$8,$9}, {$10,$11,$12,$13};")
            call = builder.call(ir.InlineAsm(fnty, asm, "=r,=r,=r,=r," + ",".join(["r"] * 10)), list(args))
            words4 = [builder.extract_value(call, i) for i in range(4)]
            return context.make_tuple(builder, signature.return_type, words4)

        return sig, codegen

    @intrinsic
    def mma_tf32_1688(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        sig = types.UniTuple(types.float32, 4)(*([types.float32] * 10))

        return sig, _float_mma_codegen("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32")

    @intrinsic
    def to_tf32(typingctx, x):
        sig = types.float32(types.float32)

        def codegen(context, builder, signature, args):
            fnty = ir.FunctionType(i32, [ir.FloatType()])
            bits = builder.call(ir.InlineAsm(fnty, "cvt.rna.tf32.f32 $0, $1;", "=r,f"), list(args))
            return builder.bitcast(bits, ir.FloatType())

        return sig, codegen

    return mma_s8_16832, mma_tf32_1688, to_tf32


if SIMULATED:
    mma_s8_16832, mma_tf32_1688, to_tf32 = simulated_mma_s8_16832, simulated_mma_tf32_1688, simulated_to_tf32
else:
    mma_s8_16832, mma_tf32_1688, to_tf32 = _build_intrinsics()


# ---- bf16: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 --------------------------------------
#
#     d0, d1, d2, d3 = mma_bf16_16816(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)
#     p = pack_bf16x2(lo, hi)        # two fp32 values rounded to bf16 (cvt.rn: nearest, ties to even)
#
# D (16x8, fp32) = A (16x16) @ B (16x8) + C over one warp (SASS HMMA.16816.F32.BF16). A register holds
# two bf16, the lower half first (PTX ISA, "Matrix Fragments for mma.m16n8k16", .bf16):
#
#     a0: A[g, 2q : 2q+2]      a1: A[g + 8, 2q : 2q+2]      a2: A[g, 2q+8 : 2q+10]    a3: A[g + 8, 2q+8 : 2q+10]
#     b0: B[2q : 2q+2, g]      b1: B[2q+8 : 2q+10, g]       c0..c3: as for the int8 layout
#
# The pairs travel in float32 registers (bit patterns, never used as floats), so the float32 vector
# loads and stores of `loads` move them. Simulated, the products of bf16 values are exact in float64 and
# the sum is rounded to fp32 once; the hardware adds with its own order and rounding (it truncates while
# aligning the products), so the two agree to fp32 accumulation error, as for TF32.

BF16_K = 16


def round_bf16(x):
    """float32 values rounded to bfloat16 as cvt.rn.bf16.f32 does, returned as float32: to the nearest
    8-bit significand, ties to even; subnormals rounded the same way (no flush), overflow past the
    largest bf16 goes to inf, inf stays inf, every NaN becomes the canonical NaN 0x7FFF."""
    x = np.asarray(x, np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return np.where(np.isnan(x), np.uint32(0x7FFF0000), rounded).view(np.float32)


def _bf16_fragment_maps():
    """Where each bf16 half of each lane's registers sits in A (16x16) and B (16x8), as index arrays in
    (lane, register, half) order: the layout above, written once."""
    a_rows, a_cols, b_rows, b_cols = [], [], [], []
    for lane in range(32):
        g, q = lane // 4, lane % 4
        for row, col in ((g, 2 * q), (g + 8, 2 * q), (g, 2 * q + 8), (g + 8, 2 * q + 8)):
            a_rows += [row, row]
            a_cols += [col, col + 1]
        for k in (2 * q, 2 * q + 8):
            b_rows += [k, k + 1]
            b_cols += [g, g]
    return tuple(np.array(v) for v in (a_rows, a_cols, b_rows, b_cols))


BF16_A_ROWS, BF16_A_COLS, BF16_B_ROWS, BF16_B_COLS = _bf16_fragment_maps()


def _halves(registers):
    """The bf16 halves of 32-bit registers (float32 carriers, any nesting) as float64, lower half first."""
    words = np.array(registers, np.float32).ravel().view(np.uint32)
    pairs = np.stack([words << 16, words & 0xFFFF0000], axis=1).astype(np.uint32)
    return pairs.view(np.float32).ravel().astype(np.float64)


def bf16_fragments_to_matrices(a_regs, b_regs):
    """A (16x16) and B (16x8) in float64 from the 32 lanes' bf16 pairs: a_regs (32, 4), b_regs (32, 2)."""
    a = np.zeros((MMA_M, BF16_K))
    b = np.zeros((BF16_K, MMA_N))
    a[BF16_A_ROWS, BF16_A_COLS] = _halves(a_regs)
    b[BF16_B_ROWS, BF16_B_COLS] = _halves(b_regs)
    return a, b


def _bf16_product(a_regs, b_regs, c_regs):
    a, b = bf16_fragments_to_matrices(a_regs, b_regs)
    d = a @ b
    d[C_ROWS, C_COLS] += np.array(c_regs, dtype=np.float32).ravel()
    return d.astype(np.float32)


def simulated_mma_bf16_16816(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    return _warp_call(_bf16_product, (a0, a1, a2, a3), (b0, b1), (c0, c1, c2, c3))


def simulated_pack_bf16x2(lo, hi):
    words = round_bf16(np.array([lo, hi], np.float32)).view(np.uint32) >> 16
    return np.uint32(words[0] | (words[1] << 16)).view(np.float32)


def _build_bf16_intrinsics():
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    i32, f32 = ir.IntType(32), ir.FloatType()

    @intrinsic
    def mma_bf16_16816(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        sig = types.UniTuple(types.float32, 4)(*([types.float32] * 10))

        return sig, _float_mma_codegen("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")

    @intrinsic
    def pack_bf16x2(typingctx, lo, hi):
        sig = types.float32(types.float32, types.float32)

        def codegen(context, builder, signature, args):
            # cvt.rn.bf16x2.f32 d, a, b puts a in the upper half, b in the lower
            fnty = ir.FunctionType(i32, [f32, f32])
            bits = builder.call(ir.InlineAsm(fnty, "cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,f,f"), list(args))
            return builder.bitcast(bits, f32)

        return sig, codegen

    return mma_bf16_16816, pack_bf16x2


if SIMULATED:
    mma_bf16_16816, pack_bf16x2 = simulated_mma_bf16_16816, simulated_pack_bf16x2
else:
    mma_bf16_16816, pack_bf16x2 = _build_bf16_intrinsics()
