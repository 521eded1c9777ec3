"""The DNC's content addressing (fp32): a softmax over memory rows of key-row dot products, forward and
backward, one op each way:

    content_address(keys (B, K, W), mem (B, M, W))      -> p (B, K, M) = softmax_m(keys . mem_m)
    content_address_backward(dp, p, keys, mem)          -> dkeys (B, K, W), dmem (B, M, W)
                                                           with ds = p * (dp - sum_m dp p):
                                                           dkeys = ds mem, dmem = ds^T keys

    content_read(keys, mem_ln, mem)                     -> p = content_address(keys, mem_ln), reads = p mem
    content_read_backward(dreads, p, keys, mem_ln, mem) -> dkeys, dmem_ln, dmem (through dp = dreads mem^T)

More in docs/internals.md (kernels/rnn/dnc_addressing.py)."""

import math

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Float64Array, FloatArray
from eggnog.kernels.core.cpu_jit import parallel_jit
from eggnog.kernels.core.cuda_api import (
    F32_1D,
    F32_2D,
    F32_3D,
    I64,
    blocks,
    cuda,
    device_function,
    f64,
    flat,
    kernel,
    require,
)
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.reductions import row_max_and_exp_sum
from eggnog.kernels.core.registry import normal32, op, registered
from eggnog.kernels.layers.softmax_rows import softmax_backward_row

ROW_THREADS = 128  # one block per (b, k) row; a power of two for the tree reductions
THREADS = 128
TOLERANCE = (1e-5, 1e-6)


def _shapes():
    """(B, K, M, W): the smallest; several keys; memory rows over two passes of a block's threads;
    a wide row (dkeys' threads over W take two passes)."""
    return ((1, 1, 1, 1), (2, 3, 5, 4), (2, 1, 150, 3), (1, 2, 7, 140))


def _forward_cases(rng):
    for batch, keys, rows, width in _shapes():
        yield normal32(rng, batch, keys, width), normal32(rng, batch, rows, width)


def _backward_cases(rng):
    for keys, mem in _forward_cases(rng):
        p = reference_content_address(keys, mem).astype(np.float32)
        yield normal32(rng, *p.shape), p, keys, mem


def _check(keys, mem):
    require(len(keys.shape) == 3 and len(mem.shape) == 3 and keys.shape[0] == mem.shape[0]
            and keys.shape[2] == mem.shape[2] and min(keys.shape) >= 1 and min(mem.shape) >= 1,
            f"content addressing takes keys (B, K, W) and memory (B, M, W), got {tuple(keys.shape)} and "
            f"{tuple(mem.shape)}")


def _check_backward(dp, p, keys, mem):
    _check(keys, mem)
    expected = (keys.shape[0], keys.shape[1], mem.shape[1])
    require(tuple(dp.shape) == expected and tuple(p.shape) == expected,
            f"content_address_backward takes dp and p of shape (B, K, M) = {expected}, got {tuple(dp.shape)} "
            f"and {tuple(p.shape)}")


KEYS = "float[batch, n_keys, width]"
MEMORY = "float[batch, rows, width]"
WEIGHTS = "float[batch, n_keys, rows]"


@op(cases=_forward_cases, tolerance=TOLERANCE, args={"keys": KEYS, "mem": MEMORY})
def reference_content_address(keys: FloatArray, mem: FloatArray) -> Float64Array:
    """p (batch, n_keys, rows): for every key, a softmax over the memory rows of the key's dot product
    with each row, p[b, k, m] = softmax_m(keys[b, k] . mem[b, m]) (no sharpness: the DNC layer-normalises
    keys and memory first, models/dnc.py).

    keys: the heads' lookup keys (the write key, or the read keys), one set per batch row. mem: the
    (normalised) memory, one per batch row."""
    _check(keys, mem)
    scores = np.einsum("bkw,bmw->bkm", f64(keys), f64(mem))
    e = np.exp(scores - scores.max(axis=2, keepdims=True))
    return e / e.sum(axis=2, keepdims=True)


