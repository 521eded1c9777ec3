"""Branch-free float32 exp, sigmoid and tanh for the CPU twins, which LLVM vectorises in the loops
that call them (libm's expf and tanhf are scalar calls: tanhf alone costs about 21 ns an element,
these about 3 ns in a vectorised loop).

    exp32(x)       Cephes' expf: x = n ln2 + r, |r| <= ln2 / 2, degree-6 polynomial, times 2^n built
                   from its bits; x clamped to [-87, 88] (so exp32(-inf) is 1.6e-38, not 0)
    sigmoid32(x)   1 / (1 + exp32(-x))
    tanh32(x)      Cephes' tanhf polynomial for |x| < 0.625, 1 - 2 / (exp32(2|x|) + 1) beyond
    erfc32(x)      Numerical Recipes' Chebyshev fit t exp(-x^2 + P(t)), t = 1 / (1 + |x| / 2) (relative
                   error 1.2e-7 in exact arithmetic, both tails), 2 - erfc32(-x) for x < 0
    normal_cdf32(x)  Phi(x) = erfc32(-x / sqrt 2) / 2: relative accuracy in the lower tail, no 1 + erf
                   cancellation

More in docs/internals.md (kernels/core/cpu_vector_math.py)."""


import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

_F = np.float32


@intrinsic
def _float_from_bits(typingctx, bits):
    """The float32 whose IEEE bits are the int32 `bits` (a bitcast, which vectorises)."""
    sig = types.float32(types.int32)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return sig, codegen


def _vector(function):
    return numba.njit(inline="always", error_model="numpy")(function)


@_vector
def exp32(x):
    x = _F(88.0) if x > _F(88.0) else x
    x = _F(-87.0) if x < _F(-87.0) else x
    n = np.floor(x * _F(1.44269504088896341) + _F(0.5))  # float32 (math.floor would give an int64)
    r = x - n * _F(0.693359375) + n * _F(2.12194440e-4)
    p = (((((_F(1.9875691500e-4) * r + _F(1.3981999507e-3)) * r + _F(8.3334519073e-3)) * r
           + _F(4.1665795894e-2)) * r + _F(1.6666665459e-1)) * r + _F(5.0000001201e-1)) * (r * r) + r + _F(1.0)
    return p * _float_from_bits((np.int32(n) + np.int32(127)) << np.int32(23))


@_vector
def sigmoid32(x):
    return _F(1.0) / (_F(1.0) + exp32(-x))


@_vector
def tanh32(x):
    a = abs(x)
    z = x * x
    small = ((((_F(-5.70498872745e-3) * z + _F(2.06390887954e-2)) * z - _F(5.37397155531e-2)) * z
              + _F(1.33314422036e-1)) * z - _F(3.33332819422e-1)) * z * x + x
    big = _F(1.0) - _F(2.0) / (exp32(a + a) + _F(1.0))
    big = big if x >= _F(0.0) else -big
    return small if a < _F(0.625) else big


@_vector
def erfc32(x):
    z = abs(x)
    t = _F(1.0) / (_F(1.0) + _F(0.5) * z)
    p = (t * (_F(1.00002368) + t * (_F(0.37409196) + t * (_F(0.09678418) + t * (_F(-0.18628806) + t * (
        _F(0.27886807) + t * (_F(-1.13520398) + t * (_F(1.48851587) + t * (_F(-0.82215223)
                                                                         + t * _F(0.17087277))))))))))
    r = t * exp32(p - z * z - _F(1.26551223))
    return r if x >= _F(0.0) else _F(2.0) - r


@_vector
def normal_cdf32(x):
    return _F(0.5) * erfc32(x * _F(-0.70710678118654752))
