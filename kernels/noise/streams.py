"""Counter-based noise: any slice of a stream, generated on its own (definition and scalar math in
`scalar_math`, the NumPy arithmetic of the reference in `noise.reference`).

    random_int8(kind, key, start, count, k)   elements [start, start + count) of stream key = (ka, kb)
                                              as int8: UNIFORM on [-k, k], GAUSSIAN (16 = 1.0) or
                                              RADEMACHER (+-1); bit-identical on every backend
    random_normal(key, start, count)          the same slice as float32 N(0, 1), to a few ulp

`generate(kind_name, ...)` picks one of them by the name of a noise kind. Other kernels draw noise
inline through the `cpu_*` njit and `gpu_*` device functions exported here, so every consumer draws
the same bits.
"""

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Int8Array, Int64Array
from eggnog.kernels.core.backend import current_backend
from eggnog.kernels.core.cuda_api import F32_1D, I8_1D, I64, blocks, cuda, device_function, kernel
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import BACKENDS, OPS, op, registered
from eggnog.kernels.noise import reference, scalar_math

KINDS = ("uniform_int8", "gaussian_int8", "rademacher_int8", "normal_float32")
UNIFORM, GAUSSIAN, RADEMACHER = 0, 1, 2
INT8_KINDS = {"uniform_int8": UNIFORM, "gaussian_int8": GAUSSIAN, "rademacher_int8": RADEMACHER}
EPS32 = float(np.finfo(np.float32).eps)
MAX_BLOCKS = 4096  # grid-stride loops cover the rest

(cpu_mul32, cpu_fmix32, cpu_member_key_a, cpu_member_key_b, cpu_round1, cpu_bits_of, cpu_uniform_int,
 cpu_gaussian_int8, cpu_rademacher) = scalar_math.build(numba.njit)
cpu_normal_f32 = scalar_math.build_normal(numba.njit, cpu_fmix32)
cpu_member_noise = scalar_math.build_member_noise(numba.njit, cpu_round1, cpu_bits_of, cpu_uniform_int,
                                                 cpu_gaussian_int8)

(gpu_mul32, gpu_fmix32, gpu_member_key_a, gpu_member_key_b, gpu_round1, gpu_bits_of, gpu_uniform_int,
 gpu_gaussian_int8, gpu_rademacher) = scalar_math.build(device_function)
gpu_normal_f32 = scalar_math.build_normal(device_function, gpu_fmix32)
gpu_member_noise = scalar_math.build_member_noise(device_function, gpu_round1, gpu_bits_of, gpu_uniform_int,
                                                 gpu_gaussian_int8)


def _check(kind, start, count, k):
    if kind not in (UNIFORM, GAUSSIAN, RADEMACHER):
        raise ValueError(f"unknown int8 noise kind {kind!r}: use UNIFORM, GAUSSIAN or RADEMACHER")
    reference.check_slice(start, count)
    if kind == UNIFORM and not 0 <= k <= 127:
        raise ValueError(f"uniform_int8 needs 0 <= k <= 127, got {k}")


# Slices at the stream's start, in its middle and at its end (index 2^32 - 1), over several blocks;
# one empty.
SLICES = ((0, 300), (123_456_789, 300), (2**32 - 300, 300), (5, 0))


def _int8_cases(rng):
    """The key as an array first (the form the declaration checks), then as the tuple stream_key gives."""
    key = scalar_math.stream_key(1234, 7, 3, 99)
    for i, (kind, k) in enumerate(((UNIFORM, 100), (UNIFORM, 127), (GAUSSIAN, 15), (RADEMACHER, 15))):
        for start, count in SLICES:
            yield kind, np.array(key, np.int64) if i == 0 else key, start, count, k


def _normal_cases(rng):
    key = scalar_math.stream_key(5, 6, 7, 8)
    for start, count in SLICES:
        yield np.array(key, np.int64) if start == 0 else key, start, count


# ---- random_int8 ---------------------------------------------------------------------------------

@op(cases=_int8_cases, args={"kind": "int", "key": "int64[2]", "start": "int", "count": "int", "k": "int"})
def reference_random_int8(kind: int, key: Int64Array, start: int, count: int, k: int) -> Int8Array:
    """int8 (count,): elements start .. start + count - 1 of the noise stream `key` as int8 of `kind`:
    UNIFORM (0) on [-k, k], GAUSSIAN (1) with 16 = 1.0, or RADEMACHER (2) +-1 (this module's constants).

    key: the stream's two 32-bit words (ka, kb), a tuple or an int64 array, from
    `scalar_math.stream_key(seed, tensor_id, epoch, member)`. start + count <= 2^32. k: the uniform
    bound, 0 <= k <= 127 (unused by the other kinds)."""
    _check(kind, start, count, k)
    if kind == UNIFORM:
        return reference.uniform_int8(key, start, count, k).astype(np.int8)
    if kind == GAUSSIAN:
        return reference.gaussian_int8(key, start, count).astype(np.int8)
    return reference.rademacher_int8(key, start, count).astype(np.int8)