@op(cases=_backward_cases, tolerance=TOLERANCE, args={"dp": WEIGHTS, "p": WEIGHTS, "keys": KEYS, "mem": MEMORY})
def reference_content_address_backward(dp: FloatArray, p: FloatArray, keys: FloatArray,
                                       mem: FloatArray) -> tuple[Float64Array, Float64Array]:
    """(dkeys (batch, n_keys, width), dmem (batch, rows, width)): content_address's gradients, through the
    softmax ds = p (dp - sum_m dp p): dkeys = ds mem, dmem = ds^T keys.

    dp: the loss's gradient with respect to the weights p. p: content_address's output; keys, mem: its
    arguments."""
    _check_backward(dp, p, keys, mem)
    dp, p = f64(dp), f64(p)
    ds = p * (dp - (dp * p).sum(axis=2, keepdims=True))
    return np.einsum("bkm,bmw->bkw", ds, f64(mem)), np.einsum("bkm,bkw->bmw", ds, f64(keys))


def _read_cases(rng):
    for keys, mem in _forward_cases(rng):
        yield keys, mem, normal32(rng, *mem.shape)


def _read_backward_cases(rng):
    for keys, mem_ln, mem in _read_cases(rng):
        p = reference_content_address(keys, mem_ln).astype(np.float32)
        yield normal32(rng, *keys.shape), p, keys, mem_ln, mem


def _check_read(keys, mem_ln, mem):
    _check(keys, mem_ln)
    require(tuple(mem.shape) == tuple(mem_ln.shape),
            f"content_read reads a memory of the normalised memory's shape {tuple(mem_ln.shape)}, got "
            f"{tuple(mem.shape)}")


@op(cases=_read_cases, tolerance=TOLERANCE, args={"keys": KEYS, "mem_ln": MEMORY, "mem": MEMORY})
def reference_content_read(keys: FloatArray, mem_ln: FloatArray, mem: FloatArray) -> tuple[Float64Array, Float64Array]:
    """(p (batch, n_keys, rows), reads (batch, n_keys, width)): the read heads' weights addressed on the
    normalised memory, p = content_address(keys, mem_ln), and the rows they read from the memory itself,
    reads = p mem.

    keys: the read keys. mem_ln: the memory layer-normalised (what is addressed). mem: the memory as
    written (what is read)."""
    _check_read(keys, mem_ln, mem)
    p = reference_content_address(keys, mem_ln)
    return p, np.einsum("bkm,bmw->bkw", p, f64(mem))


@op(cases=_read_backward_cases, tolerance=TOLERANCE,
    args={"dreads": KEYS, "p": WEIGHTS, "keys": KEYS, "mem_ln": MEMORY, "mem": MEMORY})
def reference_content_read_backward(dreads: FloatArray, p: FloatArray, keys: FloatArray, mem_ln: FloatArray,
                                    mem: FloatArray) -> tuple[Float64Array, Float64Array, Float64Array]:
    """(dkeys (batch, n_keys, width), dmem_ln, dmem (batch, rows, width)): content_read's gradients, the
    weights' through dp = dreads mem^T and content_address_backward, dmem = p^T dreads.

    dreads: the loss's gradient with respect to the reads. p: content_read's weights; keys, mem_ln, mem:
    its arguments."""
    _check_read(keys, mem_ln, mem)
    require(tuple(dreads.shape) == tuple(keys.shape), f"dreads must have the keys' shape {tuple(keys.shape)}, got "
                                                      f"{tuple(dreads.shape)}")
    dreads, mem = f64(dreads), f64(mem)
    dkeys, dmem_ln = reference_content_address_backward(np.einsum("bkw,bmw->bkm", dreads, mem), p, keys, mem_ln)
    return dkeys, dmem_ln, np.einsum("bkm,bkw->bmw", f64(p), dreads)


@parallel_jit
def _cpu_content_address(keys, mem, p):
    batch, nkeys, width = keys.shape
    rows = mem.shape[1]
    for i in numba.prange(batch * nkeys):
        b, k = i // nkeys, i % nkeys
        top = np.float32(-np.inf)
        for m in range(rows):
            acc = np.float32(0.0)
            for j in range(width):
                acc += keys[b, k, j] * mem[b, m, j]
            p[b, k, m] = acc
            top = max(top, acc)
        total = np.float32(0.0)
        for m in range(rows):
            p[b, k, m] = math.exp(p[b, k, m] - top)
            total += p[b, k, m]
        inv = np.float32(1.0) / total
        for m in range(rows):
            p[b, k, m] *= inv


