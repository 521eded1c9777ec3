"""The integer EGGROLL update of one tensor from all pair fitnesses (nano-egg, paper App. H.3):
`int_update(theta, fitness, prefix, kind, threshold, use_clt)` moves theta in place.

    Z = sum_p F_p * A_p B_p^T      (kind "matrix", embeddings too; the even member's noise, int32 accumulation)
    Z = sum_p F_p * a1_p * a2_p    (kind "vector")
    move = |Z| * 16 >= thr * isqrt(P) * scale,  scale = 256 with use_clt (products of two 16-scaled
           normals; 80 and 240, the variances, for d-eggs' uniform and three-draw noise), 1 without
           (signs of the noise replace the noise)
    theta = clip(theta + (Z > 0 ? +1 : -1), +-127) where move

Z = 0 moves down, as in nano-egg (this only matters while thr = 0). `thr` already carries the
fitness scale (see evolution.eggroll). Noise is regenerated from each pair's key, never stored; its
kind (`noise`, scalar_math.member_noise) is the EGG's gaussian_int8 unless given (d-eggs' transformer).

More in docs/internals.md (kernels/egg/int_update.py)."""

from typing import Any

import numba
import numpy as np

from eggnog.kernels.core.array_types import Int8Array, Int64Array
from eggnog.kernels.core.cuda_api import BOOL, I8_1D, I8_2D, I64, I64_1D, I64_2D, blocks, cuda, kernel
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import op, registered
from eggnog.kernels.egg.int_math import iroot
from eggnog.kernels.egg.member_ops import cpu_clip8, gpu_clip8
from eggnog.kernels.noise import reference
from eggnog.kernels.noise.scalar_math import DEGGS_GAUSSIAN, DEGGS_UNIFORM, EGG_NOISE
from eggnog.kernels.noise.streams import (
    cpu_member_key_a,
    cpu_member_key_b,
    cpu_member_noise,
    gpu_member_key_a,
    gpu_member_key_b,
    gpu_member_noise,
)
from eggnog.runtime.errors import BadInput

KINDS = ("matrix", "vector")
TILE = 16
PAIR_CHUNK = 32


# the standard deviation of a product of two noise values, per noise kind: the z-test's unit
PRODUCT_SCALE = {EGG_NOISE: 256, DEGGS_UNIFORM: 80, DEGGS_GAUSSIAN: 240}


def gate_bound(theta, fitness, kind, threshold, use_clt, noise=EGG_NOISE, op_name="int_update"):
    """Right-hand side of the z-test gate |Z| * 16 >= bound, after the checks the declarations cannot make:
    theta's rank follows `kind`, and the noise kind is known."""
    if kind not in KINDS:
        raise BadInput(f"{op_name}: kind must be 'matrix' or 'vector', got {kind!r}")
    dtype = str(theta.dtype).rsplit(".", 1)[-1]  # "torch.int8" for a PyTorch tensor, "int8" for the others
    if dtype != "int8" or theta.ndim != (1 if kind == "vector" else 2):
        raise BadInput(f"{op_name}: theta of kind {kind!r} must be a {1 if kind == 'vector' else 2}-D int8 array, "
                       f"got {theta.ndim}-D {dtype}")
    if noise not in PRODUCT_SCALE:
        raise BadInput(f"{op_name}: noise must be one of the noise kinds {sorted(PRODUCT_SCALE)}, got {noise!r}")
    return int(threshold) * iroot(int(fitness.shape[0]), 2) * (PRODUCT_SCALE[noise] if use_clt else 1)


def _cases(rng):
    """Both kinds with and without the CLT scale; pairs across the 32-pair chunk, matrices off the
    16 x 16 tile, vectors over two blocks, saturated parameters, and a zero threshold (Z = 0 moves down)."""
    for kind, shape, pairs, threshold, use_clt in (
            ("matrix", (18, 21), 36, 0, True), ("matrix", (40, 8), 36, 24, False), ("matrix", (7, 12), 12, 18, True),
            ("vector", (45,), 36, 18, True), ("vector", (300,), 8, 6, False), ("vector", (9,), 12, 0, True)):
        theta = rng.integers(-127, 128, shape).astype(np.int8)
        theta.flat[:2] = [127, -127]
        fitness = rng.integers(-1, 2, pairs).astype(np.int8)
        yield theta, fitness, 555, kind, threshold, use_clt
    for kind, shape, noise in (("matrix", (18, 21), DEGGS_UNIFORM), ("vector", (45,), DEGGS_GAUSSIAN)):
        theta = rng.integers(-127, 128, shape).astype(np.int8)
        yield theta, rng.integers(-1, 2, 36).astype(np.int8), 555, kind, 3, True, noise


