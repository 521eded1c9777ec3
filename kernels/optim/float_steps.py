"""One optimiser step over a flat float32 parameter vector and its state, in place, where the vectors
live (training/optimizers.py holds the step counters and calls these), so a GPU step moves no
parameters to the host:

    sgd_step_(p, buf, grad, lr, momentum, weight_decay, first)                    -> p, buf
    adamw_step_(p, m, v, grad, lr, beta1, beta2, eps, weight_decay, k)            -> p, m, v   (k from 1)
    sf_adamw_step_(y, z, v, grad, lr, c, beta1, beta2, eps, weight_decay, k)      -> y, z, v   (k from 0)
    sf_adamw_eval(y, z, beta1)                                                    -> x

The update rules are training/optimizers.py's (PyTorch SGD and AdamW; Schedule-Free AdamW with lr
after warmup and the averaging weight c computed there). Scalar coefficients are computed in float64
on the host and rounded to float32 once. The references compute in float64; the CPU twins repeat,
element by element, the float32 operation order of NumPy array code (one rounding per operation, as
`p -= lr * buf` would), the CUDA kernels the same order with FMA contraction: they agree with the
reference to (2e-6 relative, 1e-7 absolute) at the cases' sizes.
"""

import math

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Float64Array, FloatArray
from eggnog.kernels.core.cpu_jit import parallel_jit
from eggnog.kernels.core.cuda_api import BOOL, F32, F32_1D, blocks, cuda, f64, kernel, require
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import normal32, op, registered

TOLERANCE = (2e-6, 1e-7)
MAX_BLOCKS = 4096  # grid-stride kernels: enough blocks to fill a GPU, then each thread loops


def _check(*arrays):
    n = arrays[0].shape
    require(all(len(a.shape) == 1 and a.shape == n for a in arrays),
            f"an optimiser step takes flat vectors of one length, got shapes {[tuple(a.shape) for a in arrays]}")


def _adamw_scalars(lr, beta1, beta2, eps, weight_decay, k):
    return (1 - lr * weight_decay, beta1, 1 - beta1, beta2, 1 - beta2, math.sqrt(1 - beta2 ** k), eps,
            lr / (1 - beta1 ** k))


def _sf_scalars(lr, c, beta1, beta2, eps, weight_decay, k):
    return beta2, 1 - beta2, 1 - beta2 ** (k + 1), eps, weight_decay, 1 - c, c, lr * (beta1 * (1 - c) - 1), lr


# ---- cases ---------------------------------------------------------------------------------------------

N = 300  # three 128-thread blocks, the last one partial


def _state(rng):
    return normal32(rng, N), normal32(rng, N, scale=0.1), np.abs(normal32(rng, N, scale=0.01)), normal32(rng, N)


def _sgd_cases(rng):
    for first, weight_decay in ((True, 0.0), (False, 0.01)):
        p, buf, _, grad = _state(rng)
        yield p, buf, grad, 0.05, 0.9, weight_decay, first


def _adamw_cases(rng):
    for k, weight_decay in ((1, 0.0), (7, 0.01)):
        p, m, v, grad = _state(rng)
        yield p, m, v, grad, 1e-3, 0.9, 0.999, 1e-8, weight_decay, k


def _sf_cases(rng):
    for k, c, weight_decay in ((0, 1.0, 0.0), (9, 0.1, 0.01)):
        y, z, v, grad = _state(rng)
        yield y, z, v, grad, 2.5e-3, c, 0.9, 0.999, 1e-8, weight_decay, k


def _eval_cases(rng):
    yield normal32(rng, N), normal32(rng, N), 0.9


# ---- NumPy references (float64) -----------------------------------------------------------------------

VECTOR = "float[n]"


@op(cases=_sgd_cases, tolerance=TOLERANCE,
    args={"p": VECTOR, "buf": VECTOR, "grad": VECTOR, "lr": "float", "momentum": "float", "weight_decay": "float",
          "first": "bool"})
