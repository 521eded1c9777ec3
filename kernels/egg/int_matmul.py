"""int8 x int8 -> int32 matmul over a population, with the EGGROLL rank-1 perturbation fused in:
`int_matmul(x, w, prefix, first_member, sigma_shift, perturbed)` gives int8 (members, d_out).

For member i (global index g, pair p = g // 2, sign = +1 for even g, -1 for odd):

    B_p = noise[0 : d_in], A_p = noise[d_in : d_in + d_out]     (gaussian_int8, stream of pair p)
    acc = x_i . W^T + ((x_i . B_p) * (sign * A_p)) >> (4 + sigma_shift)
    out = clip(floor(acc / (16 * floor(sqrt(d_in)))), +-127)

With `gain` (uint8 (d_in + d_out,), kernels/noise/gains.py) B_p and A_p are scaled first:
B_p[k] = (B_p[k] * gain[k]) >> 6, A_p[j] = (A_p[j] * gain[d_in + j]) >> 6.

A and B are regenerated from the hash, never stored. On the GPU, one small launch computes
x_i . B_p for every member (the only per-member work over d_in), then one tiled launch covers the
whole population and adds the perturbation in its epilogue, generating A_p[j] where it is used.
"""

import numba
import numpy as np

from eggnog.kernels.core.array_types import Int8Array, UInt8Array
from eggnog.kernels.core.cuda_api import BOOL, I8_2D, I64, I64_1D, U8_1D, cuda, kernel
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.reductions import block_total
from eggnog.kernels.core.registry import op, registered
from eggnog.kernels.egg.int_math import FIXED_POINT, matmul_divisor
from eggnog.kernels.egg.member_ops import cpu_clip8, gpu_clip8
from eggnog.kernels.noise import reference
from eggnog.kernels.noise.gains import GAIN_SHIFT, device_args, kernel_args, random_gains, scaled_reference
from eggnog.kernels.noise.streams import (
    cpu_bits_of,
    cpu_gaussian_int8,
    cpu_member_key_a,
    cpu_member_key_b,
    cpu_round1,
    gpu_bits_of,
    gpu_gaussian_int8,
    gpu_member_key_a,
    gpu_member_key_b,
    gpu_round1,
)

TILE = 16  # members x outputs per block (one thread each)
TILE_K = 64  # inner dimension staged through shared memory per step
DOT_THREADS = 64


def _cases(rng):
    """Members and outputs off the 16 x 16 tile, d_in across the 64-wide inner step, odd first
    members, an unperturbed run, and inputs near +-127 that saturate the outputs."""
    for members, d_in, d_out, first, sigma_shift, perturbed, scale in (
            (20, 70, 19, 3, 4, True, 16), (5, 130, 33, 0, 0, True, 127), (17, 40, 16, 8, 4, False, 40),
            (3, 64, 5, 1, 2, True, 100)):
        x = np.clip(np.rint(rng.normal(0, scale, (members, d_in))), -127, 127).astype(np.int8)
        w = np.clip(np.rint(rng.normal(0, scale, (d_out, d_in))), -127, 127).astype(np.int8)
        yield x, w, 4242, first, sigma_shift, perturbed
    x = np.clip(np.rint(rng.normal(0, 60, (9, 70))), -127, 127).astype(np.int8)
    w = np.clip(np.rint(rng.normal(0, 60, (19, 70))), -127, 127).astype(np.int8)
    yield x, w, 4242, 1, 2, True, random_gains(rng, 70 + 19)


@op(cases=_cases, args={"x": "int8[members, d_in]", "w": "int8[d_out, d_in]", "prefix": "int", "first_member": "int",
                         "sigma_shift": "int", "perturbed": "bool", "gain": "uint8[d_in + d_out] | None"})
