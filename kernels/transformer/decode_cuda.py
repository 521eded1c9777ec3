"""transformer_decode on the GPU: one block of THREADS threads carries one unperturbed member through
the new tokens, with the KV cache kept in device memory between calls ([layer][position][dim], int8),
so a generated token costs one position, not a re-read of the context. Each product's outputs are
shared out over the threads, its reductions (sum |x|, max |y|, the attention maximum and normaliser)
are block reductions; activations live in one global int64 row. Latency-bound by design: generation
reads one token at a time, so there is no population to tile.
"""

from functools import lru_cache

import numba
import numpy as np

from eggnog.kernels.core.cuda_api import I8_1D, I64, I64_1D, I64_2D, cuda, device_function, kernel
from eggnog.kernels.core.reductions import block_max, block_total
from eggnog.kernels.transformer import layout as ids  # the tensor ids and MAX_UNIT
from eggnog.kernels.transformer.layout import tensor_table
from eggnog.kernels.transformer.tables import EXP_LUT, GELU_LUT, ROPE_SCALE_BIT, rope_table

THREADS = 128  # a power of two: the block reductions are trees
I32_1D = numba.int32[::1]
I64_3D = numba.int64[:, :, ::1]
I8_3D = numba.int8[:, :, ::1]
# the activation row: x, h, q, kv, att, z (dim each), u (4 dim), logits (vocab), weights (positions)
X, H, QA, KV, ATT, Z, U = range(7)


@device_function
def _clip(v):
    return min(max(v, -ids.MAX_UNIT), ids.MAX_UNIT)


@device_function
def _max_all(v, partial, t):
    partial[t] = v
    top = block_max(partial, t)
    cuda.syncthreads()  # every thread has read it before the slots are reused
    return top


@device_function
def _mm(act, x_at, d_in, params, w_at, d_out, out_at, t):
    for j in range(t, d_out, THREADS):
        acc = np.int64(0)
        row = w_at + j * d_in
        for k in range(d_in):
            acc += act[x_at + k] * np.int64(params[row + k])
        act[out_at + j] = acc
    cuda.syncthreads()


