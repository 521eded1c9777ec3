"""Weighted sums of rows, accumulated in float64 where the rows live:

    weighted_row_sums(x (G, N) float32, w (N,) float32, out=None, scale=1.0) -> (G,) float64,
        out[g] = scale * sum_j x[g, j] w[j]
(into `out`, a float64 (G,) array of the backend, where given: a slot of a longer vector gathers the
sums of several calls for one copy to the host; `scale` turns sums into means there).

The losses of a step (a probe's or a member's per-token cross-entropies, masked) reduce to one number
per group on the device, so a GPU step copies G float64 scalars to the host instead of G N rows.
float64 because zero-order estimators difference these sums (CD-RGE's L+ - L-, float EGGROLL's
antithetic pairs): the product of two float32 numbers is exact in float64, so the only error is the
float64 summation's, about N 1e-16 relative, and the three backends agree to 1e-12 relative. The
GPU accumulates in float64 on purpose (a block per row, G N multiply-adds: negligible beside the
forward that produced the rows).
"""

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Float64Array, FloatArray
from eggnog.kernels.core.cpu_jit import parallel_jit
from eggnog.kernels.core.cuda_api import F32_1D, F32_2D, cuda, f64, kernel, require
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.reductions import block_sum
from eggnog.kernels.core.registry import normal32, op, registered

ROW_THREADS = 256  # one block per row; a power of two for the tree reduction
TOLERANCE = (1e-12, 1e-12)


def _cases(rng):
    """One element; a row shorter than a block; rows across several strides of the block; 0/1 masks;
    means (a scale) written into a given vector."""
    for groups, n in ((1, 1), (3, 200), (2, 1500)):
        yield normal32(rng, groups, n, scale=4.0), (rng.random(n) < 0.7).astype(np.float32)
    yield normal32(rng, 4, 700, scale=4.0), normal32(rng, 700)
    yield normal32(rng, 3, 50), normal32(rng, 50), np.full(3, np.nan), 1 / 7  # means, into a given vector


def _check(x, w, out):
    require(len(x.shape) == 2 and tuple(w.shape) == (x.shape[1],) and x.shape[1] > 0,
            f"weighted_row_sums takes rows (groups, n) with n > 0 and one weight per column, got rows "
            f"{tuple(x.shape)} and weights {tuple(w.shape)}")
    require(out is None or (tuple(out.shape) == (x.shape[0],) and out.dtype == np.float64),
            f"weighted_row_sums writes float64 ({x.shape[0]},), got {getattr(out, 'dtype', None)} "
            f"{tuple(getattr(out, 'shape', ()))}")


@op(cases=_cases, tolerance=TOLERANCE,
    args={"x": "float[groups, n]", "w": "float[n]", "out": "float64[groups] | None", "scale": "float"})
def reference_weighted_row_sums(x: FloatArray, w: FloatArray, out: Float64Array | None = None,
                                scale: float = 1.0) -> Float64Array:
    """scale * sum_j x[g, j] w[j] for each row g, accumulated in float64: a (groups,) float64 array of the
    backend (`out` itself when given): one number per probe or member to copy to the host.

    x: per-token losses, one row per group (a probe's or a member's); w: one weight per column (a 0/1 mask,
    ones, or any weights; on "cuda" it may be a host array); out: where the sums go, or None for a new
    array (a slot of a longer vector gathers several calls for one copy to the host); scale: a factor on
    every sum (1 / total weight makes means)."""
    _check(x, w, out)
    if out is None:
        return f64(x) @ f64(w) * scale
    out[...] = f64(x) @ f64(w) * scale
    return out


@parallel_jit
def _cpu_sums(x, w, scale, out):
    for g in numba.prange(x.shape[0]):
        acc = 0.0
        for j in range(x.shape[1]):
            acc += np.float64(x[g, j]) * np.float64(w[j])
        out[g] = acc * scale


@op
def cpu_weighted_row_sums(x: Float32Array, w: Float32Array, out: Float64Array | None = None,
                          scale: float = 1.0) -> Float64Array:
    _check(x, w, out)
    out = np.empty(x.shape[0], np.float64) if out is None else out
    _cpu_sums(np.ascontiguousarray(x, np.float32), np.ascontiguousarray(w, np.float32), np.float64(scale), out)
    return out


@kernel((F32_2D, F32_1D, numba.float64, numba.float64[::1]), float64_free=False, block=ROW_THREADS)
def weighted_row_sums_cuda(x, w, scale, out):
    """Block g: each thread strides over row g in float64, then one tree sum.

    Shared memory: one float64 slot per thread; the tree sum's consecutive threads touch consecutive
    8-byte words, which a warp's 64-bit access serves in two conflict-free phases of 16 lanes.
    """
    g, t = cuda.blockIdx.x, cuda.threadIdx.x
    partial = cuda.shared.array(ROW_THREADS, numba.float64)
    acc = 0.0
    for j in range(t, x.shape[1], ROW_THREADS):
        acc += np.float64(x[g, j]) * np.float64(w[j])
    partial[t] = acc
    total = block_sum(partial, t)
    if t == 0:
        out[g] = total * scale


@op
def cuda_weighted_row_sums(x: BackendArray, w: BackendArray, out: BackendArray | None = None,
                           scale: float = 1.0) -> BackendArray:
    """x and w on the device (w may come from the host); the sums stay on the device."""
    _check(x, w, out)
    if not hasattr(w, "copy_to_host"):
        w = cuda.to_device(np.ascontiguousarray(w, np.float32))
    out = cuda.device_array(x.shape[0], np.float64) if out is None else out
    weighted_row_sums_cuda[x.shape[0], ROW_THREADS](x, w, np.float64(scale), out)
    return out


def weighted_means(ops, rows, weights, groups=1):
    """Host float64 (groups,): each group's weighted mean of `rows` (groups * n values on the backend,
    group-major) under host `weights` (n,); only the means leave the device."""
    weights = np.asarray(weights, np.float64)
    sums = weighted_row_sums(ops, rows.reshape(groups, weights.size), weights.astype(np.float32))
    return np.asarray(ops.to_host(sums), np.float64) / weights.sum()

# the ops of this module by name, for callers: weighted_row_sums(kernels, ...)
weighted_row_sums = registered(reference_weighted_row_sums)