def _reference_votes(theta, fitness, prefix, kind, use_clt, noise_kind):
    n_pairs = fitness.size
    f = fitness.astype(np.int64)
    if kind == "vector":
        noise = reference.member_noise_rows(prefix, np.arange(n_pairs), 2 * theta.size, noise_kind)
        product = noise[:, :theta.size] * noise[:, theta.size:]
        z = (f[:, None] * (np.sign(product) if not use_clt else product)).sum(axis=0)
    else:
        d_out, d_in = theta.shape
        noise = reference.member_noise_rows(prefix, np.arange(n_pairs), d_in + d_out, noise_kind)
        b, a = noise[:, :d_in], noise[:, d_in:]
        if not use_clt:
            a, b = np.sign(a), np.sign(b)
        z = (f[:, None] * a).T @ b
    return z


# theta is a matrix or a vector as `kind` says: the grammar has no rank that depends on another argument,
# so gate_bound checks it
@op(cases=_cases, args={"theta": "any", "fitness": "int8[pairs]", "prefix": "int", "kind": "str", "threshold": "int",
                        "use_clt": "bool", "noise": "int"})
def reference_int_update(theta: Any, fitness: Int8Array, prefix: int, kind: str, threshold: int, use_clt: bool,
                         noise: int = EGG_NOISE) -> None:
    """Move theta (int8, in place) by +-1 where the z-test on the pairs' fitness-weighted noise passes;
    returns None. Z = sum_p fitness[p] * A_p B_p^T for a matrix, sum_p fitness[p] * a1_p * a2_p for a
    vector (the signs of the noise instead without use_clt); theta moves towards sign(Z) (Z = 0: down)
    where |Z| * 16 >= threshold * isqrt(pairs) * scale, and stays clipped to +-127 (module docstring).

    theta: one tensor of the model's flat buffer, int8 (d_out, d_in) for kind "matrix" (embeddings too:
    B over the columns, A over the rows) or (n,) for kind "vector". fitness: the shaped fitness of every
    antithetic pair of the population, int8 (evolution/eggroll.py `shape`: signs, or z-scores x 16).
    prefix: the tensor's noise key at the step's noise epoch (`model.prefixes(seed, epoch)[name]`); pair
    p's noise is the even member's stream keyed by (prefix, p). threshold: the gate's level, already
    times the fitness scale (`threshold_at`). use_clt: scale the gate by the product's standard deviation
    (256 for gaussian_int8) and vote with the noise itself, else with its signs. noise: the noise kind
    (scalar_math: EGG_NOISE, DEGGS_UNIFORM, DEGGS_GAUSSIAN), the model's `noise_kind`."""
    bound = gate_bound(theta, fitness, kind, threshold, use_clt, noise)
    z = _reference_votes(theta, fitness, prefix, kind, use_clt, noise)
    move = np.abs(z) * 16 >= bound
    step = np.where(z > 0, 1, -1)
    theta[...] = np.where(move, np.clip(theta.astype(np.int64) + step, -127, 127), theta)


@numba.njit(cache=True)
def _cpu_noise_rows(prefix, n_pairs, width, use_clt, noise):
    rows = np.empty((n_pairs, width), dtype=np.int64)
    for p in numba.prange(n_pairs):
        ka = cpu_member_key_a(prefix, p)
        kb = cpu_member_key_b(ka)
        for k in range(width):
            v = cpu_member_noise(ka, kb, k, noise)
            rows[p, k] = v if use_clt else (v > 0) - (v < 0)
    return rows


