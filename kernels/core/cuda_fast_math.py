"""Approximate float32 arithmetic for CUDA device code, without the IEEE slow paths:

    r = reciprocal_approx(x)     PTX rcp.approx.f32: at most 1 ulp from 1 / x over the whole range
                                 (PTX ISA), subnormal results kept, 1 / inf = 0

A correctly rounded fp32 division compiles to a call with a slow path for operands near the ends of
the exponent range; a sigmoid 1 / (1 + exp(-x)) pays for it on every element. On numba's simulator
(NUMBA_ENABLE_CUDASIM=1), which cannot run inline PTX, the reciprocal is the exact fp32 one: the
simulator checks the kernels' logic, tests/gpu their accuracy with the approximation.
"""

import numpy as np

from eggnog.kernels.core.cuda_api import SIMULATED


def _simulated_reciprocal(x):
    with np.errstate(divide="ignore"):
        return np.float32(1.0) / np.float32(x)


def _build():
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def reciprocal_approx(typingctx, x):
        sig = types.float32(types.float32)

        def codegen(context, builder, signature, args):
            f32 = ir.FloatType()
            return builder.call(ir.InlineAsm(ir.FunctionType(f32, [f32]), "rcp.approx.f32 $0, $1;", "=f,f"),
                                list(args))

        return sig, codegen

    return reciprocal_approx


reciprocal_approx = _simulated_reciprocal if SIMULATED else _build()
