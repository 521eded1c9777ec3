"""transformer_epoch on the GPU: one block of THREADS threads per member (d-eggs' layout), tokens in
order, each product's outputs shared out over the threads, its reductions (x . B, sum |x|, max |y|,
the attention maximum and normaliser, the softmax sum) as block reductions. A member's noise rows
and perturbed vectors are made once for the window into global scratch; activations live in a
per-member global row and the KV cache is int8, [layer][position][dim] for K and for V per member.
Memory per member: `scratch_bytes` (bin/train_es.py prints it for the population it runs at once).
"""

import numba
import numpy as np

from eggnog.kernels.core.cuda_api import BOOL, I8_1D, I8_2D, I64, I64_1D, I64_2D, cuda, device_function, kernel
from eggnog.kernels.core.reductions import block_max, block_total
from eggnog.kernels.egg.int_math import EXP2, FIXED_POINT
from eggnog.kernels.egg.member_ops import gpu_floor_log2_x16
from eggnog.kernels.noise.streams import gpu_member_key_a, gpu_member_key_b, gpu_member_noise
from eggnog.kernels.transformer.layout import (
    DOWN,
    DOWN_BIAS,
    EMBEDDING,
    EMBEDDING_BIAS,
    FIRST_LAYER,
    INIT_MLP,
    LAYER_MLP,
    LN1_W,
    LN_W,
    MAX_UNIT,
    TENSORS_PER_LAYER,
    UP,
    UP_BIAS,
    K,
    O,
    Q,
    V,
    offsets,
    tensor_table,
)
from eggnog.kernels.transformer.tables import EXP_LUT, GELU_LUT, ROPE_SCALE_BIT, SOFTMAX_SCALE_BIT, rope_table

THREADS = 64  # a power of two: the block reductions are trees
I32_2D = numba.int32[:, ::1]
I64_3D = numba.int64[:, :, ::1]
# per-member activation row: x, h, q, kv, att, z (dim each), u (4 dim), logits (vocab), weights (steps)
X, H, QA, KV, ATT, Z, U = range(7)


@device_function
def _clip(v):
    return min(max(v, -MAX_UNIT), MAX_UNIT)


@device_function
def _max_all(v, partial, t):
    partial[t] = v
    top = block_max(partial, t)
    cuda.syncthreads()  # every thread has read it before the slots are reused
    return top


@device_function
def _mm(act, x_at, d_in, params, w_at, d_out, noise, n_at, sign, m_shift, perturbed, out_at, partial, t):
    s = np.int64(0)
    if perturbed:
        acc = np.int64(0)
        for k in range(t, d_in, THREADS):
            acc += act[x_at + k] * noise[n_at + k]
        s = block_total(acc, partial, t)
    for j in range(t, d_out, THREADS):
        acc = np.int64(0)
        row = w_at + j * d_in
        for k in range(d_in):
            acc += act[x_at + k] * np.int64(params[row + k])
        if perturbed:
            acc += (s * noise[n_at + d_in + j] * sign) >> m_shift
        act[out_at + j] = acc
    cuda.syncthreads()


