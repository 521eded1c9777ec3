"""The member-specific part of a low-rank perturbed linear layer over a population (EGGROLL):

    y[m] += coef[m] * (x[m] B[m]) A[m]^T     x (M, T, in), B (M, in, r), A (M, out, r), coef (M,)

so the shared product x W^T is one ordinary matmul for the whole population and no member's
perturbed matrix is ever formed. `lowrank_sum(weight, A, B)` = sum_p weight[p] A[p] B[p]^T is the
update of a matrix from its pairs' factors (float EGGROLL's gradient estimate). `lowrank_project`
gives xb = x[m] B[m] (M, T, r); for an embedding the one-hot input makes that a row gather,
`lowrank_project_rows`: xb[m, t] = B[m, tokens[m, t]] (tokens uint8, so B has at least 256 rows).
`lowrank_expand` returns y + coef[m] xb[m] A[m]^T.
References compute in float64; CPU twins use batched BLAS for the projection and a parallel loop for
the rank-r expansion (BLAS calls that small do not pay); CUDA runs one thread per output element.
Twins agree to 1e-5 relative + 1e-5 absolute (the gather is bit-identical); shapes that do not fit raise
BadInput.
"""

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Float64Array, FloatArray, UInt8Array
from eggnog.kernels.core.cpu_jit import parallel_jit
from eggnog.kernels.core.cpu_products import product
from eggnog.kernels.core.cuda_api import F32_1D, F32_2D, F32_3D, U8_2D, blocks, cuda, f64, kernel, require
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import normal32, op, registered

TOLERANCE = (1e-5, 1e-5)


def _tokens(rng, members, steps):
    """Random bytes with the extremes 0 and 255 among them."""
    tokens = rng.integers(0, 256, size=(members, steps)).astype(np.uint8)
    tokens.flat[0], tokens.flat[-1] = 255, 0
    return tokens


def _project_cases(rng):
    """One element, and outputs across one and two blocks of 256 threads."""
    for members, steps, d_in, rank in ((1, 1, 1, 1), (3, 5, 7, 2), (4, 23, 12, 3)):
        yield normal32(rng, members, steps, d_in, scale=2.0), normal32(rng, members, d_in, rank)


def _project_rows_cases(rng):
    for members, steps, rank in ((1, 1, 1), (3, 5, 2), (4, 23, 3)):
        yield _tokens(rng, members, steps), normal32(rng, members, 256, rank)


def _expand_cases(rng):
    for members, steps, width, rank in ((1, 1, 1, 1), (3, 7, 13, 2), (2, 3, 50, 4)):
        yield (normal32(rng, members, steps, width), normal32(rng, members, steps, rank, scale=2.0),
               normal32(rng, members, width, rank), normal32(rng, members, scale=0.5))


def _check_project(x, b):
    require(len(x.shape) == 3 and len(b.shape) == 3 and tuple(b.shape[:2]) == (x.shape[0], x.shape[2]),
            f"lowrank_project takes x (members, steps, in) and B (members, in, rank), "
            f"got x {tuple(x.shape)} and B {tuple(b.shape)}")


def _check_project_rows(tokens, b):
    require(len(tokens.shape) == 2 and len(b.shape) == 3 and b.shape[0] == tokens.shape[0] and b.shape[1] >= 256,
            f"lowrank_project_rows takes byte tokens (members, steps) and B (members, 256 or more rows, rank), "
            f"got tokens {tuple(tokens.shape)} and B {tuple(b.shape)}")


def _check_expand(y, xb, a, coef):
    require(len(y.shape) == 3 and len(xb.shape) == 3 and tuple(xb.shape[:2]) == tuple(y.shape[:2])
            and tuple(a.shape) == (y.shape[0], y.shape[2], xb.shape[2]) and tuple(coef.shape) == (y.shape[0],),
            f"lowrank_expand takes y (members, steps, out), xb (members, steps, rank), A (members, out, rank) "
            f"and coef (members,), got {tuple(y.shape)}, {tuple(xb.shape)}, {tuple(a.shape)} and {tuple(coef.shape)}")


@op(cases=_project_cases, tolerance=TOLERANCE,
    args={"x": "float[members, steps, d_in]", "b": "float[members, d_in, rank]"})
def reference_lowrank_project(x: FloatArray, b: FloatArray) -> Float64Array:
    """xb[m] = x[m] B[m], (members, steps, rank) float32 (float64 here): each member's rows projected onto
    its own rank-r noise factor B, the first half of its perturbation x (coef A B^T)^T.

    x: each member's input rows of the layer; b: each member's factor B (float EGGROLL's `matrix(name)`:
    the member's pair noise for the layer's input side)."""
    _check_project(x, b)
    return np.matmul(f64(x), f64(b))