@device_function
def _ln(act, x_at, h_at, dim, params, w_at, partial, t):
    acc = np.int64(0)
    for j in range(t, dim, THREADS):
        acc += abs(act[x_at + j])
    mean = max(block_total(acc, partial, t) // dim, 1)
    for j in range(t, dim, THREADS):
        w, b = _clip(np.int64(params[w_at + j])), _clip(np.int64(params[w_at + dim + j]))
        act[h_at + j] = _clip((act[x_at + j] * w) // mean + b)
    cuda.syncthreads()


@device_function
def _rescale(act, at, n, partial, t):
    mine = np.int64(0)
    for j in range(t, n, THREADS):
        mine = max(mine, abs(act[at + j]))
    top = _max_all(mine, partial, t)
    for j in range(t, n, THREADS):
        act[at + j] = (act[at + j] * ids.MAX_UNIT) // top if top > 0 else 0
    cuda.syncthreads()


@device_function
def _rope(act, at, rope, pos, dim, head_dim, t):
    half = head_dim // 2
    for idx in range(t, dim // 2, THREADS):
        i = idx % half
        p = at + (idx // half) * head_dim + 2 * i
        a, b = act[p], act[p + 1]
        c, s = rope[pos, i, 0], rope[pos, i, 1]
        act[p] = (a * c - b * s) >> ROPE_SCALE_BIT
        act[p + 1] = (a * s + b * c) >> ROPE_SCALE_BIT
    cuda.syncthreads()


@device_function
def _mlp(act, dim, first, params, table, gelu, s_up, s_down, partial, t):
    x_at, h_at, z_at, u_at = X * dim, H * dim, Z * dim, U * dim
    _ln(act, x_at, h_at, dim, params, table[first + ids.LN_W, 0], partial, t)
    _mm(act, h_at, dim, params, table[first + ids.UP, 0], 4 * dim, u_at, t)
    b_at = table[first + ids.UP_BIAS, 0]
    for j in range(t, 4 * dim, THREADS):
        act[u_at + j] = gelu[_clip((act[u_at + j] + _clip(np.int64(params[b_at + j]))) >> s_up) + 128]
    cuda.syncthreads()
    _mm(act, u_at, 4 * dim, params, table[first + ids.DOWN, 0], dim, z_at, t)
    b_at = table[first + ids.DOWN_BIAS, 0]
    for j in range(t, dim, THREADS):
        act[x_at + j] += (act[z_at + j] >> s_down) + _clip(np.int64(params[b_at + j]))
    cuda.syncthreads()
    _rescale(act, x_at, dim, partial, t)


@device_function
def _qkv(act, dim, tid, params, table, s_qkv, t):
    """(W h) >> shift_qkv into the KV slot of the row."""
    _mm(act, H * dim, dim, params, table[tid, 0], dim, KV * dim, t)
    for j in range(t, dim, THREADS):
        act[KV * dim + j] >>= s_qkv
    cuda.syncthreads()


@device_function
def _to_cache(cache, layer, pos, act, dim, t):
    for j in range(t, dim, THREADS):
        cache[layer, pos, j] = act[KV * dim + j]
    cuda.syncthreads()


@kernel((I8_1D, I32_1D, I64, I64_1D, I64_2D, I64_3D, I64_1D, I64_1D, I8_3D, I8_3D, I64_1D, I64_1D), block=THREADS)
def transformer_decode_cuda(params, tokens, position, spec, table, rope, exp_lut, gelu, keys, values, act, logits):
    t = cuda.threadIdx.x
    partial = cuda.shared.array(THREADS, numba.int64)
    n_layer, dim, head_dim, vocab = spec[0], spec[1], spec[2], spec[3]
    s_attn, s_qkv, s_out, s_logit, s_up, s_down = spec[4], spec[5], spec[6], spec[7], spec[8], spec[9]
    w_at = (U + 4) * dim + vocab
    e_at, eb_at = table[ids.EMBEDDING, 0], table[ids.EMBEDDING_BIAS, 0]
    for step in range(tokens.size):
        pos = position + step
        token = np.int64(tokens[step])
        for j in range(t, dim, THREADS):
            act[X * dim + j] = _clip(np.int64(params[e_at + token * dim + j]) + _clip(np.int64(params[eb_at + j])))
        cuda.syncthreads()
        _mlp(act, dim, ids.INIT_MLP, params, table, gelu, s_up, s_down, partial, t)
        for layer in range(n_layer):
            first = ids.FIRST_LAYER + ids.TENSORS_PER_LAYER * layer
            _ln(act, X * dim, H * dim, dim, params, table[first + ids.LN1_W, 0], partial, t)
            _qkv(act, dim, first + ids.K, params, table, s_qkv, t)
            _rope(act, KV * dim, rope, pos, dim, head_dim, t)
            _rescale(act, KV * dim, dim, partial, t)
            _to_cache(keys, layer, pos, act, dim, t)
            _qkv(act, dim, first + ids.V, params, table, s_qkv, t)
            _rescale(act, KV * dim, dim, partial, t)
            _to_cache(values, layer, pos, act, dim, t)
            _qkv(act, dim, first + ids.Q, params, table, s_qkv, t)
            _rope(act, KV * dim, rope, pos, dim, head_dim, t)
            _rescale(act, KV * dim, dim, partial, t)
            for start in range(0, dim, head_dim):  # one head at a time: scores, weights, weighted mean
                mine = np.int64(-(1 << 62))
                for i in range(t, pos + 1, THREADS):
                    s = np.int64(0)
                    for d in range(start, start + head_dim):
                        s += act[KV * dim + d] * np.int64(keys[layer, i, d])
                    act[w_at + i] = s >> s_attn
                    mine = max(mine, act[w_at + i])
                top = _max_all(mine, partial, t)
                acc = np.int64(0)
                for i in range(t, pos + 1, THREADS):
                    act[w_at + i] = exp_lut[min(top - act[w_at + i], exp_lut.size - 1)]
                    acc += act[w_at + i]
                norm = block_total(acc, partial, t)
                for d in range(start + t, start + head_dim, THREADS):
                    acc = np.int64(0)
                    for i in range(pos + 1):
                        acc += act[w_at + i] * np.int64(values[layer, i, d])
                    act[ATT * dim + d] = acc // norm
                cuda.syncthreads()
            _mm(act, ATT * dim, dim, params, table[first + ids.O, 0], dim, Z * dim, t)
            for j in range(t, dim, THREADS):
                act[X * dim + j] += act[Z * dim + j] >> s_out
            cuda.syncthreads()
            _rescale(act, X * dim, dim, partial, t)
            _mlp(act, dim, first + ids.LAYER_MLP, params, table, gelu, s_up, s_down, partial, t)
    ln_f = table[ids.FIRST_LAYER + ids.TENSORS_PER_LAYER * n_layer, 0]
    _ln(act, X * dim, H * dim, dim, params, ln_f, partial, t)
    _mm(act, H * dim, dim, params, e_at, vocab, (U + 4) * dim, t)  # the tied head
    for v in range(t, vocab, THREADS):
        logits[v] = _clip(act[(U + 4) * dim + v] >> s_logit)


@lru_cache(maxsize=8)
def _device_tables(spec_key, positions):
    """The spec, tensor table and look-up tables on the device, made once per model and cache size
    (generation launches once a token)."""
    spec = np.array(spec_key, np.int64)
    rope = rope_table(positions, spec_key[2])
    return tuple(cuda.to_device(a) for a in (spec, tensor_table(spec), rope, EXP_LUT, GELU_LUT))


def run_decode(params, tokens, keys, values, position, spec):
    """Launch on device arrays (params, int32 tokens, int8 caches (n_layer, positions, dim)); the
    (vocab,) int64 clipped logits after the last token, on the device."""
    dim, vocab, positions = int(spec[1]), int(spec[3]), keys.shape[1]
    logits = cuda.device_array(vocab, np.int64)
    spec_d, table, rope, exp_lut, gelu = _device_tables(tuple(int(v) for v in spec), positions)
    transformer_decode_cuda[1, THREADS](params, tokens, np.int64(position), spec_d, table, rope, exp_lut, gelu, keys,
                                        values, cuda.device_array((U + 4) * dim + vocab + positions, np.int64), logits)
    return logits
