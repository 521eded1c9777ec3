"""Embedding lookup (fp32) and its gradient:

    embedding(table (vocab, d), tokens (n,) uint8)          -> table[tokens]            (n, d)
    embedding_backward(dout (n, d), tokens (n,), vocab)     -> scatter-add of dout rows  (vocab, d)

A repeated token sums its rows. On the GPU a 2-D grid puts x over the contiguous feature axis and y
over tokens; the scatter-add uses atomics, so its order (and last bits) vary between runs. The
references compute in float64. The gather is bit-identical on every backend; the scatter-add agrees to
1e-5 relative + 1e-6 absolute.
"""

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Float64Array, FloatArray, UInt8Array
from eggnog.kernels.core.cpu_jit import parallel_jit
from eggnog.kernels.core.cuda_api import F32_2D, U8_1D, cuda, device_zeros, f64, grid2, kernel, require
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import op, registered


def _tokens(rng, n, vocab):
    """n tokens with repeats, the first and last rows of the table among them."""
    tokens = rng.integers(0, vocab, n).astype(np.uint8)
    tokens[0], tokens[-1] = vocab - 1, 0
    return tokens


def _cases(rng, backward):
    """Token counts across the 8 rows and widths across the 32 columns of a block."""
    for n, vocab, width in ((1, 3, 1), (9, 256, 31), (17, 7, 33)):
        rows = rng.normal(size=(n if backward else vocab, width)).astype(np.float32)
        yield (rows, _tokens(rng, n, vocab), vocab) if backward else (rows, _tokens(rng, n, vocab))


def _embedding_cases(rng):
    yield from _cases(rng, False)


def _embedding_backward_cases(rng):
    yield from _cases(rng, True)


def _check_lookup(table, tokens):
    require(len(table.shape) == 2 and len(tokens.shape) == 1,
            f"an embedding takes a table (vocab, d) and a 1-D array of tokens, "
            f"got table {tuple(table.shape)} and tokens {tuple(tokens.shape)}")


def _check_gradient(dout, tokens):
    require(len(dout.shape) == 2 and len(tokens.shape) == 1 and dout.shape[0] == tokens.shape[0],
            f"an embedding gradient takes dout (n, d) for n tokens, "
            f"got dout {tuple(dout.shape)} and tokens {tuple(tokens.shape)}")


@op(cases=_embedding_cases, args={"table": "float[vocab, d]", "tokens": "uint8[n]"})
def reference_embedding(table: FloatArray, tokens: UInt8Array) -> Float64Array:
    """The rows of `table` at `tokens`, (n, d) float32 (float64 here): each byte's embedding vector.

    table: one row per token value (vocab rows, each token below vocab); tokens: the bytes, flattened."""
    _check_lookup(table, tokens)
    return f64(table)[np.asarray(tokens, np.int64)]


@op(cases=_embedding_backward_cases, tolerance=(1e-5, 1e-6),
    args={"dout": "float[n, d]", "tokens": "uint8[n]", "vocab": "int"})
def reference_embedding_backward(dout: FloatArray, tokens: UInt8Array, vocab: int) -> Float64Array:
    """The gradient of the table of an embedding: grad[v] = sum of dout[i] over the i with tokens[i] = v,
    (vocab, d) float32 (float64 here); rows of tokens never seen are zero.

    dout: the loss's gradient with respect to the looked-up rows; tokens: the bytes the forward looked up;
    vocab: the table's number of rows (every token below it)."""
    _check_gradient(dout, tokens)
    grad = np.zeros((vocab, dout.shape[1]))
    np.add.at(grad, np.asarray(tokens, np.int64), f64(dout))
    return grad


@op
def cpu_embedding(table: Float32Array, tokens: UInt8Array) -> Float32Array:
    _check_lookup(table, tokens)
    return np.ascontiguousarray(table[tokens.astype(np.int64)])


@parallel_jit
def _cpu_embedding_backward(dout, tokens, grad):
    # parallel over columns: each thread owns a column, so no two threads add to one element
    for j in numba.prange(dout.shape[1]):
        for i in range(dout.shape[0]):
            grad[tokens[i], j] += dout[i, j]


@op
def cpu_embedding_backward(dout: Float32Array, tokens: UInt8Array, vocab: int) -> Float32Array:
    _check_gradient(dout, tokens)
    grad = np.zeros((vocab, dout.shape[1]), np.float32)
    _cpu_embedding_backward(dout, tokens, grad)
    return grad


@kernel((F32_2D, U8_1D, F32_2D))
def embedding_cuda(table, tokens, out):
    j, i = cuda.grid(2)
    if i < tokens.size and j < table.shape[1]:
        out[i, j] = table[tokens[i], j]


@kernel((F32_2D, U8_1D, F32_2D))
def embedding_backward_cuda(dout, tokens, grad):
    j, i = cuda.grid(2)
    if i < tokens.size and j < dout.shape[1]:
        cuda.atomic.add(grad, (tokens[i], j), dout[i, j])


@op
def cuda_embedding(table: BackendArray, tokens: BackendArray) -> BackendArray:
    _check_lookup(table, tokens)
    out = cuda.device_array((tokens.shape[0], table.shape[1]), np.float32)
    embedding_cuda[grid2(table.shape[1], tokens.shape[0])](table, tokens, out)
    return out


@op
def cuda_embedding_backward(dout: BackendArray, tokens: BackendArray, vocab: int) -> BackendArray:
    _check_gradient(dout, tokens)
    grad = device_zeros((vocab, dout.shape[1]))
    embedding_backward_cuda[grid2(dout.shape[1], tokens.shape[0])](dout, tokens, grad)
    return grad

# the ops of this module by name, for callers: embedding(kernels, ...)
embedding = registered(reference_embedding)
embedding_backward = registered(reference_embedding_backward)