# b's rows: at least 256 (every byte), which the grammar cannot say; _check_project_rows does
@op(cases=_project_rows_cases, args={"tokens": "uint8[members, steps]", "b": "float[members, _, rank]"})
def reference_lowrank_project_rows(tokens: UInt8Array, b: FloatArray) -> Float64Array:
    """xb[m, t] = B[m, tokens[m, t]], (members, steps, rank) float32 (float64 here): lowrank_project for an
    embedding, whose one-hot input makes the product a row gather.

    tokens: each member's input bytes; b: each member's noise factor on the table's rows (256 or more
    rows, one per byte value)."""
    _check_project_rows(tokens, b)
    return f64(b)[np.arange(b.shape[0])[:, None], np.asarray(tokens, np.int64)]


@op(cases=_expand_cases, tolerance=TOLERANCE,
    args={"y": "float[members, steps, d_out]", "xb": "float[members, steps, rank]",
          "a": "float[members, d_out, rank]", "coef": "float[members]"})
def reference_lowrank_expand(y: FloatArray, xb: FloatArray, a: FloatArray, coef: FloatArray) -> Float64Array:
    """y[m] + coef[m] xb[m] A[m]^T, a new (members, steps, d_out) float32 array (float64 here): the shared
    product y = x W^T plus each member's low-rank perturbation.

    y: the unperturbed layer's output per member; xb: lowrank_project's (or _rows') result; a: each
    member's factor A on the output side; coef: each member's sign times sigma / sqrt(rank) (float EGGROLL:
    +1 and -1 for a pair's two members)."""
    _check_expand(y, xb, a, coef)
    delta = np.matmul(f64(xb), np.transpose(f64(a), (0, 2, 1)))
    return f64(y) + f64(coef)[:, None, None] * delta


@op
def cpu_lowrank_project(x: Float32Array, b: Float32Array) -> Float32Array:
    _check_project(x, b)
    return np.matmul(x, b)


@op
def cpu_lowrank_project_rows(tokens: UInt8Array, b: Float32Array) -> Float32Array:
    _check_project_rows(tokens, b)
    return np.ascontiguousarray(b[np.arange(b.shape[0])[:, None], tokens.astype(np.int64)])


@parallel_jit
def _cpu_expand(y, xb, a, coef, out):
    members, steps, width = y.shape
    for mt in numba.prange(members * steps):
        m, t = mt // steps, mt % steps
        for o in range(width):
            acc = np.float32(0.0)
            for r in range(xb.shape[2]):
                acc += xb[m, t, r] * a[m, o, r]
            out[m, t, o] = y[m, t, o] + coef[m] * acc


@op
def cpu_lowrank_expand(y: Float32Array, xb: Float32Array, a: Float32Array, coef: Float32Array) -> Float32Array:
    _check_expand(y, xb, a, coef)
    out = np.empty(y.shape, y.dtype)
    _cpu_expand(y, xb, a, coef, out)
    return out


@kernel((F32_3D, F32_3D, F32_3D))
def project_cuda(x, b, xb):
    i = cuda.grid(1)
    if i < xb.size:
        steps, rank = xb.shape[1], xb.shape[2]
        m, t, r = i // (steps * rank), (i // rank) % steps, i % rank
        acc = np.float32(0.0)
        for j in range(x.shape[2]):
            acc += x[m, t, j] * b[m, j, r]
        xb[m, t, r] = acc


@kernel((U8_2D, F32_3D, F32_3D))
def project_rows_cuda(tokens, b, xb):
    i = cuda.grid(1)
    if i < xb.size:
        steps, rank = xb.shape[1], xb.shape[2]
        m, t, r = i // (steps * rank), (i // rank) % steps, i % rank
        xb[m, t, r] = b[m, tokens[m, t], r]


@kernel((F32_3D, F32_3D, F32_3D, F32_1D, F32_3D))
def expand_cuda(y, xb, a, coef, out):
    i = cuda.grid(1)
    if i < out.size:
        steps, width = out.shape[1], out.shape[2]
        m, t, o = i // (steps * width), (i // width) % steps, i % width
        acc = np.float32(0.0)
        for r in range(xb.shape[2]):
            acc += xb[m, t, r] * a[m, o, r]
        out[m, t, o] = y[m, t, o] + coef[m] * acc