@parallel_jit
def _cpu_softmax_grad(dp, p, ds):
    """ds = p (dp - sum_m dp p) along each (b, k) row."""
    batch, nkeys, rows = p.shape
    for i in numba.prange(batch * nkeys):
        b, k = i // nkeys, i % nkeys
        dot = np.float32(0.0)
        for m in range(rows):
            dot += dp[b, k, m] * p[b, k, m]
        for m in range(rows):
            ds[b, k, m] = p[b, k, m] * (dp[b, k, m] - dot)


@parallel_jit
def _cpu_rows_times_memory(a, mem, out):
    """out[b, k] = sum_m a[b, k, m] mem[b, m]: the reads, and dkeys from ds; given a transposed view
    of ds or p (out[b, m] = sum_k a[b, k, m] x[b, k]), dmem from the keys or from dreads."""
    batch, nkeys, rows = a.shape
    width = mem.shape[2]
    for i in numba.prange(batch * nkeys):
        b, k = i // nkeys, i % nkeys
        for j in range(width):
            out[b, k, j] = 0.0
        for m in range(rows):
            for j in range(width):
                out[b, k, j] += a[b, k, m] * mem[b, m, j]


@op
def cpu_content_address(keys: Float32Array, mem: Float32Array) -> Float32Array:
    _check(keys, mem)
    p = np.empty((keys.shape[0], keys.shape[1], mem.shape[1]), np.float32)
    _cpu_content_address(keys, mem, p)
    return p


@op
def cpu_content_address_backward(dp: Float32Array, p: Float32Array, keys: Float32Array,
                                 mem: Float32Array) -> tuple[Float32Array, Float32Array]:
    _check_backward(dp, p, keys, mem)
    ds, dkeys, dmem = np.empty_like(p), np.empty_like(keys), np.empty_like(mem)
    _cpu_softmax_grad(dp, p, ds)
    _cpu_rows_times_memory(ds, mem, dkeys)
    _cpu_rows_times_memory(ds.transpose(0, 2, 1), keys, dmem)
    return dkeys, dmem


@parallel_jit
def _cpu_read_scores_grad(dreads, mem, dp):
    batch, nkeys, rows = dp.shape
    width = mem.shape[2]
    for i in numba.prange(batch * nkeys):
        b, k = i // nkeys, i % nkeys
        for m in range(rows):
            acc = np.float32(0.0)
            for j in range(width):
                acc += dreads[b, k, j] * mem[b, m, j]
            dp[b, k, m] = acc


@op
def cpu_content_read(keys: Float32Array, mem_ln: Float32Array, mem: Float32Array) -> tuple[Float32Array, Float32Array]:
    _check_read(keys, mem_ln, mem)
    p = cpu_content_address(keys, mem_ln)
    reads = np.empty(keys.shape, np.float32)
    _cpu_rows_times_memory(p, mem, reads)
    return p, reads


@op
def cpu_content_read_backward(dreads: Float32Array, p: Float32Array, keys: Float32Array, mem_ln: Float32Array,
                              mem: Float32Array) -> tuple[Float32Array, Float32Array, Float32Array]:
    _check_read(keys, mem_ln, mem)
    dp, dmem = np.empty_like(p), np.empty_like(mem)
    _cpu_read_scores_grad(dreads, mem, dp)
    dkeys, dmem_ln = cpu_content_address_backward(dp, p, keys, mem_ln)
    _cpu_rows_times_memory(p.transpose(0, 2, 1), dreads, dmem)
    return dkeys, dmem_ln, dmem