@numba.njit(parallel=True, cache=True)
def _cpu_matrix(theta, fitness, prefix, use_clt, bound, votes, noise):
    d_out, d_in = theta.shape
    rows = _cpu_noise_rows(prefix, fitness.size, d_in + d_out, use_clt, noise)
    for j in numba.prange(d_out):
        z = np.zeros(d_in, dtype=np.int64)
        for p in range(fitness.size):
            c = np.int64(fitness[p]) * rows[p, d_in + j]
            if c != 0:
                for k in range(d_in):
                    z[k] += c * rows[p, k]
        for k in range(d_in):
            if votes.size:
                votes[j, k] = z[k]
            elif abs(z[k]) * 16 >= bound:
                theta[j, k] = cpu_clip8(np.int64(theta[j, k]) + (1 if z[k] > 0 else -1))


@numba.njit(parallel=True, cache=True)
def _cpu_vector(theta, fitness, prefix, use_clt, bound, votes, noise):
    n = theta.size
    rows = _cpu_noise_rows(prefix, fitness.size, 2 * n, True, noise)
    for j in numba.prange(n):
        z = 0
        for p in range(fitness.size):
            product = rows[p, j] * rows[p, n + j]
            z += np.int64(fitness[p]) * (product if use_clt else (product > 0) - (product < 0))
        if votes.size:
            votes[j] = z
        elif abs(z) * 16 >= bound:
            theta[j] = cpu_clip8(np.int64(theta[j]) + (1 if z > 0 else -1))


def _no_votes(kind):
    return np.zeros((0,) if kind == "vector" else (0, 0), dtype=np.int64)


@op
def cpu_int_update(theta: Any, fitness: Int8Array, prefix: int, kind: str, threshold: int, use_clt: bool,
                   noise: int = EGG_NOISE) -> None:
    bound = gate_bound(theta, fitness, kind, threshold, use_clt, noise)
    (_cpu_vector if kind == "vector" else _cpu_matrix)(theta, fitness, prefix, use_clt, bound, _no_votes(kind), noise)


def _vote_cases(rng):
    for theta, fitness, prefix, kind, _, use_clt, *noise in _cases(rng):
        yield theta, fitness, prefix, kind, use_clt, *noise


# theta: as int_update's
@op(cases=_vote_cases, args={"theta": "any", "fitness": "int8[pairs]", "prefix": "int", "kind": "str",
                             "use_clt": "bool", "noise": "int"})
def reference_int_vote(theta: Any, fitness: Int8Array, prefix: int, kind: str, use_clt: bool,
                       noise: int = EGG_NOISE) -> Int64Array:
    """int64, theta's shape: the votes Z of `int_update` without its gate, for an optimiser that moves
    theta itself (evolution/int_optimizers.py's quantized AdamW); theta is only read.

    Z = sum_p fitness[p] * A_p B_p^T for kind "matrix" ((d_out, d_in)), sum_p fitness[p] * a1_p * a2_p for
    kind "vector" ((n,)); with use_clt False the noise's signs replace the noise. fitness: each antithetic
    pair's shaped fitness. prefix: the tensor's noise key at the step's noise epoch; pair p's noise is the
    even member's stream keyed by (prefix, p). noise: the noise kind (scalar_math), the model's
    `noise_kind`."""
    gate_bound(theta, fitness, kind, 0, use_clt, noise, "int_vote")
    return _reference_votes(theta, fitness, prefix, kind, use_clt, noise).astype(np.int64)


@op
def cpu_int_vote(theta: Any, fitness: Int8Array, prefix: int, kind: str, use_clt: bool,
                 noise: int = EGG_NOISE) -> Int64Array:
    gate_bound(theta, fitness, kind, 0, use_clt, noise, "int_vote")
    votes = np.empty(theta.shape, dtype=np.int64)
    (_cpu_vector if kind == "vector" else _cpu_matrix)(theta, fitness, prefix, use_clt, 0, votes, noise)
    return votes


