"""The element-wise and row-wise operations of the EGG model over a population of members (its
matmul is int_matmul, its update int_update). All integer: reference, twin and kernel agree bit for bit.

    egg_vector(theta, prefix, first_member, count, sigma_shift, perturbed)   each member's copy of a vector
    egg_embedding(tokens, table, prefix, first_member, sigma_shift, perturbed)   each member's embedding row
    egg_l1_norm(x, w)                  EGG_LN: x * w / mean|x| per row (one 64-thread block per row)
    egg_gru_forget(xf, sf, bf, s)      f = clip(xf + sf + bf), fh = ((f + 127) * s) >> 8
    egg_gru_output(xh, fhh, bh, f, s)  h = s + (((f + 127) * (clip(xh + fhh + bh) - s)) >> 8)
    egg_clip_add(a, b)                 clip(a + b)
    egg_reset(state, tokens)           zeroes the state rows whose token is 0, in place
    egg_loglik(logits, targets)        log-likelihood of each row's target in 1/16 bit (int_math)

More in docs/internals.md (kernels/egg/member_ops.py)."""

import numba
import numpy as np

from eggnog.kernels.core.array_types import Int8Array, Int64Array, UInt8Array
from eggnog.kernels.core.cuda_api import (
    BOOL,
    I8_1D,
    I8_2D,
    I64,
    I64_1D,
    U8_1D,
    blocks,
    cuda,
    device_function,
    grid2,
    kernel,
)
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.reductions import block_total
from eggnog.kernels.core.registry import op, registered
from eggnog.kernels.egg.int_math import EXP2, FIXED_POINT, build
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

py_clip8, py_floor_log2_x16, py_l1_norm_value, py_gru_gate, py_gru_mix = build(lambda f: f)
cpu_clip8, cpu_floor_log2_x16, cpu_l1_norm_value, cpu_gru_gate, cpu_gru_mix = build(numba.njit)
gpu_clip8, gpu_floor_log2_x16, gpu_l1_norm_value, gpu_gru_gate, gpu_gru_mix = build(device_function)

ROW_THREADS = 64  # egg_l1_norm: one block per row; a power of two for the tree sum


def _members(first_member, count):
    members = first_member + np.arange(count)
    return members >> 1, 1 - 2 * (members & 1)


def _clip(a):
    return np.clip(a, -127, 127).astype(np.int8)


def _int8(rng, shape, scale=16):
    return np.clip(np.rint(rng.normal(0, scale, shape)), -127, 127).astype(np.int8)


# ---- cases: odd first members, unperturbed runs, saturated values, sizes off the 32 x 8 grid --------

def _vector_cases(rng):
    for n, first, count, sigma_shift, perturbed in ((37, 0, 5, 2, True), (70, 3, 9, 0, True), (33, 2, 4, 5, False)):
        theta = _int8(rng, n, 40)
        theta[:2] = [127, -127]
        yield theta, 77, first, count, sigma_shift, perturbed
    theta = _int8(rng, 45, 40)
    yield theta, 77, 1, 6, 0, True, random_gains(rng, theta.size)


def _embedding_cases(rng):
    tokens = np.array([0, 255, 7, 7, 100, 3, 3, 200, 1], dtype=np.uint8)
    for dim, first, sigma_shift, perturbed in ((24, 0, 3, True), (40, 5, 0, True), (33, 1, 3, False)):
        table = _int8(rng, (256, dim), 40)
        table[7, :3] = [127, -127, 127]
        yield tokens, table, 31, first, sigma_shift, perturbed
    table = _int8(rng, (256, 24), 40)
    yield tokens, table, 31, 1, 0, True, random_gains(rng, 24 + 256)


