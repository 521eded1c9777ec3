"""The CPU twin of transformer_epoch: `prange` over members, each member's tokens, layers and KV
cache inside one numba function, so nothing is forked per token. A member's noise rows and
perturbed vectors are made once for the window (they are constant over it)."""

import numba
import numpy as np

from eggnog.kernels.egg.int_math import EXP2, FIXED_POINT
from eggnog.kernels.egg.member_ops import cpu_floor_log2_x16
from eggnog.kernels.noise.streams import cpu_member_key_a, cpu_member_key_b, cpu_member_noise
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


@numba.njit(cache=True)
def _clip(v):
    return min(max(v, -MAX_UNIT), MAX_UNIT)


@numba.njit(cache=True)
def _rescale(y, n):
    top = 0
    for j in range(n):
        top = max(top, abs(y[j]))
    for j in range(n):
        y[j] = (y[j] * MAX_UNIT) // top if top > 0 else 0


@numba.njit(cache=True)
def _mm(x, d_in, params, table, tid, noise, noise_at, sign, m_shift, perturbed, out):
    at, d_out = table[tid, 0], table[tid, 2]
    s = 0
    if perturbed:
        for k in range(d_in):
            s += x[k] * noise[noise_at[tid] + k]
    for j in range(d_out):
        acc = 0
        row = at + j * d_in
        for k in range(d_in):
            acc += x[k] * params[row + k]
        if perturbed:
            acc += (s * noise[noise_at[tid] + d_in + j] * sign) >> m_shift
        out[j] = acc


