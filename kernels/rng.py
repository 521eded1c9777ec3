"""Counter-based noise: CPU twin and CUDA kernels that fill any slice of a noise stream.

The definition and the scalar math are in `noise_math`; the NumPy reference is `rng_reference`.
Other kernels generate noise inline through the `gpu_*` device functions and `cpu_*` njit
functions exported here, so every consumer draws the same bits.
"""

import math

import numba
import numpy as np

from eggnog.kernels import noise_math, rng_reference
from eggnog.kernels.backend import current_backend
from eggnog.kernels.cuda_api import cuda, device_function, kernel

KINDS = ("uniform_int8", "gaussian_int8", "rademacher_int8", "normal_float32")
UNIFORM, GAUSSIAN, RADEMACHER = 0, 1, 2
_INT8_KIND_CODE = {"uniform_int8": UNIFORM, "gaussian_int8": GAUSSIAN, "rademacher_int8": RADEMACHER}

(cpu_mul32, cpu_fmix32, cpu_member_key_a, cpu_member_key_b, cpu_round1, cpu_bits_of, cpu_uniform_int,
 cpu_gaussian_int8, cpu_rademacher) = noise_math.build(numba.njit)
cpu_normal_f32 = noise_math.build_normal(numba.njit, cpu_fmix32)

(gpu_mul32, gpu_fmix32, gpu_member_key_a, gpu_member_key_b, gpu_round1, gpu_bits_of, gpu_uniform_int,
 gpu_gaussian_int8, gpu_rademacher) = noise_math.build(device_function)
gpu_normal_f32 = noise_math.build_normal(device_function, gpu_fmix32)


@numba.njit(parallel=True)
def fill_int8_cpu(out, ka, kb, start, kind, k):
    for j in numba.prange(out.size):
        b = cpu_bits_of(cpu_round1(ka, start + j), kb)
        if kind == UNIFORM:
            out[j] = cpu_uniform_int(b, k)
        elif kind == GAUSSIAN:
            out[j] = cpu_gaussian_int8(b)
        else:
            out[j] = cpu_rademacher(b)


@numba.njit(parallel=True)
def fill_normal_cpu(out, ka, kb, start):
    for j in numba.prange(out.size):
        out[j] = cpu_normal_f32(cpu_round1(ka, start + j), kb)


_FILL_SIG = (numba.int64, numba.int64, numba.int64)


@kernel((numba.int8[::1],) + _FILL_SIG + (numba.int64, numba.int64))
def fill_int8_cuda(out, ka, kb, start, kind, k):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < out.size:
        b = gpu_bits_of(gpu_round1(ka, start + i), kb)
        if kind == UNIFORM:
            out[i] = gpu_uniform_int(b, k)
        elif kind == GAUSSIAN:
            out[i] = gpu_gaussian_int8(b)
        else:
            out[i] = gpu_rademacher(b)
        i += stride


@kernel((numba.float32[::1],) + _FILL_SIG)
def fill_normal_cuda(out, ka, kb, start):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < out.size:
        out[i] = gpu_normal_f32(gpu_round1(ka, start + i), kb)
        i += stride


THREADS_PER_BLOCK = 256
MAX_BLOCKS = 4096  # grid-stride loops cover the rest


def grid_for(n):
    return max(1, min(MAX_BLOCKS, math.ceil(n / THREADS_PER_BLOCK))), THREADS_PER_BLOCK


def _check(kind, key, start, count, k):
    if kind not in KINDS:
        raise ValueError(f"unknown noise kind {kind!r}; choose one of {', '.join(KINDS)}")
    rng_reference.check_slice(start, count)
    if kind == "uniform_int8" and not 0 <= k <= 127:
        raise ValueError(f"uniform_int8 needs 0 <= k <= 127, got {k}")
    return int(key[0]), int(key[1])


def generate(kind, key, start, count, *, k=15, backend=None):
    """Elements [start, start + count) of noise stream `key` (from noise_math.stream_key).

    backend: "numpy" (reference), "cpu" or "cuda"; default the process backend. The result lives on
    that backend (a device array for "cuda"). `k` is the bound of uniform_int8.
    """
    ka, kb = _check(kind, key, start, count, k)
    name = backend or current_backend().name
    if name == "numpy":
        return _reference(kind, key, start, count, k)
    dtype = np.float32 if kind == "normal_float32" else np.int8
    if name == "cpu":
        out = np.empty(count, dtype=dtype)
        if kind == "normal_float32":
            fill_normal_cpu(out, ka, kb, start)
        else:
            fill_int8_cpu(out, ka, kb, start, _INT8_KIND_CODE[kind], k)
        return out
    if name == "cuda":
        out = cuda.device_array(count, dtype=dtype)
        if count:
            blocks, threads = grid_for(count)
            if kind == "normal_float32":
                fill_normal_cuda[blocks, threads](out, ka, kb, start)
            else:
                fill_int8_cuda[blocks, threads](out, ka, kb, start, _INT8_KIND_CODE[kind], k)
        return out
    raise ValueError(f"unknown backend {name!r}")


def _reference(kind, key, start, count, k):
    if kind == "uniform_int8":
        return rng_reference.uniform_int8(key, start, count, k).astype(np.int8)
    if kind == "gaussian_int8":
        return rng_reference.gaussian_int8(key, start, count).astype(np.int8)
    if kind == "rademacher_int8":
        return rng_reference.rademacher_int8(key, start, count).astype(np.int8)
    return rng_reference.normal_float32(key, start, count)
