"""Element-wise activations (fp32), forward and backward, over arrays of any shape (flattened: one
thread per element on the GPU):

    gelu:        y = x Phi(x), exact (erf);  gelu_backward(dy, x) = dy (Phi(x) + x phi(x))
    activation:  sigmoid (kind SIGMOID) or tanh (kind TANH);  activation_backward(dy, y, kind) takes
                 the output y: dy y (1 - y) or dy (1 - y^2)

The scalar math is written once and compiled for both the CPU twin and the GPU, except the CPU twin's
GELU, which uses cpu_vector_math's vectorisable normal CDF. References compute in float64; twins agree to
1e-5 relative + 1e-6 absolute.
"""

import math

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Float64Array, FloatArray
from eggnog.kernels.core.cpu_jit import parallel_jit
from eggnog.kernels.core.cpu_vector_math import exp32, normal_cdf32
from eggnog.kernels.core.cuda_api import F32_1D, I32, blocks, cuda, device_function, f64, flat, kernel
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import op, registered

SIGMOID, TANH = 0, 1
INV_SQRT2 = 1.0 / math.sqrt(2.0)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
TOLERANCE = (1e-5, 1e-6)


def _build(jit):
    @jit
    def gelu(x):
        return np.float32(0.5) * x * (np.float32(1.0) + math.erf(x * np.float32(INV_SQRT2)))

    @jit
    def gelu_slope(x):
        cdf = np.float32(0.5) * (np.float32(1.0) + math.erf(x * np.float32(INV_SQRT2)))
        return cdf + x * np.float32(INV_SQRT_2PI) * math.exp(np.float32(-0.5) * x * x)

    @jit
    def activate(x, kind):
        if kind == SIGMOID:
            return np.float32(1.0) / (np.float32(1.0) + math.exp(-x))
        return math.tanh(x)

    @jit
    def activate_slope(y, kind):
        if kind == SIGMOID:
            return y * (np.float32(1.0) - y)
        return np.float32(1.0) - y * y

    return gelu, gelu_slope, activate, activate_slope


_, _, _activate_cpu, _activate_slope_cpu = _build(numba.njit)
_gelu_gpu, _gelu_slope_gpu, _activate_gpu, _activate_slope_gpu = _build(device_function)


def _shapes(rng):
    """One element, a partial block and several blocks of 256 threads (as 1-D, 2-D and 3-D arrays)."""
    for shape in ((1,), (3, 85), (2, 3, 50)):
        yield (rng.normal(size=shape) * 3.0).astype(np.float32)


def _check_kind(kind):
    if kind not in (SIGMOID, TANH):
        raise ValueError(f"activation kind {kind} is neither SIGMOID ({SIGMOID}) nor TANH ({TANH})")


# ---- GELU (exact) ------------------------------------------------------------------------------------

def _gelu_cases(rng):
    yield from ((x,) for x in _shapes(rng))


def _gelu_backward_cases(rng):
    for x in _shapes(rng):
        yield rng.normal(size=x.shape).astype(np.float32), x