@device_function
def scores_row(x, mem, out, i, nkeys, width, t):
    """out[i, m] = x[i] . mem[b, m] for thread t's memory rows m, i = (b, k). x and mem come flat, walked
    with unsigned 64-bit offsets (no sign or wraparound code in the dot loop)."""
    rows, w = out.shape[1], np.uint64(width)
    x_at, first = np.uint64(i) * w, (i // nkeys) * rows
    for m in range(t, rows, ROW_THREADS):
        mem_at = np.uint64(first + m) * w
        acc = np.float32(0.0)
        j = np.uint64(0)
        while j < w:
            acc += x[x_at + j] * mem[mem_at + j]
            j += np.uint64(1)
        out[i, m] = acc


@device_function
def row_times_memory(a, mem, out, i, nkeys, width, t):
    """out[i] = sum_m a[i, m] mem[b, m] (out and mem flat), the block's threads over W: the reads, and
    dkeys from ds."""
    rows, w = a.shape[1], np.uint64(width)
    first = np.uint64((i // nkeys) * rows) * w
    for j in range(t, width, ROW_THREADS):
        acc = np.float32(0.0)
        at = first + np.uint64(j)
        for m in range(rows):
            acc += a[i, m] * mem[at]
            at += w
        out[np.uint64(i) * w + np.uint64(j)] = acc


@device_function
def rows_into_memory(a, x, b, m, j):
    """sum_k a[b K + k, m] x[b, k, j]: an element of dmem from ds and the keys, or from p and dreads."""
    nkeys = x.shape[1]
    acc = np.float32(0.0)
    for k in range(nkeys):
        acc += a[b * nkeys + k, m] * x[b, k, j]
    return acc


@device_function
def address_row(keys, mem, p, i, nkeys, width, partial, t):
    """Row i = (b, k) of p by the threads of one block: the scores of every memory row, then their softmax
    in place."""
    scores_row(keys, mem, p, i, nkeys, width, t)
    cuda.syncthreads()  # every score is written before the block reads the row
    top, total = row_max_and_exp_sum(p, i, partial, t)
    inv = np.float32(1.0) / total
    for m in range(t, p.shape[1], ROW_THREADS):  # the entries this thread read last: no race
        p[i, m] = math.exp(p[i, m] - top) * inv


@kernel((F32_1D, F32_1D, F32_2D, I64, I64), block=ROW_THREADS)
def content_address_cuda(keys, mem, p, nkeys, width):
    """Block i = (b, k): row i of p."""
    partial = cuda.shared.array(ROW_THREADS, numba.float32)
    address_row(keys, mem, p, cuda.blockIdx.x, nkeys, width, partial, cuda.threadIdx.x)


@kernel((F32_1D, F32_1D, F32_1D, F32_2D, F32_1D, I64, I64), block=ROW_THREADS)
def content_read_cuda(keys, mem_ln, mem, p, reads, nkeys, width):
    """Block i = (b, k): row i of p, then reads[i] = p[i] mem[b]."""
    i, t = cuda.blockIdx.x, cuda.threadIdx.x
    partial = cuda.shared.array(ROW_THREADS, numba.float32)
    address_row(keys, mem_ln, p, i, nkeys, width, partial, t)
    cuda.syncthreads()  # the whole row of p is final before any thread sums over it
    row_times_memory(p, mem, reads, i, nkeys, width, t)


@kernel((F32_2D, F32_2D, F32_1D, F32_2D, F32_1D, I64, I64), block=ROW_THREADS)
def content_address_keys_cuda(dp, p, mem, ds, dkeys, nkeys, width):
    """Block i = (b, k): ds of row i, then dkeys[i] = ds[i] mem[b]."""
    i, t = cuda.blockIdx.x, cuda.threadIdx.x
    partial = cuda.shared.array(ROW_THREADS, numba.float32)
    softmax_backward_row(dp, p, ds, i, partial, t)
    cuda.syncthreads()  # ds of the whole row is written before any thread sums over it
    row_times_memory(ds, mem, dkeys, i, nkeys, width, t)


@kernel((F32_1D, F32_2D, F32_1D, F32_1D, F32_2D, F32_1D, I64, I64), block=ROW_THREADS)
def content_read_keys_cuda(dreads, p, mem_ln, mem, ds, dkeys, nkeys, width):
    """Block i = (b, k): dp[i, m] = dreads[i] . mem[b, m] into ds, then ds = p (dp - dp . p) in place,
    then dkeys[i] = ds[i] mem_ln[b]."""
    i, t = cuda.blockIdx.x, cuda.threadIdx.x
    scores_row(dreads, mem, ds, i, nkeys, width, t)
    cuda.syncthreads()  # dp of the whole row is written before the reduction reads it
    partial = cuda.shared.array(ROW_THREADS, numba.float32)
    softmax_backward_row(ds, p, ds, i, partial, t)  # in place: each thread rewrites what it read
    cuda.syncthreads()
    row_times_memory(ds, mem_ln, dkeys, i, nkeys, width, t)


@kernel((F32_2D, F32_3D, F32_3D), block=THREADS)
def content_address_memory_cuda(ds, keys, dmem):
    """A thread per element (b, m, j) of dmem."""
    e = cuda.grid(1)
    batch, rows, width = dmem.shape
    if e < batch * rows * width:
        b, m, j = e // (rows * width), e // width % rows, e % width
        dmem[b, m, j] = rows_into_memory(ds, keys, b, m, j)


@kernel((F32_2D, F32_2D, F32_3D, F32_3D, F32_3D, F32_3D), block=THREADS)
def content_read_memory_cuda(ds, p, keys, dreads, dmem_ln, dmem):
    """A thread per (b, m, j): dmem_ln from ds and the keys, dmem from p and dreads."""
    e = cuda.grid(1)
    batch, rows, width = dmem.shape
    if e < batch * rows * width:
        b, m, j = e // (rows * width), e // width % rows, e % width
        dmem_ln[b, m, j] = rows_into_memory(ds, keys, b, m, j)
        dmem[b, m, j] = rows_into_memory(p, dreads, b, m, j)


@op
def cuda_content_address(keys: BackendArray, mem: BackendArray) -> BackendArray:
    _check(keys, mem)
    batch, nkeys, rows = keys.shape[0], keys.shape[1], mem.shape[1]
    p = cuda.device_array((batch * nkeys, rows), np.float32)
    content_address_cuda[batch * nkeys, ROW_THREADS](flat(keys), flat(mem), p, nkeys, keys.shape[2])
    return p.reshape(batch, nkeys, rows)


@op
def cuda_content_address_backward(dp: BackendArray, p: BackendArray, keys: BackendArray,
                                  mem: BackendArray) -> tuple[BackendArray, BackendArray]:
    _check_backward(dp, p, keys, mem)
    batch, nkeys, rows = p.shape
    ds = cuda.device_array((batch * nkeys, rows), np.float32)
    dkeys, dmem = cuda.device_array(keys.shape, np.float32), cuda.device_array(mem.shape, np.float32)
    content_address_keys_cuda[batch * nkeys, ROW_THREADS](dp.reshape(batch * nkeys, rows),
                                                          p.reshape(batch * nkeys, rows), flat(mem), ds,
                                                          flat(dkeys), nkeys, keys.shape[2])
    content_address_memory_cuda[blocks(dmem.size, THREADS)](ds, keys, dmem)
    return dkeys, dmem


@op
def cuda_content_read(keys: BackendArray, mem_ln: BackendArray, mem: BackendArray) -> tuple[BackendArray, BackendArray]:
    _check_read(keys, mem_ln, mem)
    batch, nkeys, rows = keys.shape[0], keys.shape[1], mem.shape[1]
    p = cuda.device_array((batch * nkeys, rows), np.float32)
    reads = cuda.device_array(keys.shape, np.float32)
    content_read_cuda[batch * nkeys, ROW_THREADS](flat(keys), flat(mem_ln), flat(mem), p, flat(reads), nkeys,
                                                  keys.shape[2])
    return p.reshape(batch, nkeys, rows), reads


@op
def cuda_content_read_backward(dreads: BackendArray, p: BackendArray, keys: BackendArray, mem_ln: BackendArray,
                               mem: BackendArray) -> tuple[BackendArray, BackendArray, BackendArray]:
    _check_read(keys, mem_ln, mem)
    batch, nkeys, rows = p.shape
    p2 = p.reshape(batch * nkeys, rows)
    ds = cuda.device_array((batch * nkeys, rows), np.float32)
    dkeys = cuda.device_array(keys.shape, np.float32)
    dmem_ln, dmem = cuda.device_array(mem.shape, np.float32), cuda.device_array(mem.shape, np.float32)
    content_read_keys_cuda[batch * nkeys, ROW_THREADS](flat(dreads), p2, flat(mem_ln), flat(mem), ds, flat(dkeys),
                                                       nkeys, keys.shape[2])
    content_read_memory_cuda[blocks(dmem.size, THREADS)](ds, p2, keys, dreads, dmem_ln, dmem)
    return dkeys, dmem_ln, dmem

# the ops of this module by name, for callers: content_address(kernels, ...)
content_address = registered(reference_content_address)
content_address_backward = registered(reference_content_address_backward)
content_read = registered(reference_content_read)
content_read_backward = registered(reference_content_read_backward)
