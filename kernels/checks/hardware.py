"""Four small kernels, one for each mechanism the big kernels rely on that a GPU node may lack; the
GPU self-check (`bin/selfcheck.py --gpu`) runs them against their CPU twins before anything large:

    warp_mma_s8(a (16, 32) int8, b (32, 8) int8, c (16, 8) int32) -> a @ b + c, int32 (wraps)   IMMA
    warp_mma_tf32(a (16, 8), b (8, 8), c (16, 8) float32) -> tf32(a) @ tf32(b) + c, float32       HMMA
    shared_reverse(x (n,) int32) -> x[::-1] through n * 4 bytes of dynamic shared memory (over 48 KiB
                                     needs the driver's per-function opt-in)
    grid_rotate(x (G, W) int64) -> out[g] = sum(x[(g + 1) % G]): G blocks meet at one grid.sync (a
                                     cooperative launch, which links cudadevrt)

One warp (or one block per row) each: they prove a mechanism works, not that it is fast. The mma
products go through `kernels/core/mma.py`, so they also check its fragment layouts on hardware. numba's
simulator runs a grid's blocks one after another, so there `grid_rotate` is only right for G = 1.
"""

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Float64Array, Int8Array, Int32Array, Int64Array
from eggnog.kernels.core.cuda_api import (
    F32_2D,
    I8_2D,
    I32_1D,
    I64_1D,
    I64_2D,
    allow_dynamic_shared,
    cuda,
    device_function,
    f64,
    kernel,
    on_device,
    require,
)
from eggnog.kernels.core.mma import MMA_K, MMA_M, MMA_N, TF32_K, mma_s8_16832, mma_tf32_1688, round_tf32, to_tf32
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import normal32, op, registered

I32_2D = numba.int32[:, ::1]
WARP = 32
SHARED_THREADS = 256
TF32_TOLERANCE = (1e-6, 1e-5)  # fp32 accumulation of 8 exact products: 2^-22 (|A| |B| + |C|) at unit scale


# --- warp_mma_s8: one IMMA.16832 -------------------------------------------------------------------

def _s8_cases(rng):
    """Random bytes; then the extremes: -128 rows and columns, and a C that wraps past 2^31."""
    for extreme in (False, True):
        a = rng.integers(-128, 128, (MMA_M, MMA_K)).astype(np.int8)
        b = rng.integers(-128, 128, (MMA_K, MMA_N)).astype(np.int8)
        c = rng.integers(-(1 << 31), 1 << 31, (MMA_M, MMA_N), dtype=np.int64).astype(np.int32)
        if extreme:
            a[0], b[:, 0], c[0, 0] = -128, -128, np.iinfo(np.int32).max
        yield a, b, c


def _check_tile(name, a, b, c, k):
    require(tuple(a.shape) == (MMA_M, k) and tuple(b.shape) == (k, MMA_N) and tuple(c.shape) == (MMA_M, MMA_N),
            f"{name} takes a {MMA_M}x{k}, b {k}x{MMA_N} and c {MMA_M}x{MMA_N}, got {tuple(a.shape)}, "
            f"{tuple(b.shape)} and {tuple(c.shape)}")


@op(cases=_s8_cases, args={"a": f"int8[{MMA_M}, {MMA_K}]", "b": f"int8[{MMA_K}, {MMA_N}]",
                           "c": f"int32[{MMA_M}, {MMA_N}]"})