def reference_sgd_step_(p: FloatArray, buf: FloatArray, grad: FloatArray, lr: float, momentum: float,
                        weight_decay: float, first: bool) -> tuple[Float32Array, Float32Array]:
    """(p, buf), both updated in place: one step of PyTorch's SGD with momentum and L2 weight decay,
    g = grad + weight_decay p, buf = g at the first step else momentum buf + g, p -= lr buf.

    p: the flat parameters. buf: the momentum buffer (read only after the first step). grad: the loss's
    gradient at p. lr, momentum, weight_decay: the optimiser's settings. first: whether this is the first
    step (training/optimizers.py's counter at 0), which starts the buffer at g."""
    _check(p, buf, grad)
    g = f64(grad) + weight_decay * f64(p)
    b = g if first else momentum * f64(buf) + g
    p[...], buf[...] = f64(p) - lr * b, b
    return p, buf


@op(cases=_adamw_cases, tolerance=TOLERANCE,
    args={"p": VECTOR, "m": VECTOR, "v": VECTOR, "grad": VECTOR, "lr": "float", "beta1": "float", "beta2": "float",
          "eps": "float", "weight_decay": "float", "k": "int"})
def reference_adamw_step_(p: FloatArray, m: FloatArray, v: FloatArray, grad: FloatArray, lr: float, beta1: float,
                          beta2: float, eps: float, weight_decay: float,
                          k: int) -> tuple[Float32Array, Float32Array, Float32Array]:
    """(p, m, v), updated in place: step k of PyTorch's AdamW (decoupled decay, bias-corrected moments),
    m = beta1 m + (1 - beta1) g, v = beta2 v + (1 - beta2) g^2,
    p = p (1 - lr weight_decay) - lr / (1 - beta1^k) m / (sqrt(v) / sqrt(1 - beta2^k) + eps).

    p: the flat parameters; m, v: the moment estimates (zeros before the first step); grad: the loss's
    gradient at p. lr, beta1, beta2, eps, weight_decay: the optimiser's settings. k: the step's number,
    counted from 1 (the bias corrections' exponent)."""
    _check(p, m, v, grad)
    g = f64(grad)
    m_new = beta1 * f64(m) + (1 - beta1) * g
    v_new = beta2 * f64(v) + (1 - beta2) * g * g
    denom = np.sqrt(v_new) / math.sqrt(1 - beta2 ** k) + eps
    p[...] = f64(p) * (1 - lr * weight_decay) - lr / (1 - beta1 ** k) * m_new / denom
    m[...], v[...] = m_new, v_new
    return p, m, v


@op(cases=_sf_cases, tolerance=TOLERANCE,
    args={"y": VECTOR, "z": VECTOR, "v": VECTOR, "grad": VECTOR, "lr": "float", "c": "float", "beta1": "float",
          "beta2": "float", "eps": "float", "weight_decay": "float", "k": "int"})
def reference_sf_adamw_step_(y: FloatArray, z: FloatArray, v: FloatArray, grad: FloatArray, lr: float, c: float,
                             beta1: float, beta2: float, eps: float, weight_decay: float,
                             k: int) -> tuple[Float32Array, Float32Array, Float32Array]:
    """(y, z, v), updated in place: step k of Schedule-Free AdamW (the rule: training/optimizers.py),
    v = beta2 v + (1 - beta2) g^2, d = g / (sqrt(v / (1 - beta2^(k+1))) + eps) + weight_decay y,
    y = (1 - c) y + c z + lr (beta1 (1 - c) - 1) d, z = z - lr d.

    y: the parameters where gradients are taken; z: the base sequence; v: the second moment; grad: the
    loss's gradient at y. lr: this step's learning rate (after warmup) and c: its averaging weight, both
    computed by training/optimizers.py's SfAdamW. beta1, beta2, eps, weight_decay: the optimiser's
    settings. k: the step's number, counted from 0."""
    _check(y, z, v, grad)
    g, y64, z64 = f64(grad), f64(y), f64(z)
    v_new = beta2 * f64(v) + (1 - beta2) * g * g
    d = g / (np.sqrt(v_new / (1 - beta2 ** (k + 1))) + eps) + weight_decay * y64
    y[...] = (1 - c) * y64 + c * z64 + lr * (beta1 * (1 - c) - 1) * d
    z[...], v[...] = z64 - lr * d, v_new
    return y, z, v