@op
def cuda_lowrank_project(x: BackendArray, b: BackendArray) -> BackendArray:
    _check_project(x, b)
    xb = cuda.device_array((x.shape[0], x.shape[1], b.shape[2]), np.float32)
    project_cuda[blocks(xb.size)](x, b, xb)
    return xb


@op
def cuda_lowrank_project_rows(tokens: BackendArray, b: BackendArray) -> BackendArray:
    _check_project_rows(tokens, b)
    xb = cuda.device_array((tokens.shape[0], tokens.shape[1], b.shape[2]), np.float32)
    project_rows_cuda[blocks(xb.size)](tokens, b, xb)
    return xb


@op
def cuda_lowrank_expand(y: BackendArray, xb: BackendArray, a: BackendArray, coef: BackendArray) -> BackendArray:
    _check_expand(y, xb, a, coef)
    out = cuda.device_array(y.shape, np.float32)
    expand_cuda[blocks(out.size)](y, xb, a, coef, out)
    return out


# ---- lowrank_sum: the ES update of a matrix from its pairs' factors ----------------------------------

def _sum_cases(rng):
    """One pair of rank 1; several pairs, rank 2, an output over one block; rank 3 over two blocks."""
    for pairs, rows, cols, rank in ((1, 1, 1, 1), (5, 7, 9, 2), (3, 20, 15, 3)):
        yield normal32(rng, pairs), normal32(rng, pairs, rows, rank), normal32(rng, pairs, cols, rank)


def _check_sum(weight, a, b):
    require(len(weight.shape) == 1 and len(a.shape) == 3 and len(b.shape) == 3 and a.shape[0] == b.shape[0]
            == weight.shape[0] and a.shape[2] == b.shape[2],
            f"lowrank_sum takes weights (pairs,), A (pairs, rows, rank) and B (pairs, cols, rank), got "
            f"{tuple(weight.shape)}, {tuple(a.shape)} and {tuple(b.shape)}")


@op(cases=_sum_cases, tolerance=TOLERANCE,
    args={"weight": "float[pairs]", "a": "float[pairs, rows, rank]", "b": "float[pairs, cols, rank]"})
def reference_lowrank_sum(weight: FloatArray, a: FloatArray, b: FloatArray) -> Float64Array:
    """sum_p weight[p] A[p] B[p]^T, (rows, cols) float32 (float64 here): float EGGROLL's update of one
    matrix from its pairs' noise factors, never forming a pair's matrix.

    weight: each antithetic pair's weight (its two members' shaped fitness difference, scaled); a, b:
    each pair's noise factors (a vector parameter passes A = 1 of rank 1 and its noise as B)."""
    _check_sum(weight, a, b)
    return np.einsum("p,pir,pjr->ij", f64(weight), f64(a), f64(b))


@op
def cpu_lowrank_sum(weight: Float32Array, a: Float32Array, b: Float32Array) -> Float32Array:
    """One product (rows, pairs * rank) x (pairs * rank, cols), split over the cores."""
    _check_sum(weight, a, b)
    pairs, rows, rank = a.shape
    wa = (a * weight[:, None, None]).transpose(1, 0, 2).reshape(rows, pairs * rank)
    return product(wa, b.transpose(1, 0, 2).reshape(b.shape[1], pairs * rank).T)


@kernel((F32_1D, F32_3D, F32_3D, F32_2D))
def lowrank_sum_cuda(weight, a, b, out):
    """One thread per output element, columns fastest: a warp's A loads are one broadcast address and
    its B loads are consecutive for rank 1. Runs once per step, after the population's forward."""
    i = cuda.grid(1)
    if i < out.size:
        cols = out.shape[1]
        row, col = i // cols, i % cols
        acc = np.float32(0.0)
        for p in range(a.shape[0]):
            part = np.float32(0.0)
            for r in range(a.shape[2]):
                part += a[p, row, r] * b[p, col, r]
            acc += weight[p] * part
        out[row, col] = acc


@op
def cuda_lowrank_sum(weight: BackendArray, a: BackendArray, b: BackendArray) -> BackendArray:
    _check_sum(weight, a, b)
    out = cuda.device_array((a.shape[1], b.shape[1]), np.float32)
    lowrank_sum_cuda[blocks(out.size)](weight, a, b, out)
    return out

# the ops of this module by name, for callers: lowrank_expand(kernels, ...)
lowrank_expand = registered(reference_lowrank_expand)
lowrank_project = registered(reference_lowrank_project)
lowrank_project_rows = registered(reference_lowrank_project_rows)
lowrank_sum = registered(reference_lowrank_sum)
