"""The CPU twin of transformer_epoch (and of transformer_decode): `prange` over tiles of members, each
tile through every position, layer and KV cache inside one numba function, so nothing is forked per
token.

More in docs/internals.md (kernels/transformer/epoch_cpu.py)."""

from functools import lru_cache

import numba
import numpy as np

from eggnog.kernels.egg.epoch_cpu import COLS, ROWS, pack_panels, panel_product, tile_pairs, tile_size
from eggnog.kernels.egg.int_math import EXP2, FIXED_POINT
from eggnog.kernels.egg.member_ops import cpu_floor_log2_x16
from eggnog.kernels.noise.streams import cpu_member_key_a, cpu_member_key_b, cpu_member_noise
from eggnog.kernels.transformer import layout as ids  # the tensor ids and MAX_UNIT
from eggnog.kernels.transformer.layout import offsets, tensor_table
from eggnog.kernels.transformer.tables import (
    EXP_LUT,
    GELU_LUT,
    ROPE_SCALE_BIT,
    SOFTMAX_SCALE_BIT,
    cached_rope_table,
)


def panel_table(table):
    """The columns pack_panels reads (1: offset, 2: d_in, 6: panel offset or -1, 7: d_out) of every
    tensor, and the packed size."""
    rows = np.full((len(table), 8), -1, np.int64)
    at = 0
    for t, (offset, d_in, d_out) in enumerate(table):
        rows[t, 1], rows[t, 2], rows[t, 7] = offset, d_in, d_out
        if d_out:
            rows[t, 6] = at
            at += -(-d_out // COLS) * COLS * -(-d_in // 2) * 2
    return rows, at


@numba.njit(cache=True)
def _padded(n):
    return -(-n // COLS) * COLS


@numba.njit(cache=True)
def _clip(v):
    return min(max(v, -ids.MAX_UNIT), ids.MAX_UNIT)


@numba.njit(cache=True)
def _matmul(x, count, d_in, packed, panel_at, d_out, noise, pair_of, sign_of, n_at, m_shift, perturbed, out):
    """out[m, :d_out] = x[m] . W^T + ((x[m] . B_p) sign A_p) >> m_shift for the tile's members m < count
    (x int16, out int32; rows past count are zero in x and never read in out)."""
    xp, op = x.shape[1], out.shape[1]
    xf, of = x.reshape(x.size), out.reshape(out.size)
    rows = (count + ROWS - 1) // ROWS * ROWS
    pairs = (d_in + 1) // 2
    for jb in range((d_out + COLS - 1) // COLS):
        for m in range(0, rows, ROWS):
            panel_product(xf, m * xp, xp, packed, panel_at + jb * pairs * 2 * COLS, pairs, of, m * op + jb * COLS, op)
    if perturbed:  # slices from 0, so that both loops vectorise
        for m in range(count):
            b, a = noise[pair_of[m], n_at:n_at + d_in], noise[pair_of[m], n_at + d_in:n_at + d_in + d_out]
            xm, om = x[m, :d_in], out[m, :d_out]
            s = np.int64(0)
            for k in range(d_in):
                s += np.int64(xm[k]) * np.int64(b[k])
            s *= sign_of[m]
            for j in range(d_out):
                om[j] += (s * np.int64(a[j])) >> m_shift


@numba.njit(cache=True)
def _floor_div(a, d, inverse):
    """floor(a / d) for d > 0 and |a| < 2^52 without an integer division: the float64 estimate is off by
    at most one, and the remainder corrects it (a row shares d, so the loops over it vectorise)."""
    q = np.int64(np.floor(a * inverse))
    r = a - q * d
    return q - 1 if r < 0 else (q + 1 if r >= d else q)


@numba.njit(cache=True)
def _rescale_into(y, n, out):
    """out[:n] = y * 127 // max|y| (0 for an all-zero y)."""
    top = np.int64(0)
    for j in range(n):
        top = max(top, abs(y[j]))
    if top == 0:
        out[:n] = 0
        return
    inverse = 1.0 / top
    for j in range(n):
        out[j] = _floor_div(y[j] * ids.MAX_UNIT, top, inverse)


@numba.njit(cache=True)
def _ln(x, count, dim, vecs, w_at, out):
    for m in range(count):
        total = np.int64(0)
        for j in range(dim):
            total += abs(np.int64(x[m, j]))
        mean = max(total // dim, 1)
        inverse = 1.0 / mean
        for j in range(dim):
            scaled = _floor_div(np.int64(x[m, j]) * vecs[m, w_at + j], mean, inverse)
            out[m, j] = _clip(scaled + vecs[m, w_at + dim + j])


@numba.njit(cache=True)
def _mlp(x, count, first, dim, packed, panels, noise, noise_at, pair_of, sign_of, m_shift, perturbed, vecs, vec_at,
         s_up, s_down, h, u32, u, z32, y):
    _ln(x, count, dim, vecs, vec_at[first + ids.LN_W], h)
    _matmul(h, count, dim, packed, panels[first + ids.UP, 6], 4 * dim, noise, pair_of, sign_of,
            noise_at[first + ids.UP],
            m_shift, perturbed, u32)
    b_at = vec_at[first + ids.UP_BIAS]
    for m in range(count):
        for j in range(4 * dim):
            u[m, j] = GELU_LUT[_clip((np.int64(u32[m, j]) + vecs[m, b_at + j]) >> s_up) + 128]
    _matmul(u, count, 4 * dim, packed, panels[first + ids.DOWN, 6], dim, noise, pair_of, sign_of,
            noise_at[first + ids.DOWN], m_shift, perturbed, z32)
    b_at = vec_at[first + ids.DOWN_BIAS]
    for m in range(count):
        for j in range(dim):
            y[j] = np.int64(x[m, j]) + (np.int64(z32[m, j]) >> s_down) + vecs[m, b_at + j]
        _rescale_into(y, dim, x[m])


@numba.njit(cache=True)
def _roped(src, shift, rope, pos, dim, head_dim, y):
    """y = rope(src >> shift) at position pos, per head on pairs (2i, 2i + 1)."""
    half = head_dim // 2
    for start in range(0, dim, head_dim):
        for i in range(half):
            a, b = np.int64(src[start + 2 * i]) >> shift, np.int64(src[start + 2 * i + 1]) >> shift
            c, s = rope[pos, i, 0], rope[pos, i, 1]
            y[start + 2 * i] = (a * c - b * s) >> ROPE_SCALE_BIT
            y[start + 2 * i + 1] = (a * s + b * c) >> ROPE_SCALE_BIT


@numba.njit(cache=True)
def _tile(params, packed, panels, windows, start, count, prefixes, first_member, spec, perturbed, table, noise_at,
          vec_at, n_noise, n_vecs, rope, position, keys, values, total, last_logits):
    """Members [start, start + count) of the slice read windows[start + m, :-1] at positions position,
    position + 1, ... with the KV cache `keys`, `values` (n_layer, count, positions, dim) int8, filled
    below `position`; each member's summed (log-likelihood, proxy loss) into total[start + m] and its
    clipped logits after the last position into last_logits[start + m]."""
    n_layer, dim, head_dim, vocab = spec[0], spec[1], spec[2], spec[3]
    s_attn, s_qkv, s_out, s_logit, s_up, s_down = spec[4], spec[5], spec[6], spec[7], spec[8], spec[9]
    m_shift, v_shift, kind = FIXED_POINT + spec[10], spec[11], spec[12]
    n_tensors = table.shape[0]
    pair0, pairs, pair_of, sign_of = tile_pairs(first_member + start, count)

    # the tile's noise rows, then each member's perturbed vectors
    noise = np.zeros((pairs, n_noise if perturbed else 1), np.int8)
    if perturbed:
        for p in range(pairs):
            for tid in range(n_tensors):
                ka = cpu_member_key_a(prefixes[tid], pair0 + p)
                kb = cpu_member_key_b(ka)
                width = 2 * table[tid, 1] if table[tid, 2] == 0 else table[tid, 1] + table[tid, 2]
                for i in range(width):
                    noise[p, noise_at[tid] + i] = cpu_member_noise(ka, kb, i, kind)
    vecs = np.zeros((count, n_vecs), np.int64)
    for tid in range(n_tensors):
        if table[tid, 2] == 0:
            n, at = table[tid, 1], noise_at[tid]
            for m in range(count):
                for j in range(n):
                    v = np.int64(params[table[tid, 0] + j])
                    if perturbed:
                        nf = noise[pair_of[m]]
                        v += (np.int64(nf[at + j]) * np.int64(nf[at + n + j]) * sign_of[m]) >> v_shift
                    vecs[m, vec_at[tid] + j] = _clip(v)

    rows = (count + ROWS - 1) // ROWS * ROWS
    pitch = dim + (dim & 1)  # products read k in pairs: an odd width reads one zero more
    x = np.zeros((rows, pitch), np.int16)  # the residual stream
    h = np.zeros((rows, pitch), np.int16)
    att = np.zeros((rows, pitch), np.int16)
    u = np.zeros((rows, 4 * dim), np.int16)
    q32 = np.zeros((rows, _padded(dim)), np.int32)
    k32 = np.zeros((rows, _padded(dim)), np.int32)
    v32 = np.zeros((rows, _padded(dim)), np.int32)
    u32 = np.zeros((rows, _padded(4 * dim)), np.int32)
    logits = np.zeros((rows, _padded(vocab)), np.int32)
    y = np.zeros(max(dim, vocab), np.int64)
    qm = np.zeros(dim, np.int64)
    weights = np.zeros(keys.shape[2], np.int64)
    sums = np.zeros(head_dim, np.int64)
    e_at, e_noise = table[ids.EMBEDDING, 0], noise_at[ids.EMBEDDING]
    b_at = vec_at[ids.EMBEDDING_BIAS]
    steps = windows.shape[1] - 1
    for t in range(steps):
        pos = position + t
        for m in range(count):
            token = np.int64(windows[start + m, t])
            a = sign_of[m] * np.int64(noise[pair_of[m], e_noise + dim + token]) if perturbed else np.int64(0)
            for j in range(dim):
                v = np.int64(params[e_at + token * dim + j]) + vecs[m, b_at + j]
                if perturbed:
                    v += (a * np.int64(noise[pair_of[m], e_noise + j])) >> m_shift
                x[m, j] = _clip(v)
        _mlp(x, count, ids.INIT_MLP, dim, packed, panels, noise, noise_at, pair_of, sign_of, m_shift, perturbed, vecs,
             vec_at, s_up, s_down, h, u32, u, q32, y)
        for layer in range(n_layer):
            first = ids.FIRST_LAYER + ids.TENSORS_PER_LAYER * layer
            _ln(x, count, dim, vecs, vec_at[first + ids.LN1_W], h)
            _matmul(h, count, dim, packed, panels[first + ids.Q, 6], dim, noise, pair_of, sign_of,
                    noise_at[first + ids.Q],
                    m_shift, perturbed, q32)
            _matmul(h, count, dim, packed, panels[first + ids.K, 6], dim, noise, pair_of, sign_of,
                    noise_at[first + ids.K],
                    m_shift, perturbed, k32)
            _matmul(h, count, dim, packed, panels[first + ids.V, 6], dim, noise, pair_of, sign_of,
                    noise_at[first + ids.V],
                    m_shift, perturbed, v32)
            for m in range(count):
                _roped(k32[m], s_qkv, rope, pos, dim, head_dim, y)
                _rescale_into(y, dim, keys[layer, m, pos])
                for j in range(dim):
                    y[j] = np.int64(v32[m, j]) >> s_qkv
                _rescale_into(y, dim, values[layer, m, pos])
                _roped(q32[m], s_qkv, rope, pos, dim, head_dim, y)
                _rescale_into(y, dim, qm)
                for hs in range(0, dim, head_dim):  # one head at a time: scores, weights, weighted mean
                    qh = qm[hs:hs + head_dim]
                    top = np.int64(-(1 << 62))
                    for i in range(pos + 1):
                        key = keys[layer, m, i, hs:hs + head_dim]
                        s = np.int64(0)
                        for d in range(head_dim):
                            s += qh[d] * np.int64(key[d])
                        weights[i] = s >> s_attn
                        top = max(top, weights[i])
                    norm = np.int64(0)
                    for i in range(pos + 1):
                        weights[i] = EXP_LUT[min(top - weights[i], EXP_LUT.size - 1)]
                        norm += weights[i]
                    sums[:head_dim] = 0
                    for i in range(pos + 1):  # key by key, so that the values are read along their rows
                        value, w = values[layer, m, i, hs:hs + head_dim], weights[i]
                        for d in range(head_dim):
                            sums[d] += w * np.int64(value[d])
                    inverse = 1.0 / norm
                    for d in range(head_dim):
                        att[m, hs + d] = _floor_div(sums[d], norm, inverse)
            _matmul(att, count, dim, packed, panels[first + ids.O, 6], dim, noise, pair_of, sign_of,
                    noise_at[first + ids.O], m_shift, perturbed, q32)
            for m in range(count):
                for j in range(dim):
                    y[j] = np.int64(x[m, j]) + (np.int64(q32[m, j]) >> s_out)
                _rescale_into(y, dim, x[m])
            _mlp(x, count, first + ids.LAYER_MLP, dim, packed, panels, noise, noise_at, pair_of, sign_of, m_shift,
                 perturbed, vecs, vec_at, s_up, s_down, h, u32, u, q32, y)
        _ln(x, count, dim, vecs, vec_at[ids.FIRST_LAYER + ids.TENSORS_PER_LAYER * n_layer], h)
        _matmul(h, count, dim, packed, panels[ids.EMBEDDING, 6], vocab, noise, pair_of, sign_of, e_noise, m_shift,
                perturbed, logits)  # the tied head: the embedding (vocab, dim) with its noise
        for m in range(count):
            target = np.int64(windows[start + m, t + 1])
            top = np.int64(-(1 << 62))
            for v in range(vocab):
                y[v] = np.int64(logits[m, v]) >> s_logit
                top = max(top, y[v])
            sum_lut = np.int64(0)
            for v in range(vocab):
                sum_lut += EXP_LUT[min(top - y[v], EXP_LUT.size - 1)]
            total[start + m, 1] += 8 * ((cpu_floor_log2_x16(sum_lut) >> 4) - SOFTMAX_SCALE_BIT) + top - y[target]
            sum_exp = np.int64(0)
            for v in range(vocab):
                y[v] = _clip(y[v])
                sum_exp += EXP2[y[v] + 128]
            total[start + m, 0] += y[target] + 128 - (cpu_floor_log2_x16(sum_exp) - 64)
            if t == steps - 1:
                last_logits[start + m, :] = y[:vocab]


@numba.njit(parallel=True, cache=True)
def _epoch(params, packed, panels, windows, prefixes, first_member, spec, perturbed, table, noise_at, vec_at, n_noise,
           n_vecs, rope, tile, total, last_logits):
    members, steps = windows.shape[0], windows.shape[1] - 1
    for i in numba.prange((members + tile - 1) // tile):
        start = i * tile
        count = min(tile, members - start)
        keys = np.zeros((spec[0], count, steps, spec[1]), np.int8)
        values = np.zeros_like(keys)
        _tile(params, packed, panels, windows, start, count, prefixes, first_member, spec, perturbed, table, noise_at,
              vec_at, n_noise, n_vecs, rope, 0, keys, values, total, last_logits)


_pack_serial = numba.njit(cache=True)(pack_panels.py_func)  # one member's step: no threads to wake


@lru_cache(maxsize=8)
def _tables(spec_key):
    """The tensor table, buffer offsets and panel table of a spec (as a tuple), made once."""
    table = tensor_table(np.array(spec_key, np.int64))
    return (table, *offsets(table), *panel_table(table))


def _packed(params, panels, size, parallel=True):
    packed = np.empty(size, np.int8)
    (pack_panels if parallel else _pack_serial)(params, panels, packed)
    return packed


def run_epoch(params, windows, prefixes, first_member, spec, perturbed):
    """(each member's summed (log-likelihood, proxy loss), each member's logits at the last position)."""
    spec = np.ascontiguousarray(spec, np.int64)
    params = np.ascontiguousarray(params, np.int8)
    table, noise_at, vec_at, n_noise, n_vecs, panels, size = _tables(tuple(spec.tolist()))
    windows = np.ascontiguousarray(windows, np.int32)
    members = windows.shape[0]
    total = np.zeros((members, 2), np.int64)
    last_logits = np.zeros((members, int(spec[3])), np.int64)
    packed = _packed(params, panels, size)
    rope = cached_rope_table(windows.shape[1] - 1, int(spec[2]))
    _epoch(params, packed, panels, windows, np.ascontiguousarray(prefixes, np.int64), int(first_member), spec,
           bool(perturbed), table, noise_at, vec_at, n_noise, n_vecs, rope, tile_size(members), total, last_logits)
    return total, last_logits


def run_decode(params, tokens, keys, values, position, spec):
    """transformer_decode: one unperturbed member through `tokens` with the caller's int8 KV cache."""
    if not (keys.dtype == values.dtype == np.int8 and keys.flags.c_contiguous and values.flags.c_contiguous):
        raise ValueError("transformer_decode updates the KV cache in place: it must be C-contiguous int8")
    spec = np.ascontiguousarray(spec, np.int64)
    params = np.ascontiguousarray(params, np.int8)
    table, noise_at, vec_at, n_noise, n_vecs, panels, size = _tables(tuple(spec.tolist()))
    n_layer, positions, dim = keys.shape
    window = np.append(np.asarray(tokens, np.int32), np.int32(0))[None, :]
    total = np.zeros((1, 2), np.int64)
    logits = np.zeros((1, int(spec[3])), np.int64)
    packed = _packed(params, panels, size, parallel=False)
    _tile(params, packed, panels, window, 0, 1, np.zeros(len(table), np.int64), 0, spec, False, table, noise_at,
          vec_at, n_noise, n_vecs, cached_rope_table(positions, int(spec[2])), int(position),
          keys.reshape(n_layer, 1, positions, dim), values.reshape(n_layer, 1, positions, dim), total, logits)
    return logits[0]