def _l1_norm_cases(rng):
    """Widths below, at and across the 64-thread row block; nano-egg's all-zero row (mean |x| < 1)."""
    for rows, width in ((6, 40), (3, 64), (4, 150)):
        x, w = _int8(rng, (rows, width)), _int8(rng, (rows, width))
        x[1] = 0
        x[2] = 0
        x[2, :width // 30] = 3  # mean |x| < 1 with some products non-zero: -2 there
        if rows > 3:
            x[3] = 127
        yield x, w


def _gru_forget_cases(rng):
    for shape in ((4, 33), (9, 8)):
        a, b, c, s = (_int8(rng, shape, 60) for _ in range(4))
        s[0] = 127
        yield a, b, c, s


def _gru_output_cases(rng):
    for a, b, c, s in _gru_forget_cases(rng):
        yield a, b, c, reference_egg_gru_forget(a, b, c, s)[0], s


def _clip_add_cases(rng):
    for shape in ((4, 33), (9, 8)):
        yield _int8(rng, shape, 80), _int8(rng, shape, 80)


def _reset_cases(rng):
    yield _int8(rng, (4, 10)), np.array([0, 5, 0, 9], dtype=np.uint8)
    yield _int8(rng, (9, 40)), np.array([1, 0, 0, 2, 3, 0, 4, 5, 0], dtype=np.uint8)


def _loglik_cases(rng):
    for scale, rows in ((16, 40), (127, 260)):  # the second runs two blocks
        logits = _int8(rng, (rows, 256), scale)
        logits[0] = 127
        logits[1] = -127
        yield logits, rng.integers(0, 256, rows).astype(np.uint8)


# ---- perturbed vector parameters ---------------------------------------------------------------

@op(cases=_vector_cases, args={"theta": "int8[n]", "prefix": "int", "first_member": "int", "count": "int",
                               "sigma_shift": "int", "perturbed": "bool", "gain": "uint8[n] | None"})
def reference_egg_vector(theta: Int8Array, prefix: int, first_member: int, count: int, sigma_shift: int,
                         perturbed: bool = True, gain: UInt8Array | None = None) -> Int8Array:
    """int8 (count, n): each member's copy of the vector parameter theta, plus its own EGGROLL perturbation
    when `perturbed`: theta + (a1 * a2 * sign) >> (4 + sigma_shift), clipped to +-127.

    theta: the vector (a norm's weights or a bias), shared by all members.
    prefix: the noise key of this tensor at this noise epoch, `model.prefixes(seed, epoch)[name]`
    (models/egg.py). first_member, count: rows are members g = first_member .. first_member + count - 1;
    member g uses pair p = g // 2's noise stream (a1: elements 0..n-1, a2: n..2n-1 of `gaussian_int8`
    keyed by (prefix, p)) with sign +1 for even g and -1 for odd.
    sigma_shift: the perturbation is divided by 2**(4 + sigma_shift). perturbed: False repeats theta.
    gain: the adaptive-noise gains of this tensor (uint8, 64 = one) scaling a1 element by element, or None."""
    out = np.broadcast_to(theta.astype(np.int64), (count, theta.size))
    if perturbed:
        pairs, sign = _members(first_member, count)
        noise = reference.gaussian_rows(prefix, pairs, 0, 2 * theta.size)
        a1 = noise[:, :theta.size] if gain is None else scaled_reference(noise[:, :theta.size], gain)
        out = out + ((a1 * noise[:, theta.size:] * sign[:, None]) >> (FIXED_POINT + sigma_shift))
    return _clip(out)


@numba.njit(parallel=True, cache=True)
def _cpu_vector(theta, out, prefix, first_member, shift, perturbed, gain, scaled):
    n = theta.size
    for i in numba.prange(out.shape[0]):
        g = first_member + i
        ka = cpu_member_key_a(prefix, g >> 1)
        kb = cpu_member_key_b(ka)
        for j in range(n):
            v = np.int64(theta[j])
            if perturbed:
                a1 = cpu_gaussian_int8(cpu_bits_of(cpu_round1(ka, j), kb))
                if scaled:
                    a1 = (a1 * np.int64(gain[j])) >> GAIN_SHIFT
                a2 = cpu_gaussian_int8(cpu_bits_of(cpu_round1(ka, n + j), kb))
                v += (a1 * a2 * (1 - 2 * (g & 1))) >> shift
            out[i, j] = cpu_clip8(v)


@op
def cpu_egg_vector(theta: Int8Array, prefix: int, first_member: int, count: int, sigma_shift: int,
                   perturbed: bool = True, gain: UInt8Array | None = None) -> Int8Array:
    out = np.empty((count, theta.size), dtype=np.int8)
    _cpu_vector(theta, out, prefix, first_member, FIXED_POINT + sigma_shift, perturbed, *kernel_args(gain))
    return out


@kernel((I8_1D, I8_2D, I64, I64, I64, BOOL, U8_1D, BOOL))
def vector_cuda(theta, out, prefix, first_member, shift, perturbed, gain, scaled):
    j, i = cuda.grid(2)
    n = theta.size
    if i < out.shape[0] and j < n:
        v = np.int64(theta[j])
        if perturbed:
            g = first_member + i
            ka = gpu_member_key_a(prefix, g >> 1)
            kb = gpu_member_key_b(ka)
            a1 = gpu_gaussian_int8(gpu_bits_of(gpu_round1(ka, j), kb))
            if scaled:
                a1 = (a1 * np.int64(gain[j])) >> GAIN_SHIFT
            a2 = gpu_gaussian_int8(gpu_bits_of(gpu_round1(ka, n + j), kb))
            v += (a1 * a2 * (1 - 2 * (g & 1))) >> shift
        out[i, j] = gpu_clip8(v)


@op
def cuda_egg_vector(theta: BackendArray, prefix: int, first_member: int, count: int, sigma_shift: int,
                    perturbed: bool = True, gain: BackendArray | None = None) -> BackendArray:
    out = cuda.device_array((count, theta.shape[0]), dtype=np.int8)
    vector_cuda[grid2(theta.shape[0], count)](theta, out, np.int64(prefix), np.int64(first_member),
                                              np.int64(FIXED_POINT + sigma_shift), bool(perturbed),
                                              *device_args(gain))
    return out


# ---- perturbed embedding lookup ----------------------------------------------------------------

@op(cases=_embedding_cases, args={"tokens": "uint8[members]", "table": "int8[256, dim]", "prefix": "int",
                                  "first_member": "int", "sigma_shift": "int", "perturbed": "bool",
                                  "gain": "uint8[dim + 256] | None"})
def reference_egg_embedding(tokens: UInt8Array, table: Int8Array, prefix: int, first_member: int, sigma_shift: int,
                            perturbed: bool = True, gain: UInt8Array | None = None) -> Int8Array:
    """int8 (members, dim): each member's embedding row of its input byte, with its own EGGROLL rank-1
    perturbation when `perturbed`: table[t] + (A_p[t] * sign * B_p) >> (4 + sigma_shift), clipped to +-127.

    tokens: one input byte per member. table: the embedding (one row per byte value), shared.
    prefix: the noise key of the embedding at this noise epoch, `model.prefixes(seed, epoch)["embedding"]`.
    first_member: the population index of tokens[0]; member g = first_member + i uses pair p = g // 2's
    noise stream (B_p: elements 0..dim-1, A_p: dim..dim+255 of `gaussian_int8` keyed by (prefix, p)) with
    sign +1 for even g and -1 for odd. sigma_shift: the perturbation is divided by 2**(4 + sigma_shift).
    perturbed: False gives the plain lookup. gain: the adaptive-noise gains (uint8, 64 = one) scaling
    B_p (first dim) and A_p (last 256) element by element, or None."""
    out = table[tokens].astype(np.int64)
    if perturbed:
        vocab, dim = table.shape
        pairs, sign = _members(first_member, tokens.size)
        noise = reference.gaussian_rows(prefix, pairs, 0, dim + vocab)
        if gain is not None:
            noise = scaled_reference(noise, gain)
        a = noise[np.arange(tokens.size), dim + tokens.astype(np.int64)] * sign
        out = out + ((a[:, None] * noise[:, :dim]) >> (FIXED_POINT + sigma_shift))
    return _clip(out)


@numba.njit(parallel=True, cache=True)
def _cpu_embedding(tokens, table, out, prefix, first_member, shift, perturbed, gain, scaled):
    dim = table.shape[1]
    for i in numba.prange(tokens.size):
        g = first_member + i
        t = np.int64(tokens[i])
        ka = cpu_member_key_a(prefix, g >> 1)
        kb = cpu_member_key_b(ka)
        a = cpu_gaussian_int8(cpu_bits_of(cpu_round1(ka, dim + t), kb))
        if scaled:
            a = (a * np.int64(gain[dim + t])) >> GAIN_SHIFT
        a *= 1 - 2 * (g & 1)
        for j in range(dim):
            v = np.int64(table[t, j])
            if perturbed:
                b = cpu_gaussian_int8(cpu_bits_of(cpu_round1(ka, j), kb))
                if scaled:
                    b = (b * np.int64(gain[j])) >> GAIN_SHIFT
                v += (a * b) >> shift
            out[i, j] = cpu_clip8(v)


@op
def cpu_egg_embedding(tokens: UInt8Array, table: Int8Array, prefix: int, first_member: int, sigma_shift: int,
                      perturbed: bool = True, gain: UInt8Array | None = None) -> Int8Array:
    out = np.empty((tokens.size, table.shape[1]), dtype=np.int8)
    _cpu_embedding(tokens, table, out, prefix, first_member, FIXED_POINT + sigma_shift, perturbed, *kernel_args(gain))
    return out


@kernel((U8_1D, I8_2D, I8_2D, I64, I64, I64, BOOL, U8_1D, BOOL))
def embedding_cuda(tokens, table, out, prefix, first_member, shift, perturbed, gain, scaled):
    j, i = cuda.grid(2)
    dim = table.shape[1]
    if i < tokens.size and j < dim:
        t = np.int64(tokens[i])
        v = np.int64(table[t, j])
        if perturbed:
            g = first_member + i
            ka = gpu_member_key_a(prefix, g >> 1)
            kb = gpu_member_key_b(ka)
            a = gpu_gaussian_int8(gpu_bits_of(gpu_round1(ka, dim + t), kb))
            b = gpu_gaussian_int8(gpu_bits_of(gpu_round1(ka, j), kb))
            if scaled:
                a = (a * np.int64(gain[dim + t])) >> GAIN_SHIFT
                b = (b * np.int64(gain[j])) >> GAIN_SHIFT
            v += ((1 - 2 * (g & 1)) * a * b) >> shift
        out[i, j] = gpu_clip8(v)


@op
def cuda_egg_embedding(tokens: BackendArray, table: BackendArray, prefix: int, first_member: int, sigma_shift: int,
                       perturbed: bool = True, gain: BackendArray | None = None) -> BackendArray:
    out = cuda.device_array((tokens.shape[0], table.shape[1]), dtype=np.int8)
    embedding_cuda[grid2(table.shape[1], tokens.shape[0])](tokens, table, out, np.int64(prefix),
                                                           np.int64(first_member),
                                                           np.int64(FIXED_POINT + sigma_shift), bool(perturbed),
                                                           *device_args(gain))
    return out


# ---- L1 norm (EGG_LN): x * w / mean|x| ----------------------------------------------------------

@op(cases=_l1_norm_cases, args={"x": "int8[members, dim]", "w": "int8[members, dim]"})
def reference_egg_l1_norm(x: Int8Array, w: Int8Array) -> Int8Array:
    """int8 (members, dim): EGG's L1 norm of each member's row, floor(x * w / mean|x|) clipped to +-127,
    where mean|x| = max(sum|x|, 1) // dim; a row with mean|x| < 1 gives nano-egg's -1 where x * w == 0
    and -2 elsewhere.

    x: the activations, one row per member. w: each member's copy of the norm's weights (16 = one),
    as `egg_vector` makes them."""
    x64, w64 = x.astype(np.int64), w.astype(np.int64)
    mean_abs = (np.maximum(np.abs(x64).sum(axis=1), 1) // x.shape[1])[:, None]
    product = x64 * w64
    safe = np.where(mean_abs == 0, 1, mean_abs)
    normed = np.clip(product // safe, -127, 127)
    return np.where(mean_abs == 0, np.where(product == 0, -1, -2), normed).astype(np.int8)


@numba.njit(parallel=True, cache=True)
def _cpu_l1_norm(x, w, out):
    dim = x.shape[1]
    for i in numba.prange(x.shape[0]):
        total = 0
        for j in range(dim):
            total += abs(np.int64(x[i, j]))
        mean_abs = max(total, 1) // dim
        for j in range(dim):
            out[i, j] = cpu_l1_norm_value(np.int64(x[i, j]), np.int64(w[i, j]), mean_abs)


@op
def cpu_egg_l1_norm(x: Int8Array, w: Int8Array) -> Int8Array:
    out = np.empty_like(x)
    _cpu_l1_norm(x, w, out)
    return out


@kernel((I8_2D, I8_2D, I8_2D), block=ROW_THREADS)
def l1_norm_cuda(x, w, out):
    """One block per member: a block sum of |x|, then every thread writes its outputs."""
    i, t, dim = cuda.blockIdx.x, cuda.threadIdx.x, x.shape[1]
    partial = cuda.shared.array(ROW_THREADS, numba.int64)
    acc = 0
    for j in range(t, dim, ROW_THREADS):
        acc += abs(np.int64(x[i, j]))
    mean_abs = max(block_total(acc, partial, t), 1) // dim
    for j in range(t, dim, ROW_THREADS):
        out[i, j] = gpu_l1_norm_value(np.int64(x[i, j]), np.int64(w[i, j]), mean_abs)


@op
def cuda_egg_l1_norm(x: BackendArray, w: BackendArray) -> BackendArray:
    out = cuda.device_array(x.shape, dtype=np.int8)
    l1_norm_cuda[x.shape[0], ROW_THREADS](x, w, out)
    return out


# ---- GRU gates, residual add, state reset --------------------------------------------------------

@op(cases=_gru_forget_cases, args={"xf": "int8[members, dim]", "sf": "int8[members, dim]", "bf": "int8[members, dim]",
                                   "s": "int8[members, dim]"})
def reference_egg_gru_forget(xf: Int8Array, sf: Int8Array, bf: Int8Array, s: Int8Array) -> tuple[Int8Array, Int8Array]:
    """(f, fh), both int8 (members, dim): the minGRU's forget gate f = clip(xf + sf + bf, +-127) and the
    gated state fh = ((f + 127) * s) >> 8 ((f + 127) / 256 is the gate in [0, 1)).

    xf: x @ Wf^T of the layer's normed input; sf: s @ Uf^T; bf: each member's copy of the forget bias
    (`egg_vector`); s: the layer's state before this byte."""
    f = np.clip(xf.astype(np.int64) + sf + bf, -127, 127)
    return f.astype(np.int8), (((f + 127) * s.astype(np.int64)) >> 8).astype(np.int8)


@op(cases=_gru_output_cases, args={"xh": "int8[members, dim]", "fhh": "int8[members, dim]", "bh": "int8[members, dim]",
                                   "f": "int8[members, dim]", "s": "int8[members, dim]"})
def reference_egg_gru_output(xh: Int8Array, fhh: Int8Array, bh: Int8Array, f: Int8Array, s: Int8Array) -> Int8Array:
    """int8 (members, dim): the minGRU's new state h = s + (((f + 127) * (hh - s)) >> 8), the candidate
    hh = clip(xh + fhh + bh, +-127) mixed into the old state by the forget gate.

    xh: x @ Wh^T of the layer's normed input; fhh: fh @ Uh^T of the gated state (`egg_gru_forget`);
    bh: each member's copy of the candidate bias (`egg_vector`); f: the forget gate; s: the old state."""
    hh = np.clip(xh.astype(np.int64) + fhh + bh, -127, 127)
    s64 = s.astype(np.int64)
    return (s64 + (((f.astype(np.int64) + 127) * (hh - s64)) >> 8)).astype(np.int8)


@op(cases=_clip_add_cases, args={"a": "int8[members, dim]", "b": "int8[members, dim]"})
def reference_egg_clip_add(a: Int8Array, b: Int8Array) -> Int8Array:
    """int8 (members, dim): the saturating residual add clip(a + b, +-127), element by element (a: the
    residual stream, b: a block's output)."""
    return _clip(a.astype(np.int64) + b)


@numba.njit(parallel=True, cache=True)
def _cpu_gru_forget(xf, sf, bf, s, f, fh):
    for i in numba.prange(xf.shape[0]):
        for j in range(xf.shape[1]):
            v = cpu_clip8(np.int64(xf[i, j]) + np.int64(sf[i, j]) + np.int64(bf[i, j]))
            f[i, j] = v
            fh[i, j] = cpu_gru_gate(v, np.int64(s[i, j]))


@numba.njit(parallel=True, cache=True)
def _cpu_gru_output(xh, fhh, bh, f, s, h):
    for i in numba.prange(xh.shape[0]):
        for j in range(xh.shape[1]):
            hh = cpu_clip8(np.int64(xh[i, j]) + np.int64(fhh[i, j]) + np.int64(bh[i, j]))
            h[i, j] = cpu_gru_mix(np.int64(f[i, j]), np.int64(s[i, j]), hh)


@numba.njit(parallel=True, cache=True)
def _cpu_clip_add(a, b, out):
    for i in numba.prange(a.shape[0]):
        for j in range(a.shape[1]):
            out[i, j] = cpu_clip8(np.int64(a[i, j]) + np.int64(b[i, j]))


@op
def cpu_egg_gru_forget(xf: Int8Array, sf: Int8Array, bf: Int8Array, s: Int8Array) -> tuple[Int8Array, Int8Array]:
    f, fh = np.empty_like(xf), np.empty_like(xf)
    _cpu_gru_forget(xf, sf, bf, s, f, fh)
    return f, fh


@op
def cpu_egg_gru_output(xh: Int8Array, fhh: Int8Array, bh: Int8Array, f: Int8Array, s: Int8Array) -> Int8Array:
    h = np.empty_like(xh)
    _cpu_gru_output(xh, fhh, bh, f, s, h)
    return h


@op
def cpu_egg_clip_add(a: Int8Array, b: Int8Array) -> Int8Array:
    out = np.empty_like(a)
    _cpu_clip_add(a, b, out)
    return out


@kernel((I8_2D, I8_2D, I8_2D, I8_2D, I8_2D, I8_2D))
def gru_forget_cuda(xf, sf, bf, s, f, fh):
    j, i = cuda.grid(2)
    if i < xf.shape[0] and j < xf.shape[1]:
        v = gpu_clip8(np.int64(xf[i, j]) + np.int64(sf[i, j]) + np.int64(bf[i, j]))
        f[i, j] = v
        fh[i, j] = gpu_gru_gate(v, np.int64(s[i, j]))


@kernel((I8_2D, I8_2D, I8_2D, I8_2D, I8_2D, I8_2D))
def gru_output_cuda(xh, fhh, bh, f, s, h):
    j, i = cuda.grid(2)
    if i < xh.shape[0] and j < xh.shape[1]:
        hh = gpu_clip8(np.int64(xh[i, j]) + np.int64(fhh[i, j]) + np.int64(bh[i, j]))
        h[i, j] = gpu_gru_mix(np.int64(f[i, j]), np.int64(s[i, j]), hh)


@kernel((I8_2D, I8_2D, I8_2D))
def clip_add_cuda(a, b, out):
    j, i = cuda.grid(2)
    if i < a.shape[0] and j < a.shape[1]:
        out[i, j] = gpu_clip8(np.int64(a[i, j]) + np.int64(b[i, j]))


@op
def cuda_egg_gru_forget(xf: BackendArray, sf: BackendArray, bf: BackendArray,
                        s: BackendArray) -> tuple[BackendArray, BackendArray]:
    f, fh = cuda.device_array(xf.shape, np.int8), cuda.device_array(xf.shape, np.int8)
    gru_forget_cuda[grid2(xf.shape[1], xf.shape[0])](xf, sf, bf, s, f, fh)
    return f, fh


@op
def cuda_egg_gru_output(xh: BackendArray, fhh: BackendArray, bh: BackendArray, f: BackendArray,
                        s: BackendArray) -> BackendArray:
    h = cuda.device_array(xh.shape, np.int8)
    gru_output_cuda[grid2(xh.shape[1], xh.shape[0])](xh, fhh, bh, f, s, h)
    return h


@op
def cuda_egg_clip_add(a: BackendArray, b: BackendArray) -> BackendArray:
    out = cuda.device_array(a.shape, np.int8)
    clip_add_cuda[grid2(a.shape[1], a.shape[0])](a, b, out)
    return out


@op(cases=_reset_cases, args={"state": "int8[members, dim]", "tokens": "uint8[members]"})
def reference_egg_reset(state: Int8Array, tokens: UInt8Array) -> None:
    """Zero, in place, the state rows of members whose input byte is 0 (byte 0 starts a document);
    returns None.

    state: one layer's hidden state, one row per member. tokens: each member's input byte at this step."""
    state[np.asarray(tokens) == 0] = 0


@op
@numba.njit(parallel=True, cache=True)
def cpu_egg_reset(state: Int8Array, tokens: UInt8Array) -> None:
    for i in numba.prange(tokens.size):
        if tokens[i] == 0:
            state[i] = 0


@kernel((I8_2D, U8_1D))
def reset_cuda(state, tokens):
    j, i = cuda.grid(2)
    if i < tokens.size and j < state.shape[1] and tokens[i] == 0:
        state[i, j] = 0


@op
def cuda_egg_reset(state: BackendArray, tokens: BackendArray) -> None:
    reset_cuda[grid2(state.shape[1], state.shape[0])](state, tokens)


# ---- integer log-likelihood ----------------------------------------------------------------------

@op(cases=_loglik_cases, args={"logits": "int8[members, 256]", "targets": "uint8[members]"})
def reference_egg_loglik(logits: Int8Array, targets: UInt8Array) -> Int64Array:
    """int64 (members,): the log-likelihood of each member's target byte under its int8 logits, in units
    of 1/16 bit, computed exactly in integers: y = logits + 128, y[target] - floor(16 * log2(sum_v
    EXP2[y_v] / 16)) (kernels/egg/int_math.py).

    logits: the head's output, one row of 256 byte scores per member. targets: the byte each member
    should have predicted (the window's next byte)."""
    y = logits.astype(np.int64) + 128
    s = EXP2[y].sum(axis=1)
    log_term = np.array([py_floor_log2_x16(int(v)) for v in s], dtype=np.int64) - 64
    return y[np.arange(y.shape[0]), targets.astype(np.int64)] - log_term


@numba.njit(parallel=True, cache=True)
def _cpu_loglik(logits, targets, out):
    for i in numba.prange(logits.shape[0]):
        s = 0
        for v in range(logits.shape[1]):
            s += EXP2[np.int64(logits[i, v]) + 128]
        out[i] = np.int64(logits[i, np.int64(targets[i])]) + 128 - (cpu_floor_log2_x16(s) - 64)


@op
def cpu_egg_loglik(logits: Int8Array, targets: UInt8Array) -> Int64Array:
    out = np.empty(logits.shape[0], dtype=np.int64)
    _cpu_loglik(logits, targets, out)
    return out


@kernel((I8_2D, U8_1D, I64_1D))
def loglik_cuda(logits, targets, out):
    i = cuda.grid(1)
    if i < logits.shape[0]:
        s = 0
        for v in range(logits.shape[1]):
            s += EXP2[np.int64(logits[i, v]) + 128]
        out[i] = np.int64(logits[i, np.int64(targets[i])]) + 128 - (gpu_floor_log2_x16(s) - 64)


@op
def cuda_egg_loglik(logits: BackendArray, targets: BackendArray) -> BackendArray:
    out = cuda.device_array(logits.shape[0], dtype=np.int64)
    loglik_cuda[blocks(logits.shape[0])](logits, targets, out)
    return out

# the ops of this module by name, for callers: egg_clip_add(kernels, ...)
egg_clip_add = registered(reference_egg_clip_add)
egg_embedding = registered(reference_egg_embedding)
egg_gru_forget = registered(reference_egg_gru_forget)
egg_gru_output = registered(reference_egg_gru_output)
egg_l1_norm = registered(reference_egg_l1_norm)
egg_loglik = registered(reference_egg_loglik)
egg_reset = registered(reference_egg_reset)
egg_vector = registered(reference_egg_vector)