@numba.njit(parallel=True, cache=True)
def _cpu_fill_int8(out, ka, kb, start, kind, k):
    for j in numba.prange(out.size):
        b = cpu_bits_of(cpu_round1(ka, start + j), kb)
        if kind == UNIFORM:
            out[j] = cpu_uniform_int(b, k)
        elif kind == GAUSSIAN:
            out[j] = cpu_gaussian_int8(b)
        else:
            out[j] = cpu_rademacher(b)


@op
def cpu_random_int8(kind: int, key: Int64Array, start: int, count: int, k: int) -> Int8Array:
    _check(kind, start, count, k)
    out = np.empty(count, np.int8)
    _cpu_fill_int8(out, int(key[0]), int(key[1]), int(start), int(kind), int(k))
    return out


@kernel((I8_1D, I64, I64, I64, I64, I64))
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


@op
def cuda_random_int8(kind: int, key: BackendArray, start: int, count: int, k: int) -> BackendArray:
    _check(kind, start, count, k)
    out = cuda.device_array(count, np.int8)
    if count:
        grid = blocks(count, max_blocks=MAX_BLOCKS)
        fill_int8_cuda[grid](out, np.int64(key[0]), np.int64(key[1]), np.int64(start), np.int64(kind), np.int64(k))
    return out


# ---- random_normal -------------------------------------------------------------------------------

@op(cases=_normal_cases, tolerance=(4 * EPS32, 4 * EPS32), args={"key": "int64[2]", "start": "int", "count": "int"})
def reference_random_normal(key: Int64Array, start: int, count: int) -> Float32Array:
    """float32 (count,): elements start .. start + count - 1 of the noise stream `key` as N(0, 1)
    (Box-Muller of two words per element; the twins agree to a few ulp).

    key: the stream's two 32-bit words (ka, kb), a tuple or an int64 array, from
    `scalar_math.stream_key(seed, tensor_id, epoch, member)`. start + count <= 2^32."""
    return reference.normal_float32(key, start, count)


@numba.njit(parallel=True, cache=True)
def _cpu_fill_normal(out, ka, kb, start):
    for j in numba.prange(out.size):
        out[j] = cpu_normal_f32(cpu_round1(ka, start + j), kb)


@op
def cpu_random_normal(key: Int64Array, start: int, count: int) -> Float32Array:
    reference.check_slice(start, count)
    out = np.empty(count, np.float32)
    _cpu_fill_normal(out, int(key[0]), int(key[1]), int(start))
    return out


@kernel((F32_1D, I64, I64, I64))
def fill_normal_cuda(out, ka, kb, start):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < out.size:
        out[i] = gpu_normal_f32(gpu_round1(ka, start + i), kb)
        i += stride


@op
def cuda_random_normal(key: BackendArray, start: int, count: int) -> BackendArray:
    reference.check_slice(start, count)
    out = cuda.device_array(count, np.float32)
    if count:
        grid = blocks(count, max_blocks=MAX_BLOCKS)
        fill_normal_cuda[grid](out, np.int64(key[0]), np.int64(key[1]), np.int64(start))
    return out


def generate(kind, key, start, count, *, k=15, backend=None):
    """Elements [start, start + count) of noise stream `key` (from scalar_math.stream_key), of the
    kind named (one of KINDS); `k` bounds uniform_int8.

    backend: "numpy" (reference), "cpu" or "cuda"; default the process backend. The result lives on
    that backend (a device array for "cuda").
    """
    if kind not in KINDS:
        raise ValueError(f"unknown noise kind {kind!r}; choose one of {', '.join(KINDS)}")
    name = backend or current_backend().name
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}")
    if kind == "normal_float32":
        return getattr(OPS["random_normal"], name)(key, start, count)
    return getattr(OPS["random_int8"], name)(INT8_KINDS[kind], key, start, count, k)

# the ops of this module by name, for callers: random_int8(kernels, ...)
random_int8 = registered(reference_random_int8)
random_normal = registered(reference_random_normal)