@numba.njit(cache=True)
def _ln(x, dim, vecs, vec_at, w_tid, out):
    total = 0
    for j in range(dim):
        total += abs(x[j])
    mean = max(total // dim, 1)
    w, b = vec_at[w_tid], vec_at[w_tid + 1]
    for j in range(dim):
        out[j] = _clip((x[j] * vecs[w + j]) // mean + vecs[b + j])


@numba.njit(cache=True)
def _mlp(x, first, dim, params, table, noise, noise_at, vecs, vec_at, sign, m_shift, s_up, s_down, perturbed,
         h, u, z):
    _ln(x, dim, vecs, vec_at, first + LN_W, h)
    _mm(h, dim, params, table, first + UP, noise, noise_at, sign, m_shift, perturbed, u)
    for j in range(4 * dim):
        u[j] = GELU_LUT[_clip((u[j] + vecs[vec_at[first + UP_BIAS] + j]) >> s_up) + 128]
    _mm(u, 4 * dim, params, table, first + DOWN, noise, noise_at, sign, m_shift, perturbed, z)
    for j in range(dim):
        x[j] += (z[j] >> s_down) + vecs[vec_at[first + DOWN_BIAS] + j]
    _rescale(x, dim)


@numba.njit(cache=True)
def _rope(u, rope, t, dim, head_dim):
    half = head_dim // 2
    for start in range(0, dim, head_dim):
        for i in range(half):
            a, b = u[start + 2 * i], u[start + 2 * i + 1]
            c, s = rope[t, i, 0], rope[t, i, 1]
            u[start + 2 * i] = (a * c - b * s) >> ROPE_SCALE_BIT
            u[start + 2 * i + 1] = (a * s + b * c) >> ROPE_SCALE_BIT


@numba.njit(cache=True)
def _member(params, window, prefixes, g, spec, perturbed, table, noise_at, vec_at, n_noise, n_vecs, rope, logits,
            total):
    """The member's summed log-likelihood and proxy loss into `total` (2,); `logits` (vocab,) ends with
    those of the last position."""
    n_layer, dim, head_dim, vocab = spec[0], spec[1], spec[2], spec[3]
    s_attn, s_qkv, s_out, s_logit, s_up, s_down = spec[4], spec[5], spec[6], spec[7], spec[8], spec[9]
    m_shift, v_shift, kind = FIXED_POINT + spec[10], spec[11], spec[12]
    sign = 1 - 2 * (g & 1)
    steps = window.size - 1
    n_tensors = table.shape[0]

    # the window's noise rows and perturbed vectors
    noise = np.zeros(n_noise, np.int64)
    if perturbed:
        for tid in range(n_tensors):
            ka = cpu_member_key_a(prefixes[tid], g >> 1)
            kb = cpu_member_key_b(ka)
            width = 2 * table[tid, 1] if table[tid, 2] == 0 else table[tid, 1] + table[tid, 2]
            for i in range(width):
                noise[noise_at[tid] + i] = cpu_member_noise(ka, kb, i, kind)
    vecs = np.zeros(n_vecs, np.int64)
    for tid in range(n_tensors):
        if table[tid, 2] == 0:
            n = table[tid, 1]
            for j in range(n):
                v = np.int64(params[table[tid, 0] + j])
                if perturbed:
                    v += (noise[noise_at[tid] + j] * noise[noise_at[tid] + n + j] * sign) >> v_shift
                vecs[vec_at[tid] + j] = _clip(v)

    x = np.zeros(dim, np.int64)
    h = np.zeros(dim, np.int64)
    q = np.zeros(dim, np.int64)
    kv = np.zeros(dim, np.int64)
    att = np.zeros(dim, np.int64)
    u = np.zeros(4 * dim, np.int64)
    z = np.zeros(dim, np.int64)
    weights = np.zeros(steps, np.int64)
    keys = np.zeros((n_layer, steps, dim), np.int64)
    values = np.zeros((n_layer, steps, dim), np.int64)
    e_at, e_noise = table[EMBEDDING, 0], noise_at[EMBEDDING]
    for t in range(steps):
        token = np.int64(window[t])
        a = noise[e_noise + dim + token]
        for j in range(dim):
            v = np.int64(params[e_at + token * dim + j]) + vecs[vec_at[EMBEDDING_BIAS] + j]
            if perturbed:
                v += (a * noise[e_noise + j] * sign) >> m_shift
            x[j] = _clip(v)
        _mlp(x, INIT_MLP, dim, params, table, noise, noise_at, vecs, vec_at, sign, m_shift, s_up, s_down,
             perturbed, h, u, z)
        for layer in range(n_layer):
            first = FIRST_LAYER + TENSORS_PER_LAYER * layer
            _ln(x, dim, vecs, vec_at, first + LN1_W, h)
            _mm(h, dim, params, table, first + K, noise, noise_at, sign, m_shift, perturbed, kv)
            for j in range(dim):
                kv[j] >>= s_qkv
            _rope(kv, rope, t, dim, head_dim)
            _rescale(kv, dim)
            keys[layer, t, :] = kv
            _mm(h, dim, params, table, first + V, noise, noise_at, sign, m_shift, perturbed, kv)
            for j in range(dim):
                kv[j] >>= s_qkv
            _rescale(kv, dim)
            values[layer, t, :] = kv
            _mm(h, dim, params, table, first + Q, noise, noise_at, sign, m_shift, perturbed, q)
            for j in range(dim):
                q[j] >>= s_qkv
            _rope(q, rope, t, dim, head_dim)
            _rescale(q, dim)
            for start in range(0, dim, head_dim):
                top = -(1 << 62)
                for i in range(t + 1):
                    s = 0
                    for d in range(start, start + head_dim):
                        s += q[d] * keys[layer, i, d]
                    weights[i] = s >> s_attn
                    top = max(top, weights[i])
                norm = 0
                for i in range(t + 1):
                    weights[i] = EXP_LUT[min(top - weights[i], EXP_LUT.size - 1)]
                    norm += weights[i]
                for d in range(start, start + head_dim):
                    acc = 0
                    for i in range(t + 1):
                        acc += weights[i] * values[layer, i, d]
                    att[d] = acc // norm
            _mm(att, dim, params, table, first + O, noise, noise_at, sign, m_shift, perturbed, z)
            for j in range(dim):
                x[j] += z[j] >> s_out
            _rescale(x, dim)
            _mlp(x, first + LAYER_MLP, dim, params, table, noise, noise_at, vecs, vec_at, sign, m_shift, s_up,
                 s_down, perturbed, h, u, z)
        _ln(x, dim, vecs, vec_at, FIRST_LAYER + TENSORS_PER_LAYER * n_layer, h)
        _mm(h, dim, params, table, EMBEDDING, noise, noise_at, sign, m_shift, perturbed, logits)  # the tied head
        target = np.int64(window[t + 1])
        top = -(1 << 62)
        for v in range(vocab):
            logits[v] >>= s_logit
            top = max(top, logits[v])
        sum_lut = 0
        for v in range(vocab):
            sum_lut += EXP_LUT[min(top - logits[v], EXP_LUT.size - 1)]
        total[1] += 8 * ((cpu_floor_log2_x16(sum_lut) >> 4) - SOFTMAX_SCALE_BIT) + top - logits[target]
        sum_exp = 0
        for v in range(vocab):
            logits[v] = _clip(logits[v])
            sum_exp += EXP2[logits[v] + 128]
        total[0] += logits[target] + 128 - (cpu_floor_log2_x16(sum_exp) - 64)


@numba.njit(parallel=True, cache=True)
def _epoch(params, windows, prefixes, first_member, spec, perturbed, table, noise_at, vec_at, n_noise, n_vecs, rope,
           out, logits):
    for m in numba.prange(windows.shape[0]):
        _member(params, windows[m], prefixes, first_member + m, spec, perturbed, table, noise_at, vec_at, n_noise,
                n_vecs, rope, logits[m], out[m])


def run_epoch(params, windows, prefixes, first_member, spec, perturbed):
    """(each member's summed (log-likelihood, proxy loss), each member's logits at the last position)."""
    spec = np.ascontiguousarray(spec, np.int64)
    table = tensor_table(spec)
    noise_at, vec_at, n_noise, n_vecs = offsets(table)
    windows = np.ascontiguousarray(windows, np.int32)
    out = np.zeros((windows.shape[0], 2), np.int64)
    logits = np.zeros((windows.shape[0], int(spec[3])), np.int64)
    rope = rope_table(windows.shape[1] - 1, int(spec[2]))
    _epoch(np.ascontiguousarray(params, np.int8), windows, np.ascontiguousarray(prefixes, np.int64), int(first_member),
           spec, bool(perturbed), table, noise_at, vec_at, n_noise, n_vecs, rope, out, logits)
    return out, logits
