"""d-eggs' optimiser for integer weights (its `apply_adam_update` then `apply_quantized_update`):
AdamW on the EGGROLL vote, applied as steps of +-1 through a float accumulator.

    quantized_adamw_(theta, votes, m, v, acc, lr, beta1, beta2, eps, weight_decay) -> theta, m, v, acc

per element, in float32, g = -vote:
    m = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2
    acc += -lr (m / (sqrt(v) + eps) + weight_decay w)          (w: the int8 weight; no bias correction)
    acc >= 1: w += 1 and acc -= 1 (at w = 127, acc stays at 1); acc <= -1: the mirror image.
So a weight moves at most one step per update and only the accumulator keeps fractions.

More in docs/internals.md (kernels/optim/quantized_adamw.py)."""

import math

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Int8Array, Int64Array
from eggnog.kernels.core.cuda_api import F32, F32_1D, I8_1D, I64_1D, blocks, cuda, device_function, kernel, require
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import op, registered

EPS = 1e-8
MAX_W = 127


def _check(theta, votes, m, v, acc):
    n = theta.shape
    require(all(len(a.shape) == 1 and a.shape == n for a in (theta, votes, m, v, acc)),
            "quantized_adamw_ takes flat arrays of one length")


def _cases(rng):
    n = 300  # three 128-thread blocks, the last one partial
    for lr, weight_decay in ((0.5, 0.01), (0.125, 0.0)):
        theta = rng.integers(-127, 128, n).astype(np.int8)
        theta[:4] = [127, 127, -127, -127]
        votes = rng.integers(-5000, 5000, n).astype(np.int64)
        votes[:4] = [-9000, 9000, 9000, -9000]  # push the saturated weights further out, and back
        m = (rng.normal(size=n) * 1000).astype(np.float32)
        v = np.abs(rng.normal(size=n) * 1e6).astype(np.float32)
        acc = rng.uniform(-1.5, 1.5, n).astype(np.float32)
        yield theta, votes, m, v, acc, lr, 0.9, 0.95, EPS, weight_decay


def _scalars(lr, beta1, beta2, eps, weight_decay):
    return (np.float32(lr), np.float32(beta1), np.float32(1.0 - beta1), np.float32(beta2), np.float32(1.0 - beta2),
            np.float32(eps), np.float32(weight_decay))


STATE = "float32[n]"  # float32 on every backend: the rule is bit-identical, the reference computes in float32


@op(cases=_cases, args={"theta": "int8[n]", "votes": "int64[n]", "m": STATE, "v": STATE, "acc": STATE,
                        "lr": "float", "beta1": "float", "beta2": "float", "eps": "float", "weight_decay": "float"})
def reference_quantized_adamw_(theta: Int8Array, votes: Int64Array, m: Float32Array, v: Float32Array, acc: Float32Array,
                               lr: float, beta1: float, beta2: float, eps: float, weight_decay: float) -> None:
    """Nothing: theta, m, v and acc are updated in place by one quantized AdamW step (the rule: this
    module's docstring), each weight moving by at most one and staying within +-127.

    theta: the flat int8 weights of one tensor. votes: the EGGROLL vote of each weight at this step
    (kernels/egg/int_update.py's int_vote; the gradient is minus the vote). m, v: the moment estimates,
    acc: the fractional steps not yet applied (zeros before the first update; evolution/int_optimizers.py
    keeps them). lr: this step's learning rate (the schedule's, times the tensor's scale). beta1, beta2, eps,
    weight_decay: the optimiser's settings (no bias correction)."""
    _check(theta, votes, m, v, acc)
    lr, b1, c1, b2, c2, eps, wd = _scalars(lr, beta1, beta2, eps, weight_decay)
    g = -votes.astype(np.float32)
    m[:] = b1 * m + c1 * g
    v[:] = b2 * v + c2 * (g * g)
    w = theta.astype(np.float32)
    acc[:] = acc + -lr * (m / (np.sqrt(v) + eps) + wd * w)
    up, down = acc >= 1, acc <= -1
    theta_up, theta_down = up & (theta < MAX_W), down & (theta > -MAX_W)
    acc[:] = np.where(theta_up | theta_down, acc - np.where(up, 1, -1).astype(np.float32),
                      np.where(up, np.float32(1), np.where(down, np.float32(-1), acc)))
    theta[:] = theta + theta_up.astype(np.int8) - theta_down.astype(np.int8)


def _update(w, vote, m, v, a, lr, b1, c1, b2, c2, eps, wd):
    """One element: (w, m, v, acc) after the update; compiled for the CPU and as a device function."""
    g = -np.float32(vote)
    m = b1 * m + c1 * g
    v = b2 * v + c2 * (g * g)
    a = a + -lr * (m / (np.float32(math.sqrt(v)) + eps) + wd * np.float32(w))
    if a >= 1:
        if w < MAX_W:
            w += 1
            a -= np.float32(1)
        else:
            a = np.float32(1)
    elif a <= -1:
        if w > -MAX_W:
            w -= 1
            a += np.float32(1)
        else:
            a = np.float32(-1)
    return w, m, v, a


cpu_update = numba.njit(_update)
gpu_update = device_function(_update)


@numba.njit(parallel=True, cache=True)
def _cpu_all(theta, votes, m, v, acc, lr, b1, c1, b2, c2, eps, wd):
    for i in numba.prange(theta.shape[0]):
        theta[i], m[i], v[i], acc[i] = cpu_update(theta[i], votes[i], m[i], v[i], acc[i], lr, b1, c1, b2, c2, eps, wd)


@op
def cpu_quantized_adamw_(theta: Int8Array, votes: Int64Array, m: Float32Array, v: Float32Array, acc: Float32Array,
                         lr: float, beta1: float, beta2: float, eps: float, weight_decay: float) -> None:
    _check(theta, votes, m, v, acc)
    _cpu_all(theta, votes, m, v, acc, *_scalars(lr, beta1, beta2, eps, weight_decay))


@kernel((I8_1D, I64_1D, F32_1D, F32_1D, F32_1D, F32, F32, F32, F32, F32, F32, F32))
def quantized_adamw_cuda(theta, votes, m, v, acc, lr, b1, c1, b2, c2, eps, wd):
    i = cuda.grid(1)
    if i < theta.shape[0]:
        theta[i], m[i], v[i], acc[i] = gpu_update(theta[i], votes[i], m[i], v[i], acc[i], lr, b1, c1, b2, c2, eps, wd)


@op
def cuda_quantized_adamw_(theta: BackendArray, votes: BackendArray, m: BackendArray, v: BackendArray, acc: BackendArray,
                          lr: float, beta1: float, beta2: float, eps: float, weight_decay: float) -> None:
    _check(theta, votes, m, v, acc)
    quantized_adamw_cuda[blocks(theta.shape[0])](theta, votes, m, v, acc, *_scalars(lr, beta1, beta2, eps,
                                                                                    weight_decay))

# the ops of this module by name, for callers: quantized_adamw_(kernels, ...)
quantized_adamw_ = registered(reference_quantized_adamw_)
