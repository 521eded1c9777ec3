"""Float32 normal noise of many members of one tensor in one launch.

    normal_rows(prefix, members, start, count)   (len(members), count) float32

Row i holds elements [start, start + count) of member `members[i]`'s stream under a tensor's prefix key
(scalar_math.prefix_key), i.e. exactly what `streams.generate("normal_float32", stream_key(...))` gives per
member. Float EGGROLL draws the low-rank factors of a whole population this way; one call per member
would cost a launch (or a thread-pool start) each.

The reference (float64 math, rounded once), the CPU twin and CUDA agree within the tolerance of
streams' normal_float32, 4 eps max(|z|, 1); the CPU twin equals `streams.generate(..., backend="cpu")` bit for
bit. The CUDA launcher takes `members` as a host array (checked, then copied) or as an int64 device
array (taken as it is).
"""

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Int64Array
from eggnog.kernels.core.cuda_api import F32_2D, I64, I64_1D, blocks, cuda, kernel
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import op, registered
from eggnog.kernels.noise import reference
from eggnog.kernels.noise.scalar_math import MASK32
from eggnog.kernels.noise.streams import (
    cpu_member_key_a,
    cpu_member_key_b,
    cpu_normal_f32,
    cpu_round1,
    gpu_member_key_a,
    gpu_member_key_b,
    gpu_normal_f32,
    gpu_round1,
)

MAX_BLOCKS = 4096  # the grid-stride loop covers the rest
EPS = float(np.finfo(np.float32).eps)


def _check(members, start, count):
    members = np.ascontiguousarray(members, np.int64)
    if members.size and (members.min() < 0 or members.max() > MASK32):
        raise ValueError("members must lie in [0, 2^32)")
    reference.check_slice(start, count)
    return members


def _cases(rng):
    """One partial block; several blocks (3 x 300 elements); a slice ending at 2^32; no members."""
    prefix = int(rng.integers(0, 2**32))
    yield prefix, np.array([0, 1, 2, 3], np.int64), 0, 37
    yield prefix, rng.integers(0, 2**32, 3).astype(np.int64), int(rng.integers(0, 2**31)), 300
    yield prefix, np.array([9, 2**32 - 1, 4], np.int64), 2**32 - 20, 20
    yield prefix, np.zeros(0, np.int64), 0, 5


@op(cases=_cases, tolerance=(4 * EPS, 4 * EPS), args={"prefix": "int", "members": "int64[members]", "start": "int",
                                                      "count": "int"})
def reference_normal_rows(prefix: int, members: Int64Array, start: int, count: int) -> Float32Array:
    """float32 (members, count): row i is elements start .. start + count - 1 of the N(0, 1) stream of
    member members[i] under one tensor's noise key, exactly `streams.generate("normal_float32",
    stream_key(...))` of that member.

    prefix: the tensor's key at one noise epoch, `scalar_math.prefix_key(seed, tensor_id, epoch)`.
    members: the stream index of each row, in [0, 2^32) (float EGGROLL passes pair indices; one may
    repeat). start, count: the slice of every stream, within [0, 2^32) (a tensor's B factor, then its
    A factor at the offset after B)."""
    members = _check(members, start, count)
    ka, kb = reference.member_keys(prefix, members)
    out = np.empty((members.size, count), np.float32)
    for i in range(members.size):
        out[i] = reference.normal_float32((int(ka[i]), int(kb[i])), start, count)
    return out


@numba.njit(parallel=True, cache=True)
def _fill_cpu(out, prefix, members, start):
    for i in numba.prange(out.shape[0]):
        ka = cpu_member_key_a(prefix, members[i])
        kb = cpu_member_key_b(ka)
        for j in range(out.shape[1]):
            out[i, j] = cpu_normal_f32(cpu_round1(ka, start + j), kb)


@op
def cpu_normal_rows(prefix: int, members: Int64Array, start: int, count: int) -> Float32Array:
    members = _check(members, start, count)
    out = np.empty((members.size, count), np.float32)
    _fill_cpu(out, np.int64(prefix), members, np.int64(start))
    return out


@kernel((F32_2D, I64, I64_1D, I64))
def normal_rows_cuda(out, prefix, members, start):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < out.size:
        row, j = i // out.shape[1], i % out.shape[1]
        ka = gpu_member_key_a(prefix, members[row])
        out[row, j] = gpu_normal_f32(gpu_round1(ka, start + j), gpu_member_key_b(ka))
        i += stride


@op
def cuda_normal_rows(prefix: int, members: BackendArray, start: int, count: int) -> BackendArray:
    if hasattr(members, "copy_to_host"):
        if members.dtype != np.int64 or members.ndim != 1:
            raise ValueError("device members must be a 1-D int64 array")
        reference.check_slice(start, count)
    else:
        members = cuda.to_device(_check(members, start, count))
    out = cuda.device_array((members.size, count), np.float32)
    if out.size:
        normal_rows_cuda[blocks(out.size, max_blocks=MAX_BLOCKS)](out, np.int64(prefix), members, np.int64(start))
    return out

# the ops of this module by name, for callers: normal_rows(kernels, ...)
normal_rows = registered(reference_normal_rows)