@op(cases=_eval_cases, tolerance=TOLERANCE, args={"y": VECTOR, "z": VECTOR, "beta1": "float"})
def reference_sf_adamw_eval(y: FloatArray, z: FloatArray, beta1: float) -> Float64Array:
    """x (n,), a new vector: Schedule-Free AdamW's averaged iterate x = y / beta1 + (1 - 1 / beta1) z, where
    a model is evaluated and checkpointed (never at y).

    y, z: sf_adamw_step_'s parameters and base sequence. beta1: the optimiser's first beta."""
    _check(y, z)
    return f64(y) / beta1 + (1 - 1 / beta1) * f64(z)


# ---- element bodies, written once for the CPU twins and the CUDA kernels ------------------------------

def _bodies(jit):
    @jit
    def sgd(p, buf, grad, lr, momentum, weight_decay, first, i):
        g = grad[i] + weight_decay * p[i] if weight_decay != 0 else grad[i]
        b = g if first else buf[i] * momentum + g
        buf[i] = b
        p[i] = p[i] - lr * b

    @jit
    def adamw(p, m, v, grad, s, i):
        g = grad[i]
        mi = m[i] * s[1] + s[2] * g
        vi = v[i] * s[3] + s[4] * g * g
        m[i], v[i] = mi, vi
        p[i] = p[i] * s[0] - s[7] * mi / (math.sqrt(vi) / s[5] + s[6])

    @jit
    def sf_adamw(y, z, v, grad, s, i):
        g, yi = grad[i], y[i]
        vi = v[i] * s[0] + s[1] * g * g
        d = g / (math.sqrt(vi / s[2]) + s[3])
        if s[4] != 0:
            d = d + s[4] * yi
        v[i] = vi
        y[i] = (yi * s[5] + s[6] * z[i]) + s[7] * d
        z[i] = z[i] - s[8] * d

    @jit
    def evaluate(y, z, scale_y, scale_z, x, i):
        x[i] = y[i] * scale_y + z[i] * scale_z

    return sgd, adamw, sf_adamw, evaluate


_cpu_sgd, _cpu_adamw, _cpu_sf, _cpu_eval = _bodies(numba.njit(error_model="numpy"))
_gpu_sgd, _gpu_adamw, _gpu_sf, _gpu_eval = _bodies(cuda.jit(device=True))


def _f32(values):
    return np.array(values, np.float32)


# ---- CPU twins -----------------------------------------------------------------------------------------

@parallel_jit(error_model="numpy")
def _cpu_sgd_loop(p, buf, grad, lr, momentum, weight_decay, first):
    for i in numba.prange(p.size):
        _cpu_sgd(p, buf, grad, lr, momentum, weight_decay, first, i)


@parallel_jit(error_model="numpy")
def _cpu_adamw_loop(p, m, v, grad, s):
    for i in numba.prange(p.size):
        _cpu_adamw(p, m, v, grad, s, i)


@parallel_jit(error_model="numpy")
def _cpu_sf_loop(y, z, v, grad, s):
    for i in numba.prange(y.size):
        _cpu_sf(y, z, v, grad, s, i)


@parallel_jit(error_model="numpy")
def _cpu_eval_loop(y, z, scale_y, scale_z, x):
    for i in numba.prange(y.size):
        _cpu_eval(y, z, scale_y, scale_z, x, i)


@op
def cpu_sgd_step_(p: Float32Array, buf: Float32Array, grad: Float32Array, lr: float, momentum: float,
                  weight_decay: float, first: bool) -> tuple[Float32Array, Float32Array]:
    _check(p, buf, grad)
    _cpu_sgd_loop(p, buf, grad, np.float32(lr), np.float32(momentum), np.float32(weight_decay), bool(first))
    return p, buf


@op
def cpu_adamw_step_(p: Float32Array, m: Float32Array, v: Float32Array, grad: Float32Array, lr: float, beta1: float,
                    beta2: float, eps: float, weight_decay: float,
                    k: int) -> tuple[Float32Array, Float32Array, Float32Array]:
    _check(p, m, v, grad)
    _cpu_adamw_loop(p, m, v, grad, _f32(_adamw_scalars(lr, beta1, beta2, eps, weight_decay, k)))
    return p, m, v