def reference_int_matmul(x: Int8Array, w: Int8Array, prefix: int, first_member: int, sigma_shift: int,
                         perturbed: bool = True, gain: UInt8Array | None = None) -> Int8Array:
    """int8 (members, d_out): each member's row of x through W^T, plus its own EGGROLL rank-1 perturbation
    when `perturbed`, scaled down and clipped to +-127 (the formula: this module's docstring).

    x: one int8 input row per member (members, d_in). w: the layer's weights (d_out, d_in), shared.
    prefix: the noise key of this tensor at this noise epoch, `model.prefixes(seed, epoch)[name]`
    (models/egg.py): the tensor's id hashed with the run's seed and `step // noise_reuse`.
    first_member: the population index of x's first row; row i is member g = first_member + i, which
    uses pair p = g // 2's noise stream (B_p: elements 0..d_in-1, A_p: d_in..d_in+d_out-1 of
    `gaussian_int8` keyed by (prefix, p)) with sign +1 for even g and -1 for odd.
    sigma_shift: the perturbation is divided by 2**(4 + sigma_shift). perturbed: False gives x W^T only.
    gain: the adaptive-noise gains (uint8, 64 = one), scaling B_p and A_p element by element, or None."""
    x64, w64 = x.astype(np.int64), w.astype(np.int64)
    d_out, d_in = w.shape
    acc = x64 @ w64.T
    if perturbed:
        members = first_member + np.arange(x.shape[0])
        noise = reference.gaussian_rows(prefix, members >> 1, 0, d_in + d_out)
        if gain is not None:
            noise = scaled_reference(noise, gain)
        s = (x64 * noise[:, :d_in]).sum(axis=1)
        signed_a = noise[:, d_in:] * (1 - 2 * (members & 1))[:, None]
        acc = acc + ((s[:, None] * signed_a) >> (FIXED_POINT + sigma_shift))
    return np.clip(acc // matmul_divisor(d_in), -127, 127).astype(np.int8)


@numba.njit(parallel=True, cache=True)
def _cpu(x, w, out, prefix, first_member, shift, perturbed, divisor, gain, scaled):
    members, d_in = x.shape
    d_out = w.shape[0]
    for i in numba.prange(members):
        g = first_member + i
        ka = cpu_member_key_a(prefix, g >> 1)
        kb = cpu_member_key_b(ka)
        s = 0
        if perturbed:
            for k in range(d_in):
                b = cpu_gaussian_int8(cpu_bits_of(cpu_round1(ka, k), kb))
                if scaled:
                    b = (b * np.int64(gain[k])) >> GAIN_SHIFT
                s += np.int64(x[i, k]) * b
        sign = 1 - 2 * (g & 1)
        for j in range(d_out):
            acc = np.int32(0)
            for k in range(d_in):
                acc += np.int32(x[i, k]) * np.int32(w[j, k])
            total = np.int64(acc)
            if perturbed:
                a = cpu_gaussian_int8(cpu_bits_of(cpu_round1(ka, d_in + j), kb))
                if scaled:
                    a = (a * np.int64(gain[d_in + j])) >> GAIN_SHIFT
                total += (s * (sign * a)) >> shift
            out[i, j] = cpu_clip8(total // divisor)


@op
def cpu_int_matmul(x: Int8Array, w: Int8Array, prefix: int, first_member: int, sigma_shift: int, perturbed: bool = True,
                   gain: UInt8Array | None = None) -> Int8Array:
    out = np.empty((x.shape[0], w.shape[0]), dtype=np.int8)
    _cpu(x, w, out, prefix, first_member, FIXED_POINT + sigma_shift, perturbed, matmul_divisor(w.shape[1]),
         *kernel_args(gain))
    return out


@kernel((I8_2D, I64_1D, I64, I64, U8_1D, BOOL), block=DOT_THREADS)
def noise_dot_cuda(x, s_out, prefix, first_member, gain, scaled):
    """s_out[i] = x_i . B_p for every member: one block per member, a shared-memory reduction."""
    i = cuda.blockIdx.x
    t = cuda.threadIdx.x
    partial = cuda.shared.array(DOT_THREADS, numba.int64)
    ka = gpu_member_key_a(prefix, (first_member + i) >> 1)
    kb = gpu_member_key_b(ka)
    acc = 0
    for k in range(t, x.shape[1], DOT_THREADS):
        b = gpu_gaussian_int8(gpu_bits_of(gpu_round1(ka, k), kb))
        if scaled:
            b = (b * np.int64(gain[k])) >> GAIN_SHIFT
        acc += np.int64(x[i, k]) * b
    total = block_total(acc, partial, t)
    if t == 0:
        s_out[i] = total


@kernel((I8_2D, I8_2D, I64_1D, I8_2D, I64, I64, I64, BOOL, I64, U8_1D, BOOL), block=TILE * TILE)
def perturbed_matmul_cuda(x, w, s, out, prefix, first_member, shift, perturbed, divisor, gain, scaled):
    tx = cuda.threadIdx.x  # output within the tile
    ty = cuda.threadIdx.y  # member within the tile
    j = cuda.blockIdx.x * TILE + tx
    i = cuda.blockIdx.y * TILE + ty
    members, d_in = x.shape
    d_out = w.shape[0]
    xs = cuda.shared.array((TILE, TILE_K), numba.int8)
    ws = cuda.shared.array((TILE, TILE_K), numba.int8)
    acc = np.int32(0)
    for k0 in range(0, d_in, TILE_K):
        for kk in range(tx, TILE_K, TILE):  # row ty of x and row ty of w, TILE_K bytes each
            k = k0 + kk
            row_i = cuda.blockIdx.y * TILE + ty
            row_j = cuda.blockIdx.x * TILE + ty
            xs[ty, kk] = x[row_i, k] if row_i < members and k < d_in else 0
            ws[ty, kk] = w[row_j, k] if row_j < d_out and k < d_in else 0
        cuda.syncthreads()
        for kk in range(0, TILE_K, 4):  # four products per step: the shape NVVM turns into dp4a
            acc += (np.int32(xs[ty, kk]) * np.int32(ws[tx, kk])
                    + np.int32(xs[ty, kk + 1]) * np.int32(ws[tx, kk + 1])
                    + np.int32(xs[ty, kk + 2]) * np.int32(ws[tx, kk + 2])
                    + np.int32(xs[ty, kk + 3]) * np.int32(ws[tx, kk + 3]))
        cuda.syncthreads()
    if i < members and j < d_out:
        total = np.int64(acc)
        if perturbed:
            g = first_member + i
            ka = gpu_member_key_a(prefix, g >> 1)
            kb = gpu_member_key_b(ka)
            a = gpu_gaussian_int8(gpu_bits_of(gpu_round1(ka, d_in + j), kb))
            if scaled:
                a = (a * np.int64(gain[d_in + j])) >> GAIN_SHIFT
            total += (s[i] * ((1 - 2 * (g & 1)) * a)) >> shift
        out[i, j] = gpu_clip8(total // divisor)


@op
def cuda_int_matmul(x: BackendArray, w: BackendArray, prefix: int, first_member: int, sigma_shift: int,
                    perturbed: bool = True, gain: BackendArray | None = None) -> BackendArray:
    members, d_out = x.shape[0], w.shape[0]
    s = cuda.device_array(members, dtype=np.int64)
    out = cuda.device_array((members, d_out), dtype=np.int8)
    gain, scaled = device_args(gain)
    if perturbed:
        noise_dot_cuda[members, DOT_THREADS](x, s, np.int64(prefix), np.int64(first_member), gain, scaled)
    grid = ((d_out + TILE - 1) // TILE, (members + TILE - 1) // TILE)
    perturbed_matmul_cuda[grid, (TILE, TILE)](x, w, s, out, np.int64(prefix), np.int64(first_member),
                                              np.int64(FIXED_POINT + sigma_shift), bool(perturbed),
                                              np.int64(matmul_divisor(w.shape[1])), gain, scaled)
    return out

# the ops of this module by name, for callers: int_matmul(kernels, ...)
int_matmul = registered(reference_int_matmul)