def reference_warp_mma_s8(a: Int8Array, b: Int8Array, c: Int32Array) -> Int32Array:
    """int32 (16, 8): a @ b + c with the products summed exactly and the result wrapped to its low 32
    bits, as one tensor-core IMMA m16n8k32 computes it (kernels/core/mma.py's mma_s8_16832).

    a, b: one int8 tile of each factor; c: the int32 accumulator added. The GPU self-check
    (kernels/checks/platform_check.py) compares the kernel with the CPU twin on these tiles."""
    _check_tile("warp_mma_s8", a, b, c, MMA_K)
    exact = a.astype(np.int64) @ b.astype(np.int64) + c
    return (exact & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


@numba.njit(cache=True)
def _cpu_s8(a, b, c, d):
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            acc = np.int64(c[i, j])
            for k in range(a.shape[1]):
                acc += np.int64(a[i, k]) * np.int64(b[k, j])
            d[i, j] = np.int32(acc & 0xFFFFFFFF)  # the low 32 bits, as the tensor core's int32 adder keeps


@op
def cpu_warp_mma_s8(a: Int8Array, b: Int8Array, c: Int32Array) -> Int32Array:
    _check_tile("warp_mma_s8", a, b, c, MMA_K)
    d = np.empty((MMA_M, MMA_N), np.int32)
    _cpu_s8(a, b, c, d)
    return d


@device_function
def _word(x0, x1, x2, x3):
    """Four int8 as one int32 register, lowest byte first; the top byte keeps its sign, so the word
    is in int32 range without a wrapping cast."""
    return np.int32((np.int32(x0) & 0xFF) | ((np.int32(x1) & 0xFF) << 8) | ((np.int32(x2) & 0xFF) << 16)
                    | (np.int32(x3) << 24))


@device_function
def _store_c(d, g, q, d0, d1, d2, d3):
    """A lane's four result registers to their places in D (the C fragment layout of kernels/core/mma.py)."""
    d[g, 2 * q] = d0
    d[g, 2 * q + 1] = d1
    d[g + 8, 2 * q] = d2
    d[g + 8, 2 * q + 1] = d3


@kernel((I8_2D, I8_2D, I32_2D, I32_2D), block=WARP)  # one mma, no loop: not marked tensor_cores (a hot-loop property)
def warp_mma_s8_cuda(a, b, c, d):
    """Each lane packs its fragment registers from A and B by the layout of kernels/core/mma.py."""
    lane = cuda.threadIdx.x
    g, q = lane // 4, lane % 4
    k = 4 * q
    a0 = _word(a[g, k], a[g, k + 1], a[g, k + 2], a[g, k + 3])
    a1 = _word(a[g + 8, k], a[g + 8, k + 1], a[g + 8, k + 2], a[g + 8, k + 3])
    a2 = _word(a[g, k + 16], a[g, k + 17], a[g, k + 18], a[g, k + 19])
    a3 = _word(a[g + 8, k + 16], a[g + 8, k + 17], a[g + 8, k + 18], a[g + 8, k + 19])
    b0 = _word(b[k, g], b[k + 1, g], b[k + 2, g], b[k + 3, g])
    b1 = _word(b[k + 16, g], b[k + 17, g], b[k + 18, g], b[k + 19, g])
    d0, d1, d2, d3 = mma_s8_16832(a0, a1, a2, a3, b0, b1, c[g, 2 * q], c[g, 2 * q + 1], c[g + 8, 2 * q],
                                  c[g + 8, 2 * q + 1])
    _store_c(d, g, q, d0, d1, d2, d3)


@op
def cuda_warp_mma_s8(a: BackendArray, b: BackendArray, c: BackendArray) -> BackendArray:
    _check_tile("warp_mma_s8", a, b, c, MMA_K)
    d = cuda.device_array((MMA_M, MMA_N), np.int32)
    warp_mma_s8_cuda[1, WARP](on_device(a, np.int8), on_device(b, np.int8), on_device(c, np.int32), d)
    return d


# --- warp_mma_tf32: one HMMA.1688.F32.TF32 ---------------------------------------------------------

def _tf32_cases(rng):
    for _ in range(2):
        yield normal32(rng, MMA_M, TF32_K), normal32(rng, TF32_K, MMA_N), normal32(rng, MMA_M, MMA_N)


@op(cases=_tf32_cases, tolerance=TF32_TOLERANCE,
    args={"a": f"float32[{MMA_M}, {TF32_K}]", "b": f"float32[{TF32_K}, {MMA_N}]", "c": f"float32[{MMA_M}, {MMA_N}]"})
def reference_warp_mma_tf32(a: Float32Array, b: Float32Array, c: Float32Array) -> Float64Array:
    """float64 (16, 8) (float32 on the other backends): tf32(a) @ tf32(b) + c, a and b rounded to tf32
    (10-bit mantissa, ties away from zero) as one tensor-core HMMA m16n8k8 does, the sum in float64
    (kernels/core/mma.py's mma_tf32_1688 accumulates in float32, within the tolerance).

    a, b: one float32 tile of each factor; c: the float32 accumulator added. The GPU self-check
    (kernels/checks/platform_check.py) compares the kernel with the CPU twin on these tiles."""
    _check_tile("warp_mma_tf32", a, b, c, TF32_K)
    return f64(round_tf32(a)) @ f64(round_tf32(b)) + f64(c)


@numba.njit(cache=True)
def _tf32(x):
    """cvt.rna.tf32.f32 on the bits: to the nearest 10-bit mantissa, ties away from zero."""
    bits = np.empty(1, np.float32)
    bits[0] = x
    word = np.int64(bits.view(np.uint32)[0])
    bits.view(np.uint32)[0] = np.uint32((word + 0x1000) & 0xFFFFE000)
    return bits[0]


@numba.njit(cache=True)
def _cpu_tf32(a, b, c, d):
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            acc = np.float64(c[i, j])
            for k in range(a.shape[1]):
                acc += np.float64(_tf32(a[i, k])) * np.float64(_tf32(b[k, j]))
            d[i, j] = np.float32(acc)


@op
def cpu_warp_mma_tf32(a: Float32Array, b: Float32Array, c: Float32Array) -> Float32Array:
    _check_tile("warp_mma_tf32", a, b, c, TF32_K)
    d = np.empty((MMA_M, MMA_N), np.float32)
    _cpu_tf32(a, b, c, d)
    return d


@kernel((F32_2D, F32_2D, F32_2D, F32_2D), block=WARP)  # one mma, no loop (as above)
def warp_mma_tf32_cuda(a, b, c, d):
    lane = cuda.threadIdx.x
    g, q = lane // 4, lane % 4
    d0, d1, d2, d3 = mma_tf32_1688(to_tf32(a[g, q]), to_tf32(a[g + 8, q]), to_tf32(a[g, q + 4]),
                                   to_tf32(a[g + 8, q + 4]), to_tf32(b[q, g]), to_tf32(b[q + 4, g]),
                                   c[g, 2 * q], c[g, 2 * q + 1], c[g + 8, 2 * q], c[g + 8, 2 * q + 1])
    _store_c(d, g, q, d0, d1, d2, d3)


@op
def cuda_warp_mma_tf32(a: BackendArray, b: BackendArray, c: BackendArray) -> BackendArray:
    _check_tile("warp_mma_tf32", a, b, c, TF32_K)
    d = cuda.device_array((MMA_M, MMA_N), np.float32)
    warp_mma_tf32_cuda[1, WARP](*(on_device(x, np.float32) for x in (a, b, c)), d)
    return d


# --- shared_reverse: dynamic shared memory past 48 KiB ---------------------------------------------

def _reverse_cases(rng):
    for n in (1, 300, 13_000):  # the last takes 52,000 bytes: over 48 KiB, so the opt-in on a GPU
        yield rng.integers(-(1 << 31), 1 << 31, n, dtype=np.int64).astype(np.int32),


def _check_vector(x):
    require(len(x.shape) == 1 and 0 < x.shape[0] <= 227 * 1024 // 4,
            f"shared_reverse takes 1 to {227 * 1024 // 4} int32 values (227 KiB of shared memory), "
            f"got shape {tuple(x.shape)}")


@op(cases=_reverse_cases, args={"x": "int32[n]"})
def reference_shared_reverse(x: Int32Array) -> Int32Array:
    """int32 (n,): x reversed. The kernel stages x in n * 4 bytes of dynamic shared memory, so n above
    12,288 (48 KiB) checks the driver's per-function opt-in; n is at most 227 KiB / 4 = 58,112.

    x: any int32 values (the self-check uses 64 KiB of them)."""
    _check_vector(x)
    return np.ascontiguousarray(x[::-1])


@op
@numba.njit(cache=True)
def cpu_shared_reverse(x: Int32Array) -> Int32Array:
    out = np.empty_like(x)
    for i in range(x.size):
        out[i] = x[x.size - 1 - i]
    return out


@kernel((I32_1D, I32_1D), block=SHARED_THREADS)
def shared_reverse_cuda(x, out):
    """Stage x in shared memory, then write it back reversed.

    Shared memory: a warp's 32 lanes store and load 32 consecutive int32 words (reversed order on the
    way out is still 32 distinct consecutive words), one per bank: no conflicts.
    """
    staged = cuda.shared.array(0, numba.int32)
    n = x.shape[0]
    for i in range(cuda.threadIdx.x, n, SHARED_THREADS):
        staged[i] = x[i]
    cuda.syncthreads()
    for i in range(cuda.threadIdx.x, n, SHARED_THREADS):
        out[i] = staged[n - 1 - i]


@op
def cuda_shared_reverse(x: BackendArray) -> BackendArray:
    _check_vector(x)
    x = on_device(x, np.int32)
    out = cuda.device_array(x.shape[0], np.int32)
    nbytes = 4 * x.shape[0]
    allow_dynamic_shared(shared_reverse_cuda, (x, out), nbytes)
    shared_reverse_cuda[1, SHARED_THREADS, 0, nbytes](x, out)
    return out


# --- grid_rotate: a cooperative launch and grid.sync -----------------------------------------------

def _rotate_cases(rng):
    for width in (1, 100):  # one block: what the simulator's sequential blocks can run
        yield rng.integers(-(1 << 40), 1 << 40, (1, width), dtype=np.int64),


def _check_rows(x):
    require(len(x.shape) == 2 and x.shape[0] > 0 and x.shape[1] > 0,
            f"grid_rotate takes rows (blocks, width), both at least 1, got shape {tuple(x.shape)}")


@op(cases=_rotate_cases, args={"x": "int64[blocks, width]"})
def reference_grid_rotate(x: Int64Array) -> Int64Array:
    """int64 (blocks,): out[g] = sum of row (g + 1) % blocks of x. The kernel runs one block per row,
    each writing its row's sum before one grid-wide barrier (a cooperative launch) and reading its
    neighbour's after it, so a broken grid.sync gives stale sums.

    x: one row per block, at least one of each (the self-check: one row per SM, 64 wide; numba's
    simulator runs blocks one after another, so there only blocks = 1 is right)."""
    _check_rows(x)
    return np.roll(x.sum(axis=1), -1)


@op
@numba.njit(cache=True)
def cpu_grid_rotate(x: Int64Array) -> Int64Array:
    sums = np.zeros(x.shape[0], np.int64)
    for g in range(x.shape[0]):
        for j in range(x.shape[1]):
            sums[g] += x[g, j]
    out = np.empty_like(sums)
    for g in range(x.shape[0]):
        out[g] = sums[(g + 1) % x.shape[0]]
    return out


@kernel((I64_2D, I64_1D, I64_1D), block=WARP)
def grid_rotate_cuda(x, sums, out):
    """Block g sums row g; after the grid-wide barrier it reads its neighbour's sum, which another
    block wrote: without a working grid.sync it reads a stale value."""
    g = cuda.blockIdx.x
    if cuda.threadIdx.x == 0:
        total = numba.int64(0)
        for j in range(x.shape[1]):
            total += x[g, j]
        sums[g] = total
    cuda.cg.this_grid().sync()
    if cuda.threadIdx.x == 0:
        out[g] = sums[(g + 1) % x.shape[0]]


@op
def cuda_grid_rotate(x: BackendArray) -> BackendArray:
    _check_rows(x)
    x = on_device(x, np.int64)
    sums = cuda.to_device(np.zeros(x.shape[0], np.int64))
    out = cuda.device_array(x.shape[0], np.int64)
    grid_rotate_cuda[x.shape[0], WARP](x, sums, out)
    return out

# the ops of this module by name, for callers: grid_rotate(kernels, ...)
grid_rotate = registered(reference_grid_rotate)
shared_reverse = registered(reference_shared_reverse)
warp_mma_s8 = registered(reference_warp_mma_s8)
warp_mma_tf32 = registered(reference_warp_mma_tf32)