@op
def cpu_sf_adamw_step_(y: Float32Array, z: Float32Array, v: Float32Array, grad: Float32Array, lr: float, c: float,
                       beta1: float, beta2: float, eps: float, weight_decay: float,
                       k: int) -> tuple[Float32Array, Float32Array, Float32Array]:
    _check(y, z, v, grad)
    _cpu_sf_loop(y, z, v, grad, _f32(_sf_scalars(lr, c, beta1, beta2, eps, weight_decay, k)))
    return y, z, v


@op
def cpu_sf_adamw_eval(y: Float32Array, z: Float32Array, beta1: float) -> Float32Array:
    _check(y, z)
    x = np.empty_like(y)
    _cpu_eval_loop(y, z, np.float32(1 / beta1), np.float32(1 - 1 / beta1), x)
    return x


# ---- CUDA kernels (grid-stride, one element per thread and pass) ------------------------------------

@kernel((F32_1D, F32_1D, F32_1D, F32, F32, F32, BOOL))
def sgd_step_cuda(p, buf, grad, lr, momentum, weight_decay, first):
    for i in range(cuda.grid(1), p.size, cuda.gridsize(1)):
        _gpu_sgd(p, buf, grad, lr, momentum, weight_decay, first, i)


@kernel((F32_1D, F32_1D, F32_1D, F32_1D, F32_1D))
def adamw_step_cuda(p, m, v, grad, s):
    for i in range(cuda.grid(1), p.size, cuda.gridsize(1)):
        _gpu_adamw(p, m, v, grad, s, i)


@kernel((F32_1D, F32_1D, F32_1D, F32_1D, F32_1D))
def sf_adamw_step_cuda(y, z, v, grad, s):
    for i in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        _gpu_sf(y, z, v, grad, s, i)


@kernel((F32_1D, F32_1D, F32, F32, F32_1D))
def sf_adamw_eval_cuda(y, z, scale_y, scale_z, x):
    for i in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        _gpu_eval(y, z, scale_y, scale_z, x, i)


def _grid(n):
    return blocks(n, max_blocks=MAX_BLOCKS)


@op
def cuda_sgd_step_(p: BackendArray, buf: BackendArray, grad: BackendArray, lr: float, momentum: float,
                   weight_decay: float, first: bool) -> tuple[BackendArray, BackendArray]:
    _check(p, buf, grad)
    sgd_step_cuda[_grid(p.size)](p, buf, grad, np.float32(lr), np.float32(momentum), np.float32(weight_decay),
                                 bool(first))
    return p, buf


@op
def cuda_adamw_step_(p: BackendArray, m: BackendArray, v: BackendArray, grad: BackendArray, lr: float, beta1: float,
                     beta2: float, eps: float, weight_decay: float,
                     k: int) -> tuple[BackendArray, BackendArray, BackendArray]:
    _check(p, m, v, grad)
    adamw_step_cuda[_grid(p.size)](p, m, v, grad, cuda.to_device(_f32(_adamw_scalars(lr, beta1, beta2, eps,
                                                                                       weight_decay, k))))
    return p, m, v


@op
def cuda_sf_adamw_step_(y: BackendArray, z: BackendArray, v: BackendArray, grad: BackendArray, lr: float, c: float,
                        beta1: float, beta2: float, eps: float, weight_decay: float,
                        k: int) -> tuple[BackendArray, BackendArray, BackendArray]:
    _check(y, z, v, grad)
    sf_adamw_step_cuda[_grid(y.size)](y, z, v, grad, cuda.to_device(_f32(_sf_scalars(lr, c, beta1, beta2, eps,
                                                                                     weight_decay, k))))
    return y, z, v


@op
def cuda_sf_adamw_eval(y: BackendArray, z: BackendArray, beta1: float) -> BackendArray:
    _check(y, z)
    x = cuda.device_array(y.shape, np.float32)
    sf_adamw_eval_cuda[_grid(y.size)](y, z, np.float32(1 / beta1), np.float32(1 - 1 / beta1), x)
    return x

# the ops of this module by name, for callers: adamw_step_(kernels, ...)
adamw_step_ = registered(reference_adamw_step_)
sf_adamw_eval = registered(reference_sf_adamw_eval)
sf_adamw_step_ = registered(reference_sf_adamw_step_)
sgd_step_ = registered(reference_sgd_step_)
