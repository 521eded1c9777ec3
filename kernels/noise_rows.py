"""Float32 normal noise of many members of one tensor in one launch: row i holds elements
[start, start + count) of member `members[i]`'s stream under a tensor's prefix key
(noise_math.prefix_key), i.e. exactly what `rng.generate("normal_float32", stream_key(...))` gives
per member. Float EGGROLL draws the low-rank factors of a whole population this way; one call per
member costs a launch (or a thread-pool start) each.

Reference (float64 math, rounded once), CPU twin and CUDA agree within the tolerance of
rng.normal_float32; the CPU twin equals `rng.generate(..., backend="cpu")` bit for bit.
"""

import numba
import numpy as np

from eggnog.kernels import rng_reference
from eggnog.kernels.cuda_api import cuda, kernel
from eggnog.kernels.noise_math import MASK32
from eggnog.kernels.rng import (cpu_member_key_a, cpu_member_key_b, cpu_normal_f32, cpu_round1, gpu_member_key_a,
                         gpu_member_key_b, gpu_normal_f32, gpu_round1)

THREADS = 256


def _check(members, start, count):
    members = np.ascontiguousarray(members, np.int64)
    if members.size and (members.min() < 0 or members.max() > MASK32):
        raise ValueError("members must lie in [0, 2^32)")
    rng_reference.check_slice(start, count)
    return members


def reference_normal_rows(prefix, members, start, count):
    members = _check(members, start, count)
    ka, kb = rng_reference.member_keys(prefix, members)
    out = np.empty((members.size, count), np.float32)
    for i in range(members.size):
        out[i] = rng_reference.normal_float32((int(ka[i]), int(kb[i])), start, count)
    return out


@numba.njit(parallel=True)
def _fill_cpu(out, prefix, members, start):
    for i in numba.prange(out.shape[0]):
        ka = cpu_member_key_a(prefix, members[i])
        kb = cpu_member_key_b(ka)
        for j in range(out.shape[1]):
            out[i, j] = cpu_normal_f32(cpu_round1(ka, start + j), kb)


def cpu_normal_rows(prefix, members, start, count):
    members = _check(members, start, count)
    out = np.empty((members.size, count), np.float32)
    _fill_cpu(out, np.int64(prefix), members, np.int64(start))
    return out


@kernel((numba.float32[:, ::1], numba.int64, numba.int64[::1], numba.int64))
def normal_rows_cuda(out, prefix, members, start):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < out.size:
        row, j = i // out.shape[1], i % out.shape[1]
        ka = gpu_member_key_a(prefix, members[row])
        out[row, j] = gpu_normal_f32(gpu_round1(ka, start + j), gpu_member_key_b(ka))
        i += stride


def cuda_normal_rows(prefix, members, start, count):
    members = _check(members, start, count)
    out = cuda.device_array((members.size, count), np.float32)
    if out.size:
        blocks = max(1, min(4096, (out.size + THREADS - 1) // THREADS))
        normal_rows_cuda[blocks, THREADS](out, np.int64(prefix), cuda.to_device(members), np.int64(start))
    return out