def _erf64(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


@op(cases=_gelu_cases, tolerance=TOLERANCE, args={"x": "float[*shape]"})
def reference_gelu(x: FloatArray) -> Float64Array:
    """The exact GELU, x Phi(x) with Phi the standard normal CDF (erf), element by element: a float32 array
    of x's shape (float64 here). x: a float array of any shape (the MinGRU LM's feed-forward rows)."""
    x = f64(x)
    return 0.5 * x * (1.0 + _erf64(x * INV_SQRT2))


@op(cases=_gelu_backward_cases, tolerance=TOLERANCE, args={"dy": "float[*shape]", "x": "float[*shape]"})
def reference_gelu_backward(dy: FloatArray, x: FloatArray) -> Float64Array:
    """The gradient through gelu: dy (Phi(x) + x phi(x)), of x's shape, float32 (float64 here).

    dy: the loss's gradient with respect to gelu(x); x: gelu's input (not its output), of dy's shape."""
    x = f64(x)
    return f64(dy) * (0.5 * (1.0 + _erf64(x * INV_SQRT2)) + x * INV_SQRT_2PI * np.exp(-0.5 * x * x))


# The CPU twin's GELU uses cpu_vector_math's normal CDF and exp, which LLVM vectorises (libm's erff is a
# scalar call); error_model="numpy" keeps a division check from blocking that.
@parallel_jit(error_model="numpy")
def _cpu_gelu(x, y):
    for i in numba.prange(x.size):
        y[i] = x[i] * normal_cdf32(x[i])


@parallel_jit(error_model="numpy")
def _cpu_gelu_backward(dy, x, dx):
    for i in numba.prange(x.size):
        v = x[i]
        dx[i] = dy[i] * (normal_cdf32(v) + v * np.float32(INV_SQRT_2PI) * exp32(np.float32(-0.5) * v * v))


@op
def cpu_gelu(x: Float32Array) -> Float32Array:
    y = np.empty(x.shape, x.dtype)
    _cpu_gelu(flat(x), flat(y))
    return y


@op
def cpu_gelu_backward(dy: Float32Array, x: Float32Array) -> Float32Array:
    dx = np.empty(x.shape, x.dtype)
    _cpu_gelu_backward(flat(dy), flat(x), flat(dx))
    return dx


@kernel((F32_1D, F32_1D))
def gelu_cuda(x, y):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = _gelu_gpu(x[i])


@kernel((F32_1D, F32_1D, F32_1D))
def gelu_backward_cuda(dy, x, dx):
    i = cuda.grid(1)
    if i < x.size:
        dx[i] = dy[i] * _gelu_slope_gpu(x[i])


@op
def cuda_gelu(x: BackendArray) -> BackendArray:
    y = cuda.device_array(x.shape, np.float32)
    gelu_cuda[blocks(x.size)](flat(x), flat(y))
    return y


@op
def cuda_gelu_backward(dy: BackendArray, x: BackendArray) -> BackendArray:
    dx = cuda.device_array(x.shape, np.float32)
    gelu_backward_cuda[blocks(x.size)](flat(dy), flat(x), flat(dx))
    return dx


# ---- sigmoid / tanh --------------------------------------------------------------------------------

def _activation_cases(rng):
    for x in _shapes(rng):
        for kind in (SIGMOID, TANH):
            yield x, kind


def _activation_backward_cases(rng):
    for x, kind in _activation_cases(rng):
        yield rng.normal(size=x.shape).astype(np.float32), reference_activation(x, kind).astype(np.float32), kind


@op(cases=_activation_cases, tolerance=TOLERANCE, args={"x": "float[*shape]", "kind": "int"})
def reference_activation(x: FloatArray, kind: int) -> Float64Array:
    """sigmoid(x) or tanh(x) element by element, a float32 array of x's shape (float64 here).

    x: a float array of any shape; kind: SIGMOID (0) or TANH (1), this module's constants."""
    _check_kind(kind)
    x = f64(x)
    return 1.0 / (1.0 + np.exp(-x)) if kind == SIGMOID else np.tanh(x)


@op(cases=_activation_backward_cases, tolerance=TOLERANCE,
    args={"dy": "float[*shape]", "y": "float[*shape]", "kind": "int"})
def reference_activation_backward(dy: FloatArray, y: FloatArray, kind: int) -> Float64Array:
    """The gradient through activation, from its output: dy y (1 - y) for SIGMOID, dy (1 - y^2) for TANH,
    of y's shape, float32 (float64 here).

    dy: the loss's gradient with respect to y; y: the activation's output (not its input), of dy's shape;
    kind: SIGMOID (0) or TANH (1), as in the forward."""
    _check_kind(kind)
    y = f64(y)
    return f64(dy) * (y * (1.0 - y) if kind == SIGMOID else 1.0 - y * y)


@parallel_jit
def _cpu_activation(x, y, kind):
    for i in numba.prange(x.size):
        y[i] = _activate_cpu(x[i], kind)


@parallel_jit
def _cpu_activation_backward(dy, y, dx, kind):
    for i in numba.prange(y.size):
        dx[i] = dy[i] * _activate_slope_cpu(y[i], kind)


@op
def cpu_activation(x: Float32Array, kind: int) -> Float32Array:
    _check_kind(kind)
    y = np.empty(x.shape, x.dtype)
    _cpu_activation(flat(x), flat(y), np.int32(kind))
    return y


@op
def cpu_activation_backward(dy: Float32Array, y: Float32Array, kind: int) -> Float32Array:
    _check_kind(kind)
    dx = np.empty(y.shape, y.dtype)
    _cpu_activation_backward(flat(dy), flat(y), flat(dx), np.int32(kind))
    return dx


@kernel((F32_1D, F32_1D, I32))
def activation_cuda(x, y, kind):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = _activate_gpu(x[i], kind)


@kernel((F32_1D, F32_1D, F32_1D, I32))
def activation_backward_cuda(dy, y, dx, kind):
    i = cuda.grid(1)
    if i < y.size:
        dx[i] = dy[i] * _activate_slope_gpu(y[i], kind)


@op
def cuda_activation(x: BackendArray, kind: int) -> BackendArray:
    _check_kind(kind)
    y = cuda.device_array(x.shape, np.float32)
    activation_cuda[blocks(x.size)](flat(x), flat(y), np.int32(kind))
    return y


@op
def cuda_activation_backward(dy: BackendArray, y: BackendArray, kind: int) -> BackendArray:
    _check_kind(kind)
    dx = cuda.device_array(y.shape, np.float32)
    activation_backward_cuda[blocks(y.size)](flat(dy), flat(y), flat(dx), np.int32(kind))
    return dx

# the ops of this module by name, for callers: activation(kernels, ...)
activation = registered(reference_activation)
activation_backward = registered(reference_activation_backward)
gelu = registered(reference_gelu)
gelu_backward = registered(reference_gelu_backward)