@kernel((I8_2D, I8_1D, I64, BOOL, I64, I64_2D, I64), block=TILE * TILE)
def matrix_update_cuda(theta, fitness, prefix, use_clt, bound, votes, noise):
    """One thread per element of a 16 x 16 tile; pairs are staged through shared memory in chunks,
    each thread generating noise for one (pair, row) and one (pair, column) of the chunk."""
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    k = cuda.blockIdx.x * TILE + tx
    j = cuda.blockIdx.y * TILE + ty
    d_out, d_in = theta.shape
    a_tile = cuda.shared.array((PAIR_CHUNK, TILE), numba.int32)  # F_p * A_p[j] of the tile's rows
    b_tile = cuda.shared.array((PAIR_CHUNK, TILE), numba.int32)  # B_p[k] of the tile's columns
    z = np.int64(0)
    flat = ty * TILE + tx
    for p0 in range(0, fitness.size, PAIR_CHUNK):
        for slot in range(flat, PAIR_CHUNK * TILE, TILE * TILE):
            q = slot // TILE
            r = slot % TILE
            p = p0 + q
            av = 0
            bv = 0
            if p < fitness.size:
                ka = gpu_member_key_a(prefix, p)
                kb = gpu_member_key_b(ka)
                row = cuda.blockIdx.y * TILE + r
                col = cuda.blockIdx.x * TILE + r
                if row < d_out:
                    av = gpu_member_noise(ka, kb, d_in + row, noise)
                if col < d_in:
                    bv = gpu_member_noise(ka, kb, col, noise)
                if not use_clt:  # signs; int64 casts keep the simulator off numpy bool arithmetic
                    av = np.int64(av > 0) - np.int64(av < 0)
                    bv = np.int64(bv > 0) - np.int64(bv < 0)
                av *= np.int64(fitness[p])
            a_tile[q, r] = av
            b_tile[q, r] = bv
        cuda.syncthreads()
        for q in range(PAIR_CHUNK):
            z += a_tile[q, ty] * b_tile[q, tx]
        cuda.syncthreads()
    if j < d_out and k < d_in:
        if votes.size:
            votes[j, k] = z
        elif abs(z) * 16 >= bound:
            theta[j, k] = gpu_clip8(np.int64(theta[j, k]) + (1 if z > 0 else -1))


@kernel((I8_1D, I8_1D, I64, BOOL, I64, I64_1D, I64))
def vector_update_cuda(theta, fitness, prefix, use_clt, bound, votes, noise):
    j = cuda.grid(1)
    n = theta.size
    if j < n:
        z = np.int64(0)
        for p in range(fitness.size):
            ka = gpu_member_key_a(prefix, p)
            kb = gpu_member_key_b(ka)
            product = gpu_member_noise(ka, kb, j, noise) * gpu_member_noise(ka, kb, n + j, noise)
            if not use_clt:
                product = np.int64(product > 0) - np.int64(product < 0)
            z += np.int64(fitness[p]) * product
        if votes.size:
            votes[j] = z
        elif abs(z) * 16 >= bound:
            theta[j] = gpu_clip8(np.int64(theta[j]) + (1 if z > 0 else -1))


def _cuda_launch(theta, fitness, prefix, kind, use_clt, bound, votes, noise):
    if kind == "vector":
        vector_update_cuda[blocks(theta.shape[0])](theta, fitness, np.int64(prefix), bool(use_clt), bound, votes,
                                                   np.int64(noise))
    else:
        d_out, d_in = theta.shape
        grid = ((d_in + TILE - 1) // TILE, (d_out + TILE - 1) // TILE)
        matrix_update_cuda[grid, (TILE, TILE)](theta, fitness, np.int64(prefix), bool(use_clt), bound, votes,
                                               np.int64(noise))


@op
def cuda_int_update(theta: Any, fitness: BackendArray, prefix: int, kind: str, threshold: int, use_clt: bool,
                    noise: int = EGG_NOISE) -> None:
    bound = np.int64(gate_bound(theta, fitness, kind, threshold, use_clt, noise))
    _cuda_launch(theta, fitness, prefix, kind, use_clt, bound, cuda.to_device(_no_votes(kind)), noise)


@op
def cuda_int_vote(theta: Any, fitness: BackendArray, prefix: int, kind: str, use_clt: bool,
                  noise: int = EGG_NOISE) -> BackendArray:
    gate_bound(theta, fitness, kind, 0, use_clt, noise, "int_vote")
    votes = cuda.device_array(theta.shape, dtype=np.int64)
    _cuda_launch(theta, fitness, prefix, kind, use_clt, np.int64(0), votes, noise)
    return votes

# the ops of this module by name, for callers: int_update(kernels, ...)
int_update = registered(reference_int_update)
int_vote = registered(reference_int_vote)
