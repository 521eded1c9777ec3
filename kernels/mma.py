"""Warp-level int8 tensor-core product and 128-bit loads, as CUDA device functions.

    d0, d1, d2, d3 = mma_s8_16832(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)
    w0, w1, w2, w3 = load_global_v4(words, index)      # words[index:index + 4], index % 4 == 0
    w0, w1, w2, w3 = load_shared_v4(words, index)      # the same from a shared array (one LDS.128)

`mma_s8_16832` is PTX `mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32` (SASS IMMA.16832.S8.S8):
D (16x8, int32) = A (16x32, int8) @ B (32x8, int8) + C over one warp. Registers hold four int8 each,
lowest byte first. Fragment layout (PTX ISA, "Matrix Fragments for mma.m16n8k32", .s8), with
g = lane // 4 and q = lane % 4:

    a0: A[g,     4q : 4q+4]     a1: A[g + 8, 4q : 4q+4]
    a2: A[g, 16+4q : 20+4q]     a3: A[g + 8, 16+4q : 20+4q]
    b0: B[4q : 4q+4, g]         b1: B[16+4q : 20+4q, g]
    c0, c1: C[g, 2q], C[g, 2q+1]      c2, c3: C[g + 8, 2q], C[g + 8, 2q+1]

numba's simulator cannot run inline PTX, so under NUMBA_ENABLE_CUDASIM=1 both functions are Python:
the simulated mma gathers the 32 lanes' fragment registers once all 32 have arrived, builds A and B
from the layout above, and hands each lane its C fragment, exactly as the hardware distributes it.
Kernels that call it are therefore tested on their fragment loads and stores too.
"""

import threading

import numpy as np

from eggnog.kernels.cuda_api import SIMULATED

MMA_M, MMA_N, MMA_K = 16, 8, 32


def _fragment_maps():
    """Where each byte of each lane's registers sits in A and B, and where each C element sits, as
    index arrays in (lane, register, byte) order: the layout above, written once."""
    a_rows, a_cols, b_rows, b_cols, c_rows, c_cols = [], [], [], [], [], []
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


A_ROWS, A_COLS, B_ROWS, B_COLS, C_ROWS, C_COLS = _fragment_maps()


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


def c_positions(lane):
    """(row, col) of c0..c3 in the 16x8 result for one lane."""
    return tuple(zip(C_ROWS[4 * lane:4 * lane + 4].tolist(), C_COLS[4 * lane:4 * lane + 4].tolist()))


class _WarpCall:
    """One mma of one simulated warp: the lanes' registers, complete when the 32nd lane arrives."""

    def __init__(self):
        self.a, self.b, self.c = [None] * 32, [None] * 32, [None] * 32
        self.arrived = self.left = 0
        self.done = threading.Event()
        self.d = None


_calls = {}
_calls_lock = threading.Lock()


def _warp_product(call):
    a, b = fragments_to_matrices(call.a, call.b)
    d = a @ b
    d[C_ROWS, C_COLS] += np.array(call.c, dtype=np.int64).ravel()
    return (d & 0xFFFFFFFF).astype(np.uint32).view(np.int32)  # wrapped to 32 bits, as the hardware does


def simulated_mma_s8_16832(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    thread = threading.current_thread()
    lane = thread.thread_id % 32
    # a lane's n-th mma meets the other lanes' n-th: mma.sync requires the warp to call it in step
    n = getattr(thread, "mma_calls", 0)
    thread.mma_calls = n + 1
    key = (thread._manager, thread.thread_id // 32, n)
    with _calls_lock:
        call = _calls.get(key)
        if call is None:
            call = _calls[key] = _WarpCall()
        call.a[lane], call.b[lane], call.c[lane] = (a0, a1, a2, a3), (b0, b1), (c0, c1, c2, c3)
        call.arrived += 1
        last = call.arrived == 32
    if last:
        try:
            call.d = _warp_product(call)
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


def simulated_load_v4(words, index):
    return words[index], words[index + 1], words[index + 2], words[index + 3]


def _build_intrinsics():
    from llvmlite import ir
    from numba.core import types
    from numba.cuda.cgutils import get_item_pointer
    from numba.cuda.extending import intrinsic

    i32 = ir.IntType(32)

    def element_pointer(context, builder, signature, args):
        array_type, _ = signature.args
        array, idx = args
        ary = context.make_array(array_type)(context, builder, value=array)
        return get_item_pointer(context, builder, array_type, ary, [idx], wraparound=False)

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
    def load_global_v4(typingctx, words, index):
        """ld.global.nc.v4: four int32 words of a read-only array, 16-byte aligned by the caller."""
        sig = types.UniTuple(types.int32, 4)(words, types.int64)

        def codegen(context, builder, signature, args):
            fnty = ir.FunctionType(ir.LiteralStructType([i32] * 4), [i32.as_pointer()])
            asm = "ld.global.nc.v4.u32 {$0,$1,$2,$3}, [$4];"
            pointer = element_pointer(context, builder, signature, args)
            call = builder.call(ir.InlineAsm(fnty, asm, "=r,=r,=r,=r,l"), [pointer])
            words4 = [builder.extract_value(call, i) for i in range(4)]
            return context.make_tuple(builder, signature.return_type, words4)

        return sig, codegen

    @intrinsic
    def load_shared_v4(typingctx, words, index):
        """Four int32 words of a shared array as one 16-byte vector load (LDS.128), 16-byte aligned by the
        caller: the compiler cannot prove the alignment of a dynamic shared array by itself."""
        sig = types.UniTuple(types.int32, 4)(words, types.int64)

        def codegen(context, builder, signature, args):
            ptr = element_pointer(context, builder, signature, args)
            shared = builder.addrspacecast(ptr, ir.PointerType(i32, addrspace=3))
            vector = builder.load(builder.bitcast(shared, ir.PointerType(ir.VectorType(i32, 4), addrspace=3)),
                                  align=16)
            words4 = [builder.extract_element(vector, ir.Constant(i32, k)) for k in range(4)]
            return context.make_tuple(builder, signature.return_type, words4)

        return sig, codegen

    return mma_s8_16832, load_global_v4, load_shared_v4


if SIMULATED:
    mma_s8_16832, load_global_v4, load_shared_v4 = simulated_mma_s8_16832, simulated_load_v4, simulated_load_v4
else:
    mma_s8_16832, load_global_v4, load_shared_v4 = _build_intrinsics()
