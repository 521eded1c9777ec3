"""Four int8 lanes of a 32-bit word at once, as CUDA device functions.

    acc = dp4a(a, b, acc)        acc + sum_k a.byte[k] * b.byte[k], bytes signed (PTX dp4a.s32.s32, IDP.4A)
    acc = abs_sum4(a, acc)       acc + sum_k |a.byte[k]|
    w = pack4(v0, v1, v2, v3)    the int32 word of four int8 values, v0 the lowest byte
    v = byte_of(w, k)            the signed byte k of a word
    y = sar32(x, n)              x >> n in 32 bits for a shift n known only at run time (numba widens int32
                                 arithmetic to 64 bits, and a variable shift keeps it there)
    n = opaque(n)                n, through an instruction the compiler cannot see through (an int32 loop
                                 counter stepped through it keeps the loop from being unrolled)

Words hold four int8 values lowest byte first, as int8 arrays viewed as int32 lay them out. Under
NUMBA_ENABLE_CUDASIM=1 dp4a is Python over the four bytes; the others are the same code everywhere.
"""

import numpy as np

from eggnog.kernels.core.cuda_api import SIMULATED, device_function

LOW_BITS = 0x01010101


def simulated_dp4a(a, b, c):
    x = np.array([a], np.int32).view(np.int8).astype(np.int64)
    y = np.array([b], np.int32).view(np.int8).astype(np.int64)
    return np.int32(np.int64(c) + int((x * y).sum()))


def simulated_opaque(n):
    return n


def simulated_sar32(x, n):
    return np.int32(int(x) >> int(n))


def _build_intrinsics():
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def dp4a(typingctx, a, b, c):
        sig = types.int32(types.int32, types.int32, types.int32)

        def codegen(context, builder, signature, args):
            i32 = ir.IntType(32)
            fnty = ir.FunctionType(i32, [i32] * 3)
            return builder.call(ir.InlineAsm(fnty, "dp4a.s32.s32 $0, $1, $2, $3;", "=r,r,r,r"), list(args))

        return sig, codegen

    @intrinsic
    def opaque(typingctx, n):
        sig = types.int32(types.int32)

        def codegen(context, builder, signature, args):
            i32 = ir.IntType(32)
            return builder.call(ir.InlineAsm(ir.FunctionType(i32, [i32]), "mov.b32 $0, $1;", "=r,r", side_effect=True),
                                list(args))

        return sig, codegen

    @intrinsic
    def sar32(typingctx, x, n):
        sig = types.int32(types.int32, types.int32)

        def codegen(context, builder, signature, args):
            return builder.ashr(*args)

        return sig, codegen

    return dp4a, opaque, sar32


dp4a, opaque, sar32 = (simulated_dp4a, simulated_opaque, simulated_sar32) if SIMULATED else _build_intrinsics()


@device_function
def abs_sum4(a, acc):
    """acc + the sum of |byte| over a word: dp4a of the word with its bytes' signs (+1 or -1), which are
    the sign bits moved to bit 0 of each byte, spread to 0xFF where set, or'ed with 1."""
    negative = (np.int64(a) >> 7) & LOW_BITS
    return dp4a(np.int32(a), np.int32((negative * 255) | LOW_BITS), np.int32(acc))


@device_function
def byte_of(w, k):
    """The signed byte k (0..3) of a 32-bit word."""
    return np.int32(np.int8(np.int64(w) >> (8 * k)))


@device_function
def pack4(v0, v1, v2, v3):
    """int8 values (each in -128..127) packed into one int32 word, v0 the lowest byte."""
    word = (np.int64(v0) & 255) | ((np.int64(v1) & 255) << 8) | ((np.int64(v2) & 255) << 16) | (np.int64(v3) << 24)
    return np.int32(word)