@device_function
def _ln(act, x_at, h_at, dim, vecs, w_at, b_at, partial, t):
    acc = np.int64(0)
    for j in range(t, dim, THREADS):
        acc += abs(act[x_at + j])
    mean = max(block_total(acc, partial, t) // dim, 1)
    for j in range(t, dim, THREADS):
        act[h_at + j] = _clip((act[x_at + j] * vecs[w_at + j]) // mean + vecs[b_at + j])
    cuda.syncthreads()


@device_function
def _rescale(act, at, n, partial, t):
    mine = np.int64(0)
    for j in range(t, n, THREADS):
        mine = max(mine, abs(act[at + j]))
    top = _max_all(mine, partial, t)
    for j in range(t, n, THREADS):
        act[at + j] = (act[at + j] * MAX_UNIT) // top if top > 0 else 0
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
def _to_cache(cache, at, act, dim, t):
    """The rescaled K or V in the row's KV slot into the member's int8 cache."""
    for j in range(t, dim, THREADS):
        cache[at + j] = act[KV * dim + j]
    cuda.syncthreads()


@device_function
def _mlp(act, dim, first, params, table, noise, noise_at, vecs, vec_at, sign, m_shift, s_up, s_down, perturbed,
         gelu, partial, t):
    x_at, h_at, z_at, u_at = X * dim, H * dim, Z * dim, U * dim
    _ln(act, x_at, h_at, dim, vecs, vec_at[first + LN_W], vec_at[first + LN_W + 1], partial, t)
    _mm(act, h_at, dim, params, table[first + UP, 0], 4 * dim, noise, noise_at[first + UP], sign, m_shift, perturbed,
        u_at, partial, t)
    b_at = vec_at[first + UP_BIAS]
    for j in range(t, 4 * dim, THREADS):
        act[u_at + j] = gelu[_clip((act[u_at + j] + vecs[b_at + j]) >> s_up) + 128]
    cuda.syncthreads()
    _mm(act, u_at, 4 * dim, params, table[first + DOWN, 0], dim, noise, noise_at[first + DOWN], sign, m_shift,
        perturbed, z_at, partial, t)
    b_at = vec_at[first + DOWN_BIAS]
    for j in range(t, dim, THREADS):
        act[x_at + j] += (act[z_at + j] >> s_down) + vecs[b_at + j]
    cuda.syncthreads()
    _rescale(act, x_at, dim, partial, t)


@device_function
def _projection(act, dim, tid, params, table, noise, noise_at, sign, m_shift, s_qkv, perturbed, partial, t):
    """(W h) >> shift_qkv into the KV slot of the row."""
    _mm(act, H * dim, dim, params, table[tid, 0], dim, noise, noise_at[tid], sign, m_shift, perturbed, KV * dim,
        partial, t)
    for j in range(t, dim, THREADS):
        act[KV * dim + j] >>= s_qkv
    cuda.syncthreads()


@kernel((I8_1D, I32_2D, I64_1D, I64, I64_1D, BOOL, I64_2D, I64_1D, I64_1D, I64_3D, I64_1D, I64_1D, I64_1D, I8_2D,
         I8_2D, I64_2D, I8_2D, I8_2D, I64_2D), block=THREADS)
def transformer_epoch_cuda(params, windows, prefixes, first_member, spec, perturbed, table, noise_at, vec_at, rope,
                           exp_lut, gelu, exp2, noise_all, vecs_all, act_all, keys_all, values_all, out):
    m = cuda.blockIdx.x
    t = cuda.threadIdx.x
    partial = cuda.shared.array(THREADS, numba.int64)
    noise, vecs, act = noise_all[m], vecs_all[m], act_all[m]
    keys, values = keys_all[m], values_all[m]
    n_layer, dim, head_dim, vocab = spec[0], spec[1], spec[2], spec[3]
    s_attn, s_qkv, s_out, s_logit, s_up, s_down = spec[4], spec[5], spec[6], spec[7], spec[8], spec[9]
    m_shift, v_shift, kind = FIXED_POINT + spec[10], spec[11], spec[12]
    g = first_member + m
    sign = 1 - 2 * (g & 1)
    steps = windows.shape[1] - 1
    n_tensors = table.shape[0]
    logit_at, w_at = (U + 4) * dim, (U + 4) * dim + vocab

    # the window's noise rows, then the perturbed vectors
    if perturbed:
        for tid in range(n_tensors):
            ka = gpu_member_key_a(prefixes[tid], g >> 1)
            kb = gpu_member_key_b(ka)
            width = 2 * table[tid, 1] if table[tid, 2] == 0 else table[tid, 1] + table[tid, 2]
            for i in range(t, width, THREADS):
                noise[noise_at[tid] + i] = gpu_member_noise(ka, kb, i, kind)
        cuda.syncthreads()
    for tid in range(n_tensors):
        if table[tid, 2] == 0:
            n = table[tid, 1]
            for j in range(t, n, THREADS):
                v = np.int64(params[table[tid, 0] + j])
                if perturbed:
                    v += (np.int64(noise[noise_at[tid] + j]) * noise[noise_at[tid] + n + j] * sign) >> v_shift
                vecs[vec_at[tid] + j] = _clip(v)
    cuda.syncthreads()

    e_at, e_noise = table[EMBEDDING, 0], noise_at[EMBEDDING]
    total = np.int64(0)
    proxy = np.int64(0)
    for pos in range(steps):
        token = np.int64(windows[m, pos])
        a = np.int64(noise[e_noise + dim + token]) if perturbed else np.int64(0)
        for j in range(t, dim, THREADS):
            v = np.int64(params[e_at + token * dim + j]) + vecs[vec_at[EMBEDDING_BIAS] + j]
            if perturbed:
                v += (a * noise[e_noise + j] * sign) >> m_shift
            act[X * dim + j] = _clip(v)
        cuda.syncthreads()
        _mlp(act, dim, INIT_MLP, params, table, noise, noise_at, vecs, vec_at, sign, m_shift, s_up, s_down, perturbed,
             gelu, partial, t)
        for layer in range(n_layer):
            first = FIRST_LAYER + TENSORS_PER_LAYER * layer
            cache = (layer * steps + pos) * dim
            _ln(act, X * dim, H * dim, dim, vecs, vec_at[first + LN1_W], vec_at[first + LN1_W + 1], partial, t)
            _projection(act, dim, first + K, params, table, noise, noise_at, sign, m_shift, s_qkv, perturbed,
                        partial, t)
            _rope(act, KV * dim, rope, pos, dim, head_dim, t)
            _rescale(act, KV * dim, dim, partial, t)
            _to_cache(keys, cache, act, dim, t)
            _projection(act, dim, first + V, params, table, noise, noise_at, sign, m_shift, s_qkv, perturbed,
                        partial, t)
            _rescale(act, KV * dim, dim, partial, t)
            _to_cache(values, cache, act, dim, t)
            _projection(act, dim, first + Q, params, table, noise, noise_at, sign, m_shift, s_qkv, perturbed,
                        partial, t)
            _rope(act, KV * dim, rope, pos, dim, head_dim, t)
            _rescale(act, KV * dim, dim, partial, t)
            for start in range(0, dim, head_dim):  # one head at a time: scores, weights, weighted mean
                mine = np.int64(-(1 << 62))
                for i in range(t, pos + 1, THREADS):
                    row = (layer * steps + i) * dim
                    s = np.int64(0)
                    for d in range(start, start + head_dim):
                        s += act[KV * dim + d] * np.int64(keys[row + d])
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
                        acc += act[w_at + i] * np.int64(values[(layer * steps + i) * dim + d])
                    act[ATT * dim + d] = acc // norm
                cuda.syncthreads()
            _mm(act, ATT * dim, dim, params, table[first + O, 0], dim, noise, noise_at[first + O], sign, m_shift,
                perturbed, Z * dim, partial, t)
            for j in range(t, dim, THREADS):
                act[X * dim + j] += act[Z * dim + j] >> s_out
            cuda.syncthreads()
            _rescale(act, X * dim, dim, partial, t)
            _mlp(act, dim, first + LAYER_MLP, params, table, noise, noise_at, vecs, vec_at, sign, m_shift, s_up,
                 s_down, perturbed, gelu, partial, t)
        ln_f = FIRST_LAYER + TENSORS_PER_LAYER * n_layer
        _ln(act, X * dim, H * dim, dim, vecs, vec_at[ln_f], vec_at[ln_f + 1], partial, t)
        _mm(act, H * dim, dim, params, e_at, vocab, noise, e_noise, sign, m_shift, perturbed, logit_at, partial,
            t)  # the tied head: the embedding (vocab, dim) with its noise
        mine = np.int64(-(1 << 62))
        for v in range(t, vocab, THREADS):
            act[logit_at + v] >>= s_logit
            mine = max(mine, act[logit_at + v])
        top = _max_all(mine, partial, t)
        sum_lut = np.int64(0)
        for v in range(t, vocab, THREADS):
            sum_lut += exp_lut[min(top - act[logit_at + v], exp_lut.size - 1)]
        sum_lut = block_total(sum_lut, partial, t)
        target = np.int64(windows[m, pos + 1])
        if t == 0:
            proxy += 8 * ((gpu_floor_log2_x16(sum_lut) >> 4) - SOFTMAX_SCALE_BIT) + top - act[logit_at + target]
        cuda.syncthreads()  # thread 0 has read the unclipped target logit
        sum_exp = np.int64(0)
        for v in range(t, vocab, THREADS):
            logit = _clip(act[logit_at + v])
            act[logit_at + v] = logit
            sum_exp += exp2[logit + 128]
        sum_exp = block_total(sum_exp, partial, t)
        if t == 0:
            total += act[logit_at + target] + 128 - (gpu_floor_log2_x16(sum_exp) - 64)
        cuda.syncthreads()
    if t == 0:
        out[m, 0] = total
        out[m, 1] = proxy


def scratch_bytes(spec, steps):
    """Device bytes one member needs during a window: noise rows, vectors, activations, KV cache."""
    table = tensor_table(np.asarray(spec, np.int64))
    _, _, n_noise, n_vecs = offsets(table)
    n_layer, dim, _, vocab = (int(v) for v in spec[:4])
    return n_noise + n_vecs + 8 * ((U + 4) * dim + vocab + steps + 1) + 2 * n_layer * steps * dim


def run_epoch(params, windows, prefixes, first_member, spec, perturbed):
    """Launch on device arrays (params, int32 windows, prefixes); on the device: the (members, 2) int64
    sums (log-likelihood, proxy loss) and each member's activation row, whose [logit_offset(dim), + vocab)
    are the logits of the last position."""
    spec = np.ascontiguousarray(spec, np.int64)
    table = tensor_table(spec)
    noise_at, vec_at, n_noise, n_vecs = offsets(table)
    members, steps = windows.shape[0], windows.shape[1] - 1
    n_layer, dim, head_dim, vocab = (int(v) for v in spec[:4])
    cache = n_layer * steps * dim
    args = (params, windows, prefixes, np.int64(first_member), cuda.to_device(spec), bool(perturbed),
            cuda.to_device(table), cuda.to_device(noise_at), cuda.to_device(vec_at),
            cuda.to_device(rope_table(steps, head_dim)), cuda.to_device(EXP_LUT), cuda.to_device(GELU_LUT),
            cuda.to_device(EXP2), cuda.device_array((members, max(n_noise, 1)), np.int8),
            cuda.device_array((members, n_vecs), np.int8),
            cuda.device_array((members, (U + 4) * dim + vocab + steps), np.int64),
            cuda.device_array((members, cache), np.int8), cuda.device_array((members, cache), np.int8),
            cuda.device_array((members, 2), np.int64))
    transformer_epoch_cuda[members, THREADS](*args)
    return args[-1], args[-4]


def logit_offset(dim):
    return (U + 4) * dim
