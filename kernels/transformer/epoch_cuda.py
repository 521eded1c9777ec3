"""transformer_epoch on the GPU: a block carries ROWS = 128 (member, position) rows, the whole windows
of ROWS // T members, through every layer with no grid-wide synchronisation, and runs every population
matmul (Q, K, V, O, each MLP's up and down, the tied head) on int8 tensor cores (mma m16n8k32, `mma`):
the rows are the mma M dimension. Teacher forcing makes a window's positions independent but for the
causal attention, which stays inside the block: a member's K and V of the current layer sit in shared
memory beside its queries, so no KV cache reaches global memory (reading one per token from HBM would
move 66 KB a member-token at d-eggs' sizes: a tiling by member and token would be HBM-bound).

More in docs/internals.md (kernels/transformer/epoch_cuda.py)."""

import math

import numba
import numpy as np

from eggnog.kernels.core.cuda_api import (
    BOOL,
    I8_1D,
    I8_2D,
    I32_1D,
    I64,
    I64_1D,
    I64_2D,
    allow_dynamic_shared,
    cuda,
    device_function,
    kernel,
    require,
)
from eggnog.kernels.core.cuda_fast_math import reciprocal_approx
from eggnog.kernels.core.int_simd import abs_sum4, byte_of, dp4a, opaque, pack4, sar32
from eggnog.kernels.core.loads import load_global_v4, load_shared_v4
from eggnog.kernels.core.mma import mma_s8_16832
from eggnog.kernels.egg.int_math import EXP2, FIXED_POINT
from eggnog.kernels.egg.member_ops import gpu_floor_log2_x16
from eggnog.kernels.noise.streams import gpu_member_key_a, gpu_member_key_b, gpu_member_noise
from eggnog.kernels.transformer import layout as ids  # the tensor ids and MAX_UNIT
from eggnog.kernels.transformer.layout import offsets, tensor_table
from eggnog.kernels.transformer.tables import EXP_LUT, GELU_LUT, ROPE_SCALE_BIT, SOFTMAX_SCALE_BIT, rope_table

ROWS = 128  # (member, position) rows of a block: 8 mma m-tiles
THREADS = 512
WARPS = THREADS // 32
SWEEP = 16 * WARPS  # output columns of one sweep: two 8-wide n-tiles a warp
K_STEP = 64  # bytes of K a sweep step takes: the weights' K padding
MAX_DIM = SWEEP  # a row's outputs of one product stay in registers until its maximum is known
MAX_VOCAB = 1 << 16  # the head's split sums (below) stay below 2^31
I32_2D = numba.int32[:, ::1]
PARAM_AT, D_IN, D_OUT, NOISE_AT, VEC_AT, W_AT = range(6)  # columns of Plan.tensors, one row a tensor id
INT_MIN = -(1 << 31)
LOW31 = (1 << 31) - 1
EXP_LAST = EXP_LUT.size - 1
LUTS = np.concatenate([EXP_LUT, EXP2, GELU_LUT]).astype(np.int32)  # EXP2[255] < 2^21

# int32 scratch at the start of shared memory (constant addresses): per-thread partial sums (4 a row),
# the rows' x . B of the next products (DOTA..DOTC), row maxima, attention maxima, row facts (token,
# target, pair, sign, member, position), tables, the head's per-row sums split at bit 16 (low, high:
# exact with 32-bit atomics), per-row results, RoPE pairs, the block's row count
PART = 0
DOTA, DOTB, DOTC = THREADS, THREADS + ROWS, THREADS + 2 * ROWS
RM = THREADS + 3 * ROWS  # 4 x ROWS
AM = RM + 4 * ROWS  # 2 x ROWS
TOK, TGT, PAIR, SIGN, MEMB, POS = (AM + 2 * ROWS + ROWS * i for i in range(6))
LUT = POS + ROWS
EXP2T = LUT + 256
GELU = EXP2T + 256
SUM2, SUMLUT = GELU + 256, GELU + 256 + 2 * ROWS  # 2 x ROWS each
ROW_LL, ROW_PROXY = SUMLUT + 2 * ROWS, SUMLUT + 3 * ROWS
ROPE_PAIR = ROW_PROXY + ROWS  # MAX_DIM: each column's RoPE pair in its head, (col % head_dim) // 2
HROW = ROPE_PAIR + MAX_DIM  # each row's pair row in the head's staged noise, (pair - the block's first) SWEEP
N_VALID = HROW + ROWS  # the block's rows that hold a member's position (read where needed)
HEAD_W = N_VALID + 2  # the head's first weight word (a shared load per sweep, not a global one; not beside
# N_VALID, which the compiler would then load with it, early)
SCRATCH_BYTES = -(-4 * (HEAD_W + 1) // 128) * 128  # X, H and U start on a 128-byte boundary
# the byte buffers, laid out for dim MAX_DIM whatever the width (constant addresses; K extents vary); 210 KB
# in all of the 227 KB a block may take on sm_90
X_OFF, X_PITCH = SCRATCH_BYTES, MAX_DIM + 8  # 8 bytes past a multiple of 64: 2 banks a row
H_OFF, H_PAIR = X_OFF + ROWS * X_PITCH, 2 * MAX_DIM
U_OFF, U_PAIR = H_OFF + ROWS * MAX_DIM, 8 * MAX_DIM
# U during attention: Q and K row-major (pitch 8 bytes past a multiple of 32: 2 banks a row), V transposed
# (a feature's keys, pitch one word past a multiple of 128 bytes), the softmax indices row-major
QK_PITCH, VT_PITCH, IDX_PITCH = MAX_DIM + 8, ROWS + 4, ROWS + 16
Q_AT = U_OFF
K_AT = Q_AT + ROWS * QK_PITCH
VT_AT = K_AT + ROWS * QK_PITCH
IDX_AT = VT_AT + (MAX_DIM + 32) * VT_PITCH  # V^T rows past dim: a thread's features past its head
Q_DST, K_DST, V_DST = 0, 1, 2  # _store_pair's destinations in U (X where negative)
U_BYTES = ROWS * 4 * MAX_DIM
SHARED_BYTES = U_OFF + U_BYTES
HEAD_BUFFER = (ROWS // 2 + 1) * SWEEP  # the head's staged noise: a sweep's columns of up to 65 pairs
# where the head's accumulators of the padded columns (vocab..vp-1: zero weights, zero noise) start: below
# every logit's numerator (|x E| + |rank-1| < 2^22 + 2^29), so that such a column never raises a row's
# maximum and adds exactly EXP2[clip(l) + 128] and EXP_LUT[min(max - l, 255)], l = HEAD_PAD >> s_logit,
# to its sums, which the rows' results take off again (no test per logit)
HEAD_PAD = -(1 << 30)
# bytes past the end of the noise and vector scratch: loads of a row's last columns may read a sweep's
# columns past it (whose values go unused), with no clamp per load
SLACK = 64
LN_RECIP_SHIFT = 31  # the norm's floor(a / m) = (a ((2^31 // m) + 1)) >> 31: exact for a < 2^21, m <= 127
assert 2 * HEAD_BUFFER <= U_BYTES
assert IDX_AT + ROWS * IDX_PITCH <= SHARED_BYTES


def _round_up(n, unit):
    return -(-n // unit) * unit


class Plan:
    """Host-side sizes of one (spec, T): each tensor's offsets (`tensors`: in the parameters, a pair's
    noise row, a member's vectors, the padded weights), the padding segments and the kernel's scalars."""

    def __init__(self, spec, steps):
        spec = np.ascontiguousarray(spec, np.int64)
        n_layer, dim, head_dim, vocab = (int(v) for v in spec[:4])
        table = tensor_table(spec)
        _, vec_at, _, n_vecs = offsets(table)
        self.n_vecs = int(n_vecs)  # sizes are Python ints: the real target refuses a NumPy integer as a shape
        noise_at, w_at = np.zeros(len(table), np.int64), np.zeros(len(table), np.int64)
        segments, noise, words = [], 0, 0
        for tid, (at, d_in, d_out) in enumerate(table):
            if d_out == 0:
                continue
            noise_at[tid], noise = noise, noise + d_in + d_out
            rows, kp = _round_up(d_out, 16), _round_up(d_in, K_STEP)
            w_at[tid] = words
            segments.append((at, d_in, d_out, words, kp // 4, rows))
            words += rows * kp // 4
        self.noise_len, self.w_words = int(noise), int(words)
        self.segments = np.array(segments, np.int64)  # (src offset, d_in, d_out, word offset, words a row, rows)
        self.tensors = np.ascontiguousarray(np.column_stack([table, noise_at, vec_at, w_at]))
        self.per_block = ROWS // max(steps, 1)
        self.scalars = [n_layer, dim, head_dim, vocab, *spec[4:10].tolist(), FIXED_POINT + int(spec[10]),
                        int(spec[11]), int(spec[12]), self.per_block, steps, noise, self.n_vecs, _round_up(vocab, 16),
                        dim // head_dim, _round_up(dim, K_STEP) // 4, _round_up(4 * dim, K_STEP) // 4]


# ---- small device functions ---------------------------------------------------------------------

@device_function
def _clip(v):
    return min(max(v, -ids.MAX_UNIT), ids.MAX_UNIT)


@device_function
def _frag_at(row, col, pair):
    """Byte offset of (row, col) in a fragment buffer of `pair` bytes a pair row (module docstring):
    rows r and r + 8 of an m-tile share a pair row, 32-bit words alternating, 16-byte chunk c at c ^ (r & 7)."""
    g = row & 7
    return ((((row >> 4) << 3) + g) * pair + ((((col >> 3) ^ g) << 4) | ((col & 4) << 1) | (((row >> 3) & 1) << 2)
                                              | (col & 3)))


@device_function
def _quad(sh32, slot, r):
    """The sum of row r's four partials at slot + 4r (one LDS.128)."""
    a, b, c, d = load_shared_v4(sh32, slot + 4 * r)
    return np.int32(a + b + c + d)


@device_function
def _fact(sh32, slot, r):
    """A row fact that is an index (token, pair, member, position): non-negative, which the mask tells
    the compiler (no negative-index wraparound where it is used)."""
    return sh32[slot + r] & LOW31


@device_function
def _offset(tensors, t, which):
    """An entry of Plan.tensors, non-negative (as _fact)."""
    return tensors[t, which] & LOW31


@device_function
def _noise(tensors, t):
    return tensors[t, NOISE_AT] & LOW31


@device_function
def _vec(tensors, t):
    return tensors[t, VEC_AT] & LOW31


@device_function
def _w(tensors, t):
    return tensors[t, W_AT] & LOW31


@device_function
def _floor_div(n, d, q):
    """floor(n / d) for d > 0, from q ~ |n| / d off by at most one (an fp32 reciprocal's estimate):
    the remainder |n| - q d corrects it, then the sign of n rounds it down."""
    rest = abs(n) - np.int64(q) * d
    if rest < 0:
        q -= 1
        rest += d
    elif rest >= d:
        q += 1
        rest -= d
    if n >= 0:
        return q
    return -q - (1 if rest > 0 else 0)


@device_function
def _rescaled(y, top, scale):
    """floor(y * 127 / top) for |y| <= top < 2^28 (0 where top == 0), scale ~ 127 / top in fp32; the
    remainder 127 |y| - q top needs 64 bits."""
    if top == 0:
        return np.int32(0)
    return _floor_div(np.int64(y) * ids.MAX_UNIT, top, np.int32(np.float32(abs(np.int32(y))) * scale))


@device_function
def _weighted_mean(acc, norm, rcp):
    """floor(acc / norm) for |acc| <= 127 norm (a weighted mean of int8 values), rcp ~ 1 / norm in fp32."""
    return _floor_div(np.int64(acc), norm, np.int32(np.float32(abs(acc)) * rcp))


# ---- the int8 tensor-core sweep: 128 rows x 16 columns a warp -----------------------------------------

@device_function
def _mt_step(sh32, p, off0, off1, wa, wb, c):
    """One 64-byte step of K for one m-tile (its pair rows from word p) and the warp's two n-tiles:
    c = (n-tile a: c0..c3, n-tile b: c0..c3). Each LDS.128 is one A fragment (a0..a3)."""
    a0, a1, a2, a3 = load_shared_v4(sh32, p + off0)
    x0, x1, x2, x3 = mma_s8_16832(a0, a1, a2, a3, wa[0], wa[1], c[0], c[1], c[2], c[3])
    y0, y1, y2, y3 = mma_s8_16832(a0, a1, a2, a3, wb[0], wb[1], c[4], c[5], c[6], c[7])
    a0, a1, a2, a3 = load_shared_v4(sh32, p + off1)
    x0, x1, x2, x3 = mma_s8_16832(a0, a1, a2, a3, wa[2], wa[3], x0, x1, x2, x3)
    y0, y1, y2, y3 = mma_s8_16832(a0, a1, a2, a3, wb[2], wb[3], y0, y1, y2, y3)
    return x0, x1, x2, x3, y0, y1, y2, y3


@device_function
def _sweep_lane(a_word, pair_words, w_word, kw, n0, lane):
    """A lane's fragment offsets, first pair-row word, m-tile stride, K steps and first weight word."""
    g = lane >> 2
    q = lane & 3
    steps = kw >> 4
    return (4 * ((2 * q) ^ g), 4 * ((2 * q + 1) ^ g), a_word + g * pair_words, 8 * pair_words, steps,
            w_word + (n0 >> 4) * steps * 256 + 4 * lane)


@device_function
def _sweep(sh32, a_word, pair_words, w32, w_word, kw, n0, lane, start):
    """The 128 x 16 int32 product of a fragment buffer (from word a_word, pair_words a pair row) with
    weight rows n0..n0+15 of a matrix of kw words a row stored from word w_word in fragment order
    (`pad_weights_cuda`): per m-tile, 8 values (_mt_step). In each 64-byte step of K lane q takes
    bytes 16q..16q+15 of its weight rows g and g + 8 (b0, b1 of two k32 steps each: two LDG.128 from
    one pointer) and the pair-row chunks 2q, 2q + 1 (rows g and g + 8, bytes 16q..16q+7 and
    16q+8..16q+15): the same permutation of K for both operands. Each m-tile's accumulators start at
    `start` (8 values, one m-tile's layout)."""
    off0, off1, arow, tile, steps, first = _sweep_lane(a_word, pair_words, w_word, kw, n0, lane)
    weights = w32[first:]  # this lane's first 16 bytes
    c0 = c1 = c2 = c3 = c4 = c5 = c6 = c7 = start
    for step in range(np.int32(steps)):
        wa = load_global_v4(weights, 256 * step)
        wb = load_global_v4(weights, 256 * step + 128)
        p = arow + 32 * step
        c0 = _mt_step(sh32, p, off0, off1, wa, wb, c0)
        c1 = _mt_step(sh32, p + tile, off0, off1, wa, wb, c1)
        c2 = _mt_step(sh32, p + 2 * tile, off0, off1, wa, wb, c2)
        c3 = _mt_step(sh32, p + 3 * tile, off0, off1, wa, wb, c3)
        c4 = _mt_step(sh32, p + 4 * tile, off0, off1, wa, wb, c4)
        c5 = _mt_step(sh32, p + 5 * tile, off0, off1, wa, wb, c5)
        c6 = _mt_step(sh32, p + 6 * tile, off0, off1, wa, wb, c6)
        c7 = _mt_step(sh32, p + 7 * tile, off0, off1, wa, wb, c7)
    return c0, c1, c2, c3, c4, c5, c6, c7


@device_function
def _sweep4(sh32, a_word, pair_words, w32, w_word, kw, n0, lane):
    """_sweep over 64 rows (4 m-tiles from word a_word), two K steps' weights loaded before either's
    products (one global latency for the two)."""
    off0, off1, arow, tile, steps, first = _sweep_lane(a_word, pair_words, w_word, kw, n0, lane)
    weights = w32[first:]
    z = np.int32(0)
    c0 = c1 = c2 = c3 = (z, z, z, z, z, z, z, z)
    for step in range(np.int32(0), np.int32(steps), np.int32(2)):  # two steps' weights loaded at once
        wa = load_global_v4(weights, 256 * step)
        wb = load_global_v4(weights, 256 * step + 128)
        more = step + 1 < steps
        wc = wd = (z, z, z, z)
        if more:
            wc = load_global_v4(weights, 256 * step + 256)
            wd = load_global_v4(weights, 256 * step + 384)
        p = arow + 32 * step
        c0 = _mt_step(sh32, p, off0, off1, wa, wb, c0)
        c1 = _mt_step(sh32, p + tile, off0, off1, wa, wb, c1)
        c2 = _mt_step(sh32, p + 2 * tile, off0, off1, wa, wb, c2)
        c3 = _mt_step(sh32, p + 3 * tile, off0, off1, wa, wb, c3)
        if more:
            p += 32
            c0 = _mt_step(sh32, p, off0, off1, wc, wd, c0)
            c1 = _mt_step(sh32, p + tile, off0, off1, wc, wd, c1)
            c2 = _mt_step(sh32, p + 2 * tile, off0, off1, wc, wd, c2)
            c3 = _mt_step(sh32, p + 3 * tile, off0, off1, wc, wd, c3)
    return c0, c1, c2, c3


# ---- epilogues: what a sweep does with its accumulators ------------------------------------------------

@device_function
def _pair_loads(r, col, sh32, pert, stage):
    """The global values columns col, col + 1 of row r may need: A noise of the rank-1 term, the RoPE
    cosine and sine, the bias. Loaded from valid addresses whether used or not (col clamped inside the
    row, index 0 of an unused array), each pinned where it is loaded (`opaque`): no branch or use lets
    the compiler sink a load towards its use, so a tile's loads share one global latency."""
    dot_slot, seg, shift, rope, half, rotate, bias_at, residual, dim = stage
    c = min(col, dim - 2)
    on = np.int32(pert[5])  # noise8 holds one byte when unperturbed
    at = (_fact(sh32, PAIR, r) * pert[2] + seg + c) * on
    ra = 2 * (_fact(sh32, POS, r) * half + _fact(sh32, ROPE_PAIR, c))  # inside the table whatever `rotate`
    vb = _fact(sh32, MEMB, r) * pert[3] + bias_at + c if bias_at >= 0 else 0
    return (opaque(np.int32(pert[0][at])), opaque(np.int32(pert[0][at + on])), opaque(np.int32(rope[ra])),
            opaque(np.int32(rope[ra + 1])), opaque(np.int32(pert[1][vb])),
            opaque(np.int32(pert[1][vb + (1 if bias_at >= 0 else 0)])))


@device_function
def _pair_values(acc0, acc1, r, col, sh8, sh32, pert, stage, loaded):
    """Columns col, col + 1 of row r before the rescale: (acc + rank-1) >> shift, then RoPE (the
    columns' pair in their head), the bias and the residual, as the stage asks; 0 past dim."""
    dot_slot, seg, shift, rope, half, rotate, bias_at, residual, dim = stage
    n0, n1, c32, s32, v0, v1 = loaded
    if col >= dim:
        return np.int32(0), np.int32(0)
    a = np.int32(acc0)
    b = np.int32(acc1)
    if pert[5]:
        dot = np.int32(sh32[dot_slot + r] * sh32[SIGN + r])  # |x . B| A < 2^29: 32 bits (module docstring)
        a += sar32(np.int32(dot * n0), pert[4])
        b += sar32(np.int32(dot * n1), pert[4])
    a = sar32(a, shift)
    b = sar32(b, shift)
    if rotate:
        c = np.int64(c32)
        s = np.int64(s32)
        a, b = np.int32((a * c - b * s) >> ROPE_SCALE_BIT), np.int32((a * s + b * c) >> ROPE_SCALE_BIT)
    if bias_at >= 0:
        a += v0
        b += v1
    if residual:
        x = X_OFF + r * X_PITCH + col
        a += sh8[x]
        b += sh8[x + 1]
    return np.int32(a), np.int32(b)


@device_function
def _values_tile(t, ra, col, sh8, sh32, pert, stage, rm_slot):
    """An m-tile's 8 values (rows ra, ra + 8), with each row's max |y| into rm_slot; the global loads of
    all four pairs first (one latency for the tile)."""
    rb = ra + 8
    la = _pair_loads(ra, col, sh32, pert, stage)
    lb = _pair_loads(rb, col, sh32, pert, stage)
    lc = _pair_loads(ra, col + 8, sh32, pert, stage)
    ld = _pair_loads(rb, col + 8, sh32, pert, stage)
    y0, y1 = _pair_values(t[0], t[1], ra, col, sh8, sh32, pert, stage, la)
    y2, y3 = _pair_values(t[2], t[3], rb, col, sh8, sh32, pert, stage, lb)
    y4, y5 = _pair_values(t[4], t[5], ra, col + 8, sh8, sh32, pert, stage, lc)
    y6, y7 = _pair_values(t[6], t[7], rb, col + 8, sh8, sh32, pert, stage, ld)
    cuda.atomic.max(sh32, rm_slot + ra, max(max(abs(y0), abs(y1)), max(abs(y4), abs(y5))))
    cuda.atomic.max(sh32, rm_slot + rb, max(max(abs(y2), abs(y3)), max(abs(y6), abs(y7))))
    return y0, y1, y2, y3, y4, y5, y6, y7


@device_function
def _store_pair(y0, y1, r, col, top, scale, sh8, dst_col, dim, n_valid):
    """Rescaled into U as Q, K (rows) or V (transposed), or into X where dst_col < 0."""
    if col < dim and r < n_valid:
        base, row_step, col_step = X_OFF, X_PITCH, 1
        if dst_col == V_DST:
            base, row_step, col_step = VT_AT, 1, VT_PITCH
        elif dst_col >= 0:
            base, row_step = (Q_AT if dst_col == Q_DST else K_AT), QK_PITCH
        at = base + r * row_step + col * col_step
        sh8[at] = _rescaled(y0, top, scale)
        sh8[at + col_step] = _rescaled(y1, top, scale)


@device_function
def _store_tile(y, ra, col, sh8, sh32, rm_slot, dst_col, dim):
    """An m-tile's values rescaled to max 127 by their rows' maxima, as int8."""
    rb = ra + 8
    n_valid = sh32[N_VALID]
    top_a, top_b = sh32[rm_slot + ra], sh32[rm_slot + rb]
    scale_a = np.float32(ids.MAX_UNIT) * reciprocal_approx(np.float32(max(top_a, 1)))
    scale_b = np.float32(ids.MAX_UNIT) * reciprocal_approx(np.float32(max(top_b, 1)))
    _store_pair(y[0], y[1], ra, col, top_a, scale_a, sh8, dst_col, dim, n_valid)
    _store_pair(y[2], y[3], rb, col, top_b, scale_b, sh8, dst_col, dim, n_valid)
    _store_pair(y[4], y[5], ra, col + 8, top_a, scale_a, sh8, dst_col, dim, n_valid)
    _store_pair(y[6], y[7], rb, col + 8, top_b, scale_b, sh8, dst_col, dim, n_valid)


@device_function
def _rescaled_stage(sh8, sh32, w32, pert, a, w, lane, warp, stage, rm_slot, dst_col):
    """A product with dim outputs whose rows are rescaled to max 127 (Q, K, V, O, MLP down): the sweep,
    the values kept in registers, the row maxima (a barrier), then the int8 stores. a = (a_word,
    pair_words) of the input, w = (w_word, kw) of the weight; stage = (the x . B slot, the word of A in a
    pair's noise row, the shift, the RoPE table, head_dim // 2, whether to rotate, the bias vector's
    offset or -1, whether to add the residual, dim)."""
    a_word, pair_words = a
    w_word, kw = w
    dim = stage[8]
    hide = sh32[N_VALID] >> 31  # 0 (N_VALID >= 0): what derives from the lane is computed here, not
    # hoisted out of the layers by the compiler to hold registers through every product
    n0 = np.int32(16 * warp) | hide
    g = np.int32(lane >> 2) | hide
    col = n0 + np.int32(2 * (lane & 3))
    z = np.int32(0)
    zeros = (z, z, z, z, z, z, z, z)
    tile = 8 * pair_words
    for half in range(2):  # rows 0..63, then 64..127: 32 values a thread wait for the barrier, not 64
        y = (zeros, zeros, zeros, zeros)
        ra = g + 64 * half
        if n0 < dim:
            c = _sweep4(sh32, a_word + 4 * tile * half, pair_words, w32, w_word, kw, n0, lane)
            y = (_values_tile(c[0], ra, col, sh8, sh32, pert, stage, rm_slot),
                 _values_tile(c[1], ra + 16, col, sh8, sh32, pert, stage, rm_slot),
                 _values_tile(c[2], ra + 32, col, sh8, sh32, pert, stage, rm_slot),
                 _values_tile(c[3], ra + 48, col, sh8, sh32, pert, stage, rm_slot))
        cuda.syncthreads()
        if n0 < dim:
            _store_tile(y[0], ra, col, sh8, sh32, rm_slot, dst_col, dim)
            _store_tile(y[1], ra + 16, col, sh8, sh32, rm_slot, dst_col, dim)
            _store_tile(y[2], ra + 32, col, sh8, sh32, rm_slot, dst_col, dim)
            _store_tile(y[3], ra + 48, col, sh8, sh32, rm_slot, dst_col, dim)


@device_function
def _u(i):
    """A 32-bit offset as a non-negative 64-bit index: no wraparound code, and constants added to it fold
    into the address."""
    return np.int64(np.uint32(i))


@device_function
def _gelu_loads(r, sh32, pert, at):
    """Row r's global values for the thread's columns col, col + 1, col + 8, col + 9 of the MLP up (bias, A
    of the up, B of the down; at = their offsets at col in a member's vectors and a pair's noise row).
    Read whether used or not (past the row, the scratch's slack: SLACK) and each value pinned (as
    _pair_loads)."""
    noise8, vecs, noise_len, n_vecs, m_shift, perturbed = pert
    bias_col, up_col, down_col = at
    vb = _u(np.int32(sh32[MEMB + r] * np.int32(n_vecs)) + bias_col)
    bias = (opaque(np.int32(vecs[vb])), opaque(np.int32(vecs[vb + 1])), opaque(np.int32(vecs[vb + 8])),
            opaque(np.int32(vecs[vb + 9])))
    z = np.int32(0)
    n = d = (z, z, z, z)
    if perturbed:
        row = np.int32(sh32[PAIR + r] * np.int32(noise_len))
        na = _u(row + up_col)
        nd = _u(row + down_col)
        n = (opaque(np.int32(noise8[na])), opaque(np.int32(noise8[na + 1])), opaque(np.int32(noise8[na + 8])),
             opaque(np.int32(noise8[na + 9])))
        d = (opaque(np.int32(noise8[nd])), opaque(np.int32(noise8[nd + 1])), opaque(np.int32(noise8[nd + 8])),
             opaque(np.int32(noise8[nd + 9])))
    return bias, n, d


@device_function
def _gelu_row(a0, a1, a2, a3, r, at, sh8, sh32, pert, s_up, inside, loaded):
    """MLP up: GELU_LUT[clip((acc + rank-1 + bias) >> shift)] of columns col, col + 1 (a0, a1) and col + 8,
    col + 9 (a2, a3) of row r into U (at: their fragment offsets, _frag_at) from the row's loaded values;
    returns their share of the MLP down's x . B (inside: whether col + 8 < hidden)."""
    perturbed = pert[5]
    bias, n, d = loaded
    dot = np.int32(sh32[DOTA + r] * sh32[SIGN + r])  # 0 when unperturbed
    m_shift = pert[4]
    u0 = _gelu(sh32, a0, n[0], bias[0], dot, m_shift, s_up, perturbed)
    u1 = _gelu(sh32, a1, n[1], bias[1], dot, m_shift, s_up, perturbed)
    u2 = _gelu(sh32, a2, n[2], bias[2], dot, m_shift, s_up, perturbed)
    u3 = _gelu(sh32, a3, n[3], bias[3], dot, m_shift, s_up, perturbed)
    lo, hi, store_lo = at
    if store_lo:
        sh8[lo] = u0
        sh8[lo + 1] = u1
    if inside:
        sh8[hi] = u2
        sh8[hi + 1] = u3
    if not perturbed:
        return np.int32(0)
    return np.int32(np.int32(u0 * d[0] + u1 * d[1]) + (np.int32(u2 * d[2] + u3 * d[3]) if inside else np.int32(0)))


@device_function
def _gelu(sh32, acc, noise, bias, dot, m_shift, s_up, perturbed):
    a = np.int32(acc)
    if perturbed:
        a = np.int32(a + sar32(np.int32(dot * noise), m_shift))
    return sh32[GELU + _u(min(max(sar32(np.int32(a + bias), s_up), np.int32(-ids.MAX_UNIT)),
                              np.int32(ids.MAX_UNIT)) + 128)]


@device_function
def _gelu_tile(t, g, rc, col_at, sh8, sh32, pert, up, frag, edge):
    """Rows g + rc and g + rc + 8 (rc a multiple of 16): both rows' loads first (one global latency for
    the tile)."""
    ra = _u(g) + rc
    rb = ra + 8
    la = _gelu_loads(ra, sh32, pert, col_at)
    lb = _gelu_loads(rb, sh32, pert, col_at)
    f_lo, f_hi = frag
    store_lo, inside = edge
    step = (rc >> 4) * 8 * U_PAIR  # _frag_at(r) - _frag_at(r & 7) = 8 pair (r >> 4) + 4 ((r >> 3) & 1)
    da = _gelu_row(t[0], t[1], t[4], t[5], ra, (f_lo + step, f_hi + step, store_lo), sh8, sh32, pert, up[2], inside,
                   la)
    db = _gelu_row(t[2], t[3], t[6], t[7], rb, (f_lo + step + 4, f_hi + step + 4, store_lo), sh8, sh32, pert, up[2],
                   inside, lb)
    if pert[5] and store_lo:
        cuda.atomic.add(sh32, DOTB + ra, da)
        cuda.atomic.add(sh32, DOTB + rb, db)


@device_function
def _up_sweep(sh8, sh32, w32, pert, w_word, kw, n0, lane, up):
    """One sweep of the MLP up from H into U, with its share of the down's x . B into DOTB: rows 0..63, then
    64..127 (32 accumulators a thread: registers for the epilogue's loads)."""
    seg, seg_down, s_up, bias_at, hidden = up
    for half in range(2):
        c = _sweep4(sh32, (H_OFF >> 2) + half * (32 * H_PAIR >> 2), H_PAIR >> 2, w32, w_word, kw, n0, lane)
        hide = np.int32(sh32[N_VALID] >> 31)  # 0: as in _rescaled_stage
        g = np.int32(np.int32(lane >> 2) | hide) & 7
        col = np.int32(np.int32(n0) + np.int32(2 * (lane & 3)) | hide) & LOW31
        col_at = (np.int32(bias_at + col), np.int32(seg + col), np.int32(seg_down + col))
        frag = (U_OFF + _u(_frag_at(g, col, U_PAIR)), U_OFF + _u(_frag_at(g, col + 8, U_PAIR)))
        edge = (col < hidden, col + 8 < hidden)
        rc = 64 * half
        _gelu_tile(c[0], g, rc, col_at, sh8, sh32, pert, up, frag, edge)
        _gelu_tile(c[1], g, rc + 16, col_at, sh8, sh32, pert, up, frag, edge)
        _gelu_tile(c[2], g, rc + 32, col_at, sh8, sh32, pert, up, frag, edge)
        _gelu_tile(c[3], g, rc + 48, col_at, sh8, sh32, pert, up, frag, edge)


@device_function
def _logit(acc, pert, s_logit):
    return sar32(np.int32(np.int32(acc) + np.int32(pert)), s_logit)


@device_function
def _split_add(sh32, slot, r, total):
    """total (below 2^23) into the row's sum kept as 16-bit halves at slot + r and slot + ROWS + r."""
    cuda.atomic.add(sh32, slot + r, total & 0xFFFF)
    cuda.atomic.add(sh32, slot + ROWS + r, total >> 16)


@device_function
def _head_noise(sh8, sh32, r, at):
    """The A noise of the thread's columns col, col + 1, col + 8, col + 9 in row r's pair row of the
    sweep's copy in U (_stage_head_noise; `at`: column col of the block's first pair there)."""
    at = np.uint32(at + sh32[HROW + r])  # unsigned: no wraparound code
    return (np.int32(sh8[at]), np.int32(sh8[np.uint32(at + 1)]), np.int32(sh8[np.uint32(at + 8)]),
            np.int32(sh8[np.uint32(at + 9)]))


@device_function
def _stage_head_noise(sh8, sh32, pert, seg, sweep, vocab, tid):
    """The head's A noise (the pair noise row from byte seg) of the sweep's columns for the block's pairs
    into U, pair p's at U_OFF + b HEAD_BUFFER + (p - p_lo) SWEEP, b = the sweep's parity (two buffers:
    the sweep before may still read the other), 0 past the vocabulary (HEAD_PAD): the epilogues then
    read shared memory, not one global latency per tile. No barrier."""
    noise8, noise_len = pert[0], pert[2]
    n_valid = sh32[N_VALID]
    tid = np.int32(tid) | np.int32(n_valid >> 31)  # n_valid >= 0: the loop's offsets are not hoisted out of
    # the sweeps to hold registers through them
    p_lo = _fact(sh32, PAIR, 0)
    total = (_fact(sh32, PAIR, n_valid - 1) - p_lo + 1) * SWEEP
    base = p_lo * noise_len + seg
    buffer = U_OFF + ((sweep >> 8) & 1) * HEAD_BUFFER
    for i in range(np.int32(tid), np.int32(total), np.int32(THREADS)):
        j = sweep + (i & 255)
        v = noise8[base + (i >> 8) * noise_len + min(j, vocab - 1)]
        sh8[buffer + i] = v if j < vocab else 0


@device_function
def _head_row(second, a0, a1, a2, a3, r, sh32, pert, s_logit, noise):
    """Columns col, col + 1, col + 8, col + 9 of row r's logits (their A noise given): pass 1 adds them to
    the row's maximum and EXP2 sum, pass 2 to its EXP_LUT sum; in 32 bits, no branch (columns past the
    vocabulary count as HEAD_PAD says). Returns the logits (pass 1 keeps the last position's)."""
    p0 = p1 = p2 = p3 = np.int32(0)
    if pert[5]:
        dot = sh32[DOTA + r]  # x . B times the sign, 32 bits: |x . B| A < 2^29 (module docstring)
        m_shift = pert[4]
        p0 = sar32(np.int32(dot * noise[0]), m_shift)
        p1 = sar32(np.int32(dot * noise[1]), m_shift)
        p2 = sar32(np.int32(dot * noise[2]), m_shift)
        p3 = sar32(np.int32(dot * noise[3]), m_shift)
    l0 = _logit(a0, p0, s_logit)
    l1 = _logit(a1, p1, s_logit)
    l2 = _logit(a2, p2, s_logit)
    l3 = _logit(a3, p3, s_logit)
    if second:
        top = sh32[RM + r]
        total = np.int32(np.int32(sh32[LUT + _lut_index(top, l0)] + sh32[LUT + _lut_index(top, l1)])
                         + np.int32(sh32[LUT + _lut_index(top, l2)] + sh32[LUT + _lut_index(top, l3)]))
        _split_add(sh32, SUMLUT, r, total)
    else:
        total = np.int32(np.int32(sh32[EXP2T + _exp2_index(l0)] + sh32[EXP2T + _exp2_index(l1)])
                         + np.int32(sh32[EXP2T + _exp2_index(l2)] + sh32[EXP2T + _exp2_index(l3)]))
        cuda.atomic.max(sh32, RM + r, np.int32(max(max(l0, l1), max(l2, l3))))
        _split_add(sh32, SUM2, r, total)
    return l0, l1, l2, l3


@device_function
def _exp2_index(logit):
    """clip(logit) + 128, 1..255 (unsigned: no wraparound code)."""
    return np.uint32(min(max(logit, np.int32(-ids.MAX_UNIT)), np.int32(ids.MAX_UNIT)) + 128)


@device_function
def _lut_index(top, logit):
    """min(top - logit, 255) for logit <= top."""
    return np.uint32(min(np.int32(top - logit), np.int32(EXP_LAST)))


@device_function
def _keep_logits(r, col, values, sh32, logits, vocab, last):
    """Pass 1: the last position's clipped logits of row r (columns col, col + 1, col + 8, col + 9)."""
    if r < sh32[N_VALID] and sh32[POS + r] == last:
        m = _fact(sh32, MEMB, r)
        if col < vocab:
            logits[m, col] = _clip(values[0])
        if col + 1 < vocab:
            logits[m, col + 1] = _clip(values[1])
        if col + 8 < vocab:
            logits[m, col + 8] = _clip(values[2])
        if col + 9 < vocab:
            logits[m, col + 9] = _clip(values[3])


@device_function
def _head_tile(second, t, ra, col, at, sh8, sh32, pert, head, logits):
    """Rows ra and ra + 8, their staged noise read first."""
    z = np.int32(0)
    na = nb = (z, z, z, z)
    if pert[5]:
        na = _head_noise(sh8, sh32, ra, at)
        nb = _head_noise(sh8, sh32, ra + 8, at)
    la = _head_row(second, t[0], t[1], t[4], t[5], ra, sh32, pert, head[1], na)
    lb = _head_row(second, t[2], t[3], t[6], t[7], ra + 8, sh32, pert, head[1], nb)
    if head[3] and not second:
        _keep_logits(ra, col, la, sh32, logits, head[2], head[4])
        _keep_logits(ra + 8, col, lb, sh32, logits, head[2], head[4])


@device_function
def _pad_start(left, k):
    """HEAD_PAD for a column k or more past the vocabulary's last (left: columns from this one on)."""
    return np.int32(HEAD_PAD if left <= k else 0)


@device_function
def _head_sweep(second, sh8, sh32, w32, pert, w_word, kw, sweep, vp, tid, head, logits):
    """One vocabulary sweep of the head from H (the warp's 16 columns from sweep + 16 warp, if below vp):
    pass 1 (second False) or pass 2 of `_head_row`. The accumulators of columns past the vocabulary start
    at HEAD_PAD."""
    hide = np.int32(sh32[N_VALID] >> 31)  # 0: as in _rescaled_stage
    tid = np.int32(np.int32(tid) | hide) & (THREADS - 1)
    lane = np.int32(tid & 31)
    n0 = np.int32(np.int32(sweep) + np.int32((tid >> 5) << 4))
    if n0 >= vp:
        return
    left = np.int32(head[2]) - np.int32(n0 + 2 * (lane & 3))  # the vocabulary's columns from the first
    e0, e1, e8, e9 = _pad_start(left, 0), _pad_start(left, 1), _pad_start(left, 8), _pad_start(left, 9)
    c = _sweep(sh32, H_OFF >> 2, H_PAIR >> 2, w32, w_word, kw, n0, lane, (e0, e1, e0, e1, e8, e9, e8, e9))
    late = sh32[HROW]  # 0 (row 0 holds the block's first pair), read after the products: what follows is
    # computed here, not held through them
    col = np.int32(np.int32(n0 + 2 * (lane & 3)) | late) & LOW31
    g = np.int32(lane >> 2) & 7
    at = U_OFF + ((col >> 8) & 1) * HEAD_BUFFER + (col & 255)  # column col of the block's first pair
    _head_tile(second, c[0], g, col, at, sh8, sh32, pert, head, logits)
    _head_tile(second, c[1], g + 16, col, at, sh8, sh32, pert, head, logits)
    _head_tile(second, c[2], g + 32, col, at, sh8, sh32, pert, head, logits)
    _head_tile(second, c[3], g + 48, col, at, sh8, sh32, pert, head, logits)
    _head_tile(second, c[4], g + 64, col, at, sh8, sh32, pert, head, logits)
    _head_tile(second, c[5], g + 80, col, at, sh8, sh32, pert, head, logits)
    _head_tile(second, c[6], g + 96, col, at, sh8, sh32, pert, head, logits)
    _head_tile(second, c[7], g + 112, col, at, sh8, sh32, pert, head, logits)


# ---- element-wise passes: four threads a row (lanes 4r..4r+3 of one warp) -----------------------------

@device_function
def _embed(params, sh8, sh32, pert, bias_at, emb_at, emb_seg, dim, tid):
    """X = clip(E[token] + bias + ((A[token] B) sign) >> shift); no barrier."""
    noise8, vecs, noise_len, n_vecs, m_shift, perturbed = pert
    r = tid >> 2
    if r >= sh32[N_VALID]:
        return
    tok = _fact(sh32, TOK, r)
    vb = _fact(sh32, MEMB, r) * n_vecs + bias_at
    nb = _fact(sh32, PAIR, r) * noise_len + emb_seg
    a = np.int32(noise8[nb + dim + tok]) * np.int32(sh32[SIGN + r]) if perturbed else np.int32(0)
    for j in range(np.int32(tid & 3), np.int32(dim), np.int32(4)):
        v = np.int32(params[emb_at + tok * dim + j]) + vecs[vb + j]
        if perturbed:
            v += (a * np.int32(noise8[nb + j])) >> m_shift
        sh8[X_OFF + r * X_PITCH + j] = _clip(v)


@device_function
def _pinned4(values, j):
    """values[j], [j + 4], [j + 8], [j + 12] as int32, each pinned where it is loaded (opaque)."""
    return (opaque(np.int32(values[j])), opaque(np.int32(values[j + 4])), opaque(np.int32(values[j + 8])),
            opaque(np.int32(values[j + 12])))


@device_function
def _ln_loads(params, pert, at, i):
    """The global values of the thread's elements j = sub + 16 i + 4 k (k = 0..3) for _ln, by k: the
    weights, the biases, the noise of up to three B rows and the target's embedding (at: their offsets at
    element sub of the row). Read whether used or not (past the row, the scratch's slack: SLACK) and
    pinned (as _pair_loads), so that the four elements' loads share one latency."""
    w_at, b_at, n1_at, n2_at, n3_at, t_at = at
    noise8, vecs, _, _, _, perturbed = pert
    step = np.int32(16 * i)
    w, b, t = _pinned4(vecs, _u(w_at + step)), _pinned4(vecs, _u(b_at + step)), _pinned4(params, _u(t_at + step))
    z = np.int32(0)
    zeros = (z, z, z, z)
    n1 = n2 = n3 = zeros
    if perturbed:
        n1 = _pinned4(noise8, _u(n1_at + step))
        n2 = _pinned4(noise8, _u(n2_at + step))
        n3 = _pinned4(noise8, _u(n3_at + step))
    return w, b, n1, n2, n3, t


@device_function
def _ln_out(sh8, x_at, h_at, k, loaded, m14, recip, segs, pert, d):
    """Element k of the four loaded (x at byte x_at of X) into H at byte h_at, with its terms of the row's
    dot products d: clip(floor(x w / mean) + b), the quotient as the high bits of a product with the
    reciprocal (LN_RECIP_SHIFT), offset by 2^14 mean to make the dividend non-negative."""
    w, b, n1, n2, n3, t = loaded
    seg2, seg3, target_at = segs
    d1, d2, d3 = d
    x = np.int32(sh8[x_at])
    a = np.uint32(np.int32(x * w[k]) + m14)  # |x w| <= 127 128 < 2^14
    q = np.int32((np.uint64(a) * np.uint64(recip)) >> np.uint64(LN_RECIP_SHIFT))
    h = min(max(np.int32(q + np.int32(b[k] - (1 << 14))), np.int32(-ids.MAX_UNIT)), np.int32(ids.MAX_UNIT))
    sh8[h_at] = h
    if pert[5]:
        d1 = np.int32(d1 + h * n1[k])
        if seg2 >= 0:
            d2 = np.int32(d2 + h * n2[k])
        if seg3 >= 0:
            d3 = np.int32(d3 + h * n3[k])
    if target_at >= 0:
        d2 = np.int32(d2 + h * t[k])
    return d1, d2, d3


@device_function
def _ln(params, sh8, sh32, pert, w_at, seg1, seg2, seg3, target_at, dim, tid):
    """H = clip(x w // max(sum |x| // dim, 1) + b), with each row's dot products of H with the B noise
    rows seg1..seg3 (and with the target's embedding row when target_at >= 0) in DOTA..DOTC, its four
    threads' shares added by atomics; two barriers."""
    noise8, vecs, noise_len, n_vecs, _, perturbed = pert
    n_valid = sh32[N_VALID]
    r = tid >> 2
    valid = r < n_valid
    sub = np.int32(tid & 3)
    acc = np.int32(0)
    if valid:  # words w = sub (mod 4) of the row: |x| of four bytes by one dp4a, the bytes past dim masked
        x_word = np.int32((X_OFF + r * X_PITCH) >> 2)
        full = np.int32(dim) >> 2  # whole words; then one of dim % 4 bytes
        tail = np.int32((np.int64(1) << (8 * (np.int32(dim) & 3))) - 1)
        for i in range(MAX_DIM // 16):  # a constant trip count (the row's own would be a loop whose trip
            # count the static model loses between layers); words past the row read as 0
            w = sub + 4 * i
            word = sh32[x_word + w]
            acc = abs_sum4(word if w < full else (word & tail if w == full else np.int32(0)), acc)
    sh32[PART + tid] = acc
    if tid < 3 * ROWS:
        sh32[DOTA + tid] = 0  # DOTA, DOTB and DOTC
    cuda.syncthreads()
    d = (np.int32(0), np.int32(0), np.int32(0))
    if valid:
        mean = np.int32(max(_quad(sh32, PART, r) // np.int32(dim), 1))  # 1..127
        recip = np.uint32(np.uint32(1 << LN_RECIP_SHIFT) // np.uint32(mean) + np.uint32(1))
        m14 = np.int32(mean << 14)
        pair_row = np.int32(sh32[PAIR + r] * np.int32(noise_len)) + sub
        w_el = np.int32(sh32[MEMB + r] * np.int32(n_vecs)) + np.int32(w_at) + sub
        at = (w_el, np.int32(w_el + dim), np.int32(pair_row + seg1), np.int32(pair_row + (seg2 if seg2 >= 0 else seg1)),
              np.int32(pair_row + (seg3 if seg3 >= 0 else seg1)),
              np.int32((target_at + sh32[TGT + r] * dim if target_at >= 0 else 0) + sub))
        segs = (seg2, seg3, target_at)
        g = np.int32(r & 7)
        x_row = _u(X_OFF + r * X_PITCH + sub)
        h_row = _u(H_OFF + _frag_at(r, sub, H_PAIR) - (g << 4))  # _frag_at(r, j) less its chunk's offset
        for i in range(np.int32((dim + 15) >> 4)):  # four elements at a time, their loads first
            la = _ln_loads(params, pert, at, i)
            j = sub + 16 * i
            xi = x_row + 16 * i
            c = _u(((2 * i) ^ g) << 4)  # elements j, j + 4 in chunk 2i ^ g, j + 8, j + 12 in the next (^ 1)
            if j < dim:
                d = _ln_out(sh8, xi, h_row + c, 0, la, m14, recip, segs, pert, d)
            if j + 4 < dim:
                d = _ln_out(sh8, xi + 4, h_row + c + 8, 1, la, m14, recip, segs, pert, d)
            if j + 8 < dim:
                d = _ln_out(sh8, xi + 8, h_row + (c ^ 16), 2, la, m14, recip, segs, pert, d)
            if j + 12 < dim:
                d = _ln_out(sh8, xi + 12, h_row + (c ^ 16) + 8, 3, la, m14, recip, segs, pert, d)
    if valid:
        cuda.atomic.add(sh32, DOTA + r, d[0])
        cuda.atomic.add(sh32, DOTB + r, d[1])
        cuda.atomic.add(sh32, DOTC + r, d[2])
    cuda.syncthreads()


@device_function
def _head_mask(w, h0, hd):
    """The bytes of word w of a row (columns 4w..4w+3) that lie in the head [h0, h0 + hd)."""
    lo = max(h0 - 4 * w, 0)
    hi = min(h0 + hd - 4 * w, 4)
    return np.int32(((np.int64(1) << (8 * hi)) - (np.int64(1) << (8 * lo))) & 0xFFFFFFFF)


@device_function
def _scores4(sh32, q_word, key, w_lo, w_hi, mask_lo, mask_hi):
    """q . k over one head for the keys key..key+3 (rows of K): words w_lo..w_hi-1 of the rows, the
    head's bytes of the first and last word selected by the masks (hd need not be a multiple of 4)."""
    s0 = s1 = s2 = s3 = np.int32(0)
    k_word = np.int32((K_AT + key * QK_PITCH) >> 2)
    step = QK_PITCH >> 2
    for w in range(np.int32(w_lo), np.int32(w_hi)):
        q = sh32[q_word + w]
        if w == w_lo:
            q &= mask_lo
        if w == w_hi - 1:
            q &= mask_hi
        k = k_word + w
        s0 = dp4a(q, sh32[k], s0)
        s1 = dp4a(q, sh32[k + step], s1)
        s2 = dp4a(q, sh32[k + 2 * step], s2)
        s3 = dp4a(q, sh32[k + 3 * step], s3)
    return s0, s1, s2, s3


@device_function
def _index(top, s, s_attn, key, first, r):
    """The softmax index min(top - (s >> s_attn), 255) of a key of the row, 255 (weight 0) off its window."""
    if key < first or key > r:
        return np.int32(EXP_LAST)
    return min(top - (s >> s_attn), EXP_LAST)


@device_function
def _digits(w):
    """w = d0 + 256 d1 + 65536 d2 with d0, d1 in -128..127 (w in 0..2^18: d2 in 0..4)."""
    d0 = byte_of(w, 0)
    rest = np.int32(np.int32(w) - d0) >> 8
    d1 = byte_of(rest, 0)
    return d0, d1, np.int32(rest - d1) >> 8


@device_function
def _acc3(sh32, at, d, c):
    """One feature's three digit sums over four keys: V^T word at `at` (the four keys' values)."""
    v = sh32[at]
    return dp4a(d[0], v, c[0]), dp4a(d[1], v, c[1]), dp4a(d[2], v, c[2])


@device_function
def _attend(sh8, sh32, pert, seg_o, h0, hd, s_attn, am, am_next, tid):
    """One head of every row: the scores' row maximum (barrier), the softmax indices min(max - s, 255)
    into U (barrier), then the weighted mean of the values into H; returns this thread's share of
    x . B of the output projection. Keys go in groups of four (rows 4a..4a+3 of the block, those off
    the row's window weigh 0): thread 4r + sub takes the groups a = sub (mod 4) for the scores, then
    every group for the features h0 + sub + 4i. The weights EXP_LUT (< 2^18 + 1) are split in three
    signed bytes so that dp4a sums them against four keys' values at once; the sums are joined in 64 bits."""
    n_valid = sh32[N_VALID]
    r = (tid >> 2) | (n_valid >> 31)  # n_valid >= 0: what follows is not hoisted out of the layers
    sub = tid & 3
    valid = r < n_valid
    pos = _fact(sh32, POS, r)
    first = r - pos  # the member's position 0
    g_lo = first >> 2
    g_end = (r >> 2) + 1 if valid else g_lo
    w_lo = h0 >> 2
    w_hi = (h0 + hd + 3) >> 2
    mask_lo = _head_mask(w_lo, h0, hd)
    mask_hi = _head_mask(w_hi - 1, h0, hd)
    q_word = np.int32((Q_AT + r * QK_PITCH) >> 2)
    idx_word = np.int32((IDX_AT + r * IDX_PITCH) >> 2)
    if g_lo + sub < g_end:
        top = np.int32(INT_MIN)
        for a in range(np.int32(g_lo + sub), np.int32(g_end), np.int32(4)):
            key = 4 * a
            s0, s1, s2, s3 = _scores4(sh32, q_word, key, w_lo, w_hi, mask_lo, mask_hi)
            if key >= first:
                top = max(top, s0 >> s_attn)
            if first <= key + 1 <= r:
                top = max(top, s1 >> s_attn)
            if first <= key + 2 <= r:
                top = max(top, s2 >> s_attn)
            if key + 3 <= r:
                top = max(top, s3 >> s_attn)
        cuda.atomic.max(sh32, am + r, top)
    cuda.syncthreads()
    if tid < ROWS:
        sh32[am_next + tid] = INT_MIN
    top = sh32[am + r]
    for a in range(np.int32(g_lo + sub), np.int32(g_end), np.int32(4)):
        key = 4 * a
        s0, s1, s2, s3 = _scores4(sh32, q_word, key, w_lo, w_hi, mask_lo, mask_hi)
        sh32[idx_word + a] = pack4(_index(top, s0, s_attn, key, first, r) - 128,
                                   _index(top, s1, s_attn, key + 1, first, r) - 128,
                                   _index(top, s2, s_attn, key + 2, first, r) - 128,
                                   _index(top, s3, s_attn, key + 3, first, r) - 128)
    cuda.syncthreads()
    dot = np.int32(0)
    if not valid:
        return dot
    nb = _fact(sh32, PAIR, r) * pert[2] + seg_o
    z = np.int32(0)
    zero = (z, z, z)
    h_end = h0 + hd
    for f0 in range(np.int32(h0 + sub), np.int32(h_end), np.int32(32)):  # 8 features at a time, 4 apart
        c0 = c1 = c2 = c3 = c4 = c5 = c6 = c7 = zero
        norm = np.int32(0)
        n = (z, z, z, z, z, z, z, z)
        if pert[5]:  # the 8 features' B noise of O, loaded (pinned, as _pair_loads) before the keys' loop
            last = h_end - 1
            n = (opaque(np.int32(pert[0][nb + min(f0, last)])), opaque(np.int32(pert[0][nb + min(f0 + 4, last)])),
                 opaque(np.int32(pert[0][nb + min(f0 + 8, last)])), opaque(np.int32(pert[0][nb + min(f0 + 12, last)])),
                 opaque(np.int32(pert[0][nb + min(f0 + 16, last)])), opaque(np.int32(pert[0][nb + min(f0 + 20, last)])),
                 opaque(np.int32(pert[0][nb + min(f0 + 24, last)])), opaque(np.int32(pert[0][nb + min(f0 + 28, last)])))
        vt = np.int32((VT_AT + f0 * VT_PITCH) >> 2)
        step = np.int32(VT_PITCH)  # words of 4 features
        for a in range(np.int32(g_lo), np.int32(g_end)):
            iw = sh32[idx_word + a]
            wa = sh32[LUT + byte_of(iw, 0) + 128]
            wb = sh32[LUT + byte_of(iw, 1) + 128]
            wc = sh32[LUT + byte_of(iw, 2) + 128]
            wd = sh32[LUT + byte_of(iw, 3) + 128]
            norm = np.int32(norm + np.int32(np.int32(wa + wb) + np.int32(wc + wd)))
            a0, a1, a2 = _digits(wa)
            b0, b1, b2 = _digits(wb)
            e0, e1, e2 = _digits(wc)
            f0_, f1_, f2_ = _digits(wd)
            d = (pack4(a0, b0, e0, f0_), pack4(a1, b1, e1, f1_), pack4(a2, b2, e2, f2_))
            at = vt + a
            c0 = _acc3(sh32, at, d, c0)
            c1 = _acc3(sh32, at + step, d, c1)
            c2 = _acc3(sh32, at + 2 * step, d, c2)
            c3 = _acc3(sh32, at + 3 * step, d, c3)
            c4 = _acc3(sh32, at + 4 * step, d, c4)
            c5 = _acc3(sh32, at + 5 * step, d, c5)
            c6 = _acc3(sh32, at + 6 * step, d, c6)
            c7 = _acc3(sh32, at + 7 * step, d, c7)
        rcp = reciprocal_approx(np.float32(norm))
        dot += _mean_out(c0, norm, rcp, sh8, r, f0, f0 < h_end, pert, n[0])
        dot += _mean_out(c1, norm, rcp, sh8, r, f0 + 4, f0 + 4 < h_end, pert, n[1])
        dot += _mean_out(c2, norm, rcp, sh8, r, f0 + 8, f0 + 8 < h_end, pert, n[2])
        dot += _mean_out(c3, norm, rcp, sh8, r, f0 + 12, f0 + 12 < h_end, pert, n[3])
        dot += _mean_out(c4, norm, rcp, sh8, r, f0 + 16, f0 + 16 < h_end, pert, n[4])
        dot += _mean_out(c5, norm, rcp, sh8, r, f0 + 20, f0 + 20 < h_end, pert, n[5])
        dot += _mean_out(c6, norm, rcp, sh8, r, f0 + 24, f0 + 24 < h_end, pert, n[6])
        dot += _mean_out(c7, norm, rcp, sh8, r, f0 + 28, f0 + 28 < h_end, pert, n[7])
    return dot


@device_function
def _mean_out(c, norm, rcp, sh8, r, col, inside, pert, noise):
    """One attention output (when inside the head) into H from its three digit sums; its term of x . B
    of the output projection (noise: its B noise)."""
    if not inside:
        return np.int32(0)
    out = _weighted_mean((np.int64(c[2]) << 16) + (np.int64(c[1]) << 8) + c[0], norm, rcp)
    sh8[H_OFF + _frag_at(r, col, H_PAIR)] = out
    return np.int32(out * noise) if pert[5] else np.int32(0)


@device_function
def _prelude(inputs, sh32, pert, v_shift, kind, block, tid):
    """Tables, each row's facts, the block's noise rows and its members' perturbed vectors, hashed once
    for the window (rows past the block's members repeat its last one and are never stored); no barrier.
    inputs: (params, windows, prefixes, tensors, luts); block: (hd, steps, m0, m_valid, first_member)."""
    params, windows, prefixes, tensors, luts = inputs
    hd, steps, m0, m_valid, first_member = block
    noise8, vecs, noise_len, n_vecs, _, perturbed = pert
    for i in range(tid, LUTS.size, THREADS):
        sh32[LUT + i] = luts[i]
    for i in range(tid, MAX_DIM, THREADS):
        sh32[ROPE_PAIR + i] = (i % hd) >> 1
    base_pair = first_member >> 1
    if tid == 0:
        sh32[N_VALID] = m_valid * steps
        sh32[HEAD_W] = _w(tensors, ids.EMBEDDING)
    if tid < ROWS:
        gm = m0 + min(tid // steps, m_valid - 1)
        pos = tid % steps
        member = first_member + gm
        sh32[TOK + tid] = windows[gm, pos]
        sh32[TGT + tid] = windows[gm, pos + 1]
        sh32[PAIR + tid] = (member >> 1) - base_pair
        sh32[HROW + tid] = ((member >> 1) - ((first_member + m0) >> 1)) * SWEEP
        sh32[SIGN + tid] = 1 - 2 * (member & 1)
        sh32[MEMB + tid] = gm
        sh32[POS + tid] = pos
    for i in range(tid, 4 * ROWS, THREADS):
        sh32[SUM2 + i] = 0  # SUM2 and SUMLUT
    if perturbed:
        last_pair = ((first_member + m0 + m_valid - 1) >> 1) - base_pair
        for pl in range(((first_member + m0) >> 1) - base_pair, last_pair + 1):
            for t in range(tensors.shape[0]):
                # a tensor's entries loaded together and pinned (as _pair_loads): one latency, not one each
                d_out = opaque(np.int32(_offset(tensors, t, D_OUT)))
                width = opaque(np.int32(_offset(tensors, t, D_IN))) + d_out
                at = pl * noise_len + opaque(np.int32(_noise(tensors, t)))
                prefix = prefixes[t]
                if d_out > 0:
                    ka = gpu_member_key_a(prefix, base_pair + pl)
                    kb = gpu_member_key_b(ka)
                    for i in range(tid, width, THREADS):
                        noise8[at + i] = gpu_member_noise(ka, kb, i, kind)
    for t in range(tensors.shape[0]):
        d_out = opaque(np.int32(_offset(tensors, t, D_OUT)))  # as above
        n = opaque(np.int32(_offset(tensors, t, D_IN)))
        src = opaque(np.int32(_offset(tensors, t, PARAM_AT)))
        dst = opaque(np.int32(_vec(tensors, t)))
        prefix = prefixes[t]
        if d_out == 0:
            for j in range(tid, n, THREADS):
                p = np.int64(params[src + j])  # one load for all the block's members
                for gm in range(m0, m0 + m_valid):
                    member = first_member + gm
                    v = p
                    if perturbed:
                        ka = gpu_member_key_a(prefix, member >> 1)
                        kb = gpu_member_key_b(ka)
                        noise = gpu_member_noise(ka, kb, j, kind) * gpu_member_noise(ka, kb, n + j, kind)
                        v = _clip(v + ((noise * (1 - 2 * (member & 1))) >> v_shift))
                    vecs[gm * n_vecs + dst + j] = v


# ---- the kernel ---------------------------------------------------------------------------------

@kernel((I8_1D, I32_1D, I32_2D, I64_1D, I64_2D, I32_1D, I32_1D, I8_1D, I8_1D, I64_2D, I8_2D)
        + (I64,) * 23 + (BOOL, BOOL), tensor_cores=True, block=THREADS, launch_bounds=THREADS)
def transformer_epoch_cuda(params, w32, windows, prefixes, tensors, rope, luts, noise8, vecs, out, logits, n_layer,
                           dim, hd, vocab, s_attn, s_qkv, s_out, s_logit, s_up, s_down, m_shift, v_shift, kind,
                           per_block, steps, noise_len, n_vecs, vp, n_heads, kw_dim, kw_hidden, first_member, members,
                           perturbed, keep):
    """One block: the windows of per_block members through every layer (module docstring). The sizes
    are scalar arguments (the constant bank, not registers), masked non-negative: the compiler then
    drops the negative-index wraparound of the accesses derived from them."""
    sh8 = cuda.shared.array(0, numba.int8)
    sh32 = cuda.shared.array(0, numba.int32)
    n_layer, dim, hd, vocab, steps = n_layer & LOW31, dim & LOW31, hd & LOW31, vocab & LOW31, steps & LOW31
    per_block, noise_len, n_vecs, vp = per_block & LOW31, noise_len & LOW31, n_vecs & LOW31, vp & LOW31
    n_heads, kw_dim, kw_hidden = n_heads & LOW31, kw_dim & LOW31, kw_hidden & LOW31
    first_member, members = first_member & LOW31, members & LOW31
    tid = cuda.threadIdx.x
    lane = tid & 31
    warp = tid >> 5
    hidden = 4 * dim
    m0 = cuda.blockIdx.x * per_block
    pert = (noise8, vecs, noise_len, n_vecs, m_shift, perturbed)
    half = hd >> 1

    _prelude((params, windows, prefixes, tensors, luts), sh32, pert, v_shift, kind,
             (hd, steps, m0, min(per_block, members - m0), first_member), tid)
    cuda.syncthreads()
    _embed(params, sh8, sh32, pert, _vec(tensors, ids.EMBEDDING_BIAS), _offset(tensors, ids.EMBEDDING, PARAM_AT),
           _noise(tensors, ids.EMBEDDING), dim, tid)
    cuda.syncthreads()
    for layer in range(np.int32(-1), np.int32(n_layer)):  # -1: the init MLP alone
        first = ids.INIT_MLP
        if layer >= 0:
            lt = ids.FIRST_LAYER + ids.TENSORS_PER_LAYER * layer
            first = lt + ids.LAYER_MLP
            for i in range(tid, 4 * ROWS, THREADS):
                sh32[RM + i] = 0
            if tid < ROWS:
                sh32[AM + tid] = INT_MIN
            _ln(params, sh8, sh32, pert, _vec(tensors, lt + ids.LN1_W), _noise(tensors, lt + ids.Q), _noise(tensors,
                                                                                                            lt + ids.K),
                _noise(tensors, lt + ids.V), -1, dim, tid)
            for which in range(3):  # K, V, then Q into U; their x . B in DOTB, DOTC, DOTA
                t = lt + (ids.K + which if which < 2 else ids.Q)
                stage = (DOTB if which == 0 else (DOTC if which == 1 else DOTA), _noise(tensors, t) + dim, s_qkv,
                         rope, half, which != 1, -1, False, dim)
                _rescaled_stage(sh8, sh32, w32, pert, (H_OFF >> 2, H_PAIR >> 2), (_w(tensors, t), kw_dim), lane, warp,
                                stage, RM + ROWS * which, K_DST if which == 0 else (V_DST if which == 1 else Q_DST))
            cuda.syncthreads()
            if tid < ROWS:
                sh32[DOTA + tid] = 0  # for the output projection's x . B, added after the heads' barriers
            dot = np.int32(0)
            for h in range(np.int32(n_heads)):
                dot += _attend(sh8, sh32, pert, _noise(tensors, lt + ids.O), h * hd, hd, s_attn, AM + ROWS * (h & 1),
                               AM + ROWS * (1 - (h & 1)), tid)
            if tid >> 2 < sh32[N_VALID]:
                cuda.atomic.add(sh32, DOTA + (tid >> 2), dot)
            cuda.syncthreads()
            stage = (DOTA, _noise(tensors, lt + ids.O) + dim, s_out, rope, half, False, -1, True, dim)
            _rescaled_stage(sh8, sh32, w32, pert, (H_OFF >> 2, H_PAIR >> 2), (_w(tensors, lt + ids.O), kw_dim), lane,
                            warp, stage, RM + 3 * ROWS, -1)
            cuda.syncthreads()
        # the MLP: LN (x . B of up in DOTA; DOTB zeroed for the down's, which up's epilogue adds up)
        if tid < ROWS:
            sh32[RM + tid] = 0
        _ln(params, sh8, sh32, pert, _vec(tensors, first + ids.LN_W), _noise(tensors, first + ids.UP), -1, -1, -1, dim,
            tid)
        up = (_noise(tensors, first + ids.UP) + dim, _noise(tensors, first + ids.DOWN), s_up,
              _vec(tensors, first + ids.UP_BIAS), hidden)
        for sweep in range(np.int32(0), np.int32(hidden), np.int32(SWEEP)):
            n0 = sweep + 16 * warp
            if n0 < hidden:
                _up_sweep(sh8, sh32, w32, pert, _w(tensors, first + ids.UP), kw_dim, n0, lane, up)
        cuda.syncthreads()
        stage = (DOTB, _noise(tensors, first + ids.DOWN) + hidden, s_down, rope, half, False,
                 _vec(tensors, first + ids.DOWN_BIAS), True, dim)
        _rescaled_stage(sh8, sh32, w32, pert, (U_OFF >> 2, U_PAIR >> 2), (_w(tensors, first + ids.DOWN), kw_hidden),
                        lane, warp, stage, RM, -1)
        cuda.syncthreads()

    # the tied head: LN (x . B of the head in DOTA, the target's E row . h in DOTB), then two vocabulary passes
    if tid < ROWS:
        sh32[RM + tid] = INT_MIN
    _ln(params, sh8, sh32, pert, _vec(tensors, ids.FIRST_LAYER + ids.TENSORS_PER_LAYER * n_layer), _noise(tensors,
                                                                                                          ids.EMBEDDING),
        -1, -1, _offset(tensors, ids.EMBEDDING, PARAM_AT), dim, tid)
    head = (_noise(tensors, ids.EMBEDDING) + dim, s_logit, vocab, keep, steps - 1)
    if perturbed and tid < ROWS:  # x . B of the head times the sign (seen after the first sweep's barrier)
        sh32[DOTA + tid] *= sh32[SIGN + tid]
    for second in range(2):
        for sweep in range(np.int32(0), np.int32(vp), np.int32(SWEEP)):
            if perturbed:  # the sweep's A noise for the block's pairs into U (free now)
                _stage_head_noise(sh8, sh32, pert, head[0], sweep, vocab, tid)
                cuda.syncthreads()
            _head_sweep(second == 1, sh8, sh32, w32, pert, sh32[HEAD_W], kw_dim, sweep, vp, tid, head, logits)
        cuda.syncthreads()

    # each row's log-likelihood and proxy loss, then each member's sums over its rows
    if tid < sh32[N_VALID]:
        target = sh32[DOTB + tid]
        if perturbed:
            at = _fact(sh32, PAIR, tid) * noise_len + _noise(tensors, ids.EMBEDDING) + dim + _fact(sh32, TGT, tid)
            target += (sh32[DOTA + tid] * np.int32(noise8[at])) >> m_shift  # DOTA holds the sign
        target >>= s_logit
        pad = sar32(np.int32(HEAD_PAD), s_logit)  # the padded columns' logit (HEAD_PAD), off the sums
        top = sh32[RM + tid]
        exp2_sum = ((np.int64(sh32[SUM2 + ROWS + tid]) << 16) + sh32[SUM2 + tid]
                    - (vp - vocab) * sh32[EXP2T + _exp2_index(pad)])
        lut_sum = ((np.int64(sh32[SUMLUT + ROWS + tid]) << 16) + sh32[SUMLUT + tid]
                   - (vp - vocab) * sh32[LUT + _lut_index(top, pad)])
        sh32[ROW_LL + tid] = _clip(target) + 128 - (gpu_floor_log2_x16(exp2_sum) - 64)
        sh32[ROW_PROXY + tid] = 8 * ((gpu_floor_log2_x16(lut_sum) >> 4) - SOFTMAX_SCALE_BIT) + top - target
    cuda.syncthreads()
    if tid * steps < sh32[N_VALID]:
        loglik = proxy = np.int64(0)
        for r in range(tid * steps, (tid + 1) * steps):
            loglik += sh32[ROW_LL + r]
            proxy += sh32[ROW_PROXY + r]
        m = _fact(sh32, MEMB, tid * steps)
        out[m, 0] = loglik
        out[m, 1] = proxy


PAD_THREADS = 128


@kernel((I8_1D, I64_2D, I32_1D), block=PAD_THREADS)
def pad_weights_cuda(params, segments, w32):
    """One thread a row of the padded weights (Plan.segments): the row's bytes as int32 words, zero past
    d_in and on the rows past d_out, in fragment order: for each 16 rows and 64 bytes of K, the 32
    lanes' 16 bytes of rows g (then of rows g + 8), lane 4g + q holding bytes 16q..16q+15."""
    row = cuda.grid(1)
    for s in range(segments.shape[0]):
        rows = segments[s, 5]
        if row < rows:
            src, d_in, d_out, word, kw = segments[s, 0], segments[s, 1], segments[s, 2], segments[s, 3], segments[s, 4]
            block = word + (row >> 4) * (kw >> 4) * 256 + ((row >> 3) & 1) * 128 + (row & 7) * 16
            for w in range(kw):
                v = np.int32(0)
                for b in range(4):
                    k = 4 * w + b
                    if row < d_out and k < d_in:
                        byte = np.int32(params[src + row * d_in + k])
                        v |= (byte if b == 3 else byte & 0xFF) << (8 * b)  # the top byte keeps its sign
                w32[block + (w >> 4) * 256 + (w & 15)] = v
            return
        row -= rows


def scratch_bytes(spec, steps):
    """Device bytes one member needs during a window: half its pair's noise rows, its perturbed vectors
    and its scores. (Its K and V live in shared memory; a launch adds one copy of the padded weights,
    about the model's size.)"""
    plan = Plan(spec, steps)
    return (plan.noise_len + 1) // 2 + plan.n_vecs + 16


def run_epoch(params, windows, prefixes, first_member, spec, perturbed, keep_logits=False):
    """Launch on device arrays (params, int32 windows, prefixes); on the device: the (members, 2) int64
    sums (log-likelihood, proxy loss), and with keep_logits the (members, vocab) int8 clipped logits of
    each window's last position (else a (1, 1) placeholder)."""
    members, steps, first_member = int(windows.shape[0]), int(windows.shape[1]) - 1, int(first_member)
    plan = Plan(spec, steps)
    dim, vocab = plan.scalars[1], plan.scalars[3]
    require(dim <= MAX_DIM, f"the CUDA transformer epoch takes --dim up to {MAX_DIM}, got {dim}")
    require(vocab <= MAX_VOCAB, f"the CUDA transformer epoch takes vocabularies up to {MAX_VOCAB}, got {vocab}")
    require(1 <= steps <= ROWS, f"the CUDA transformer epoch takes windows of 1 to {ROWS} tokens, got {steps}")
    w32 = cuda.device_array(plan.w_words, np.int32)
    rows = int(plan.segments[:, 5].sum())
    pad_weights_cuda[(rows + PAD_THREADS - 1) // PAD_THREADS, PAD_THREADS](params, cuda.to_device(plan.segments), w32)
    pairs = ((first_member + members - 1) >> 1) - (first_member >> 1) + 1
    head_dim = plan.scalars[2]
    out = cuda.device_array((members, 2), np.int64)
    logits = cuda.device_array((members, vocab) if keep_logits else (1, 1), np.int8)
    args = (params, w32, windows, prefixes, cuda.to_device(plan.tensors),
            cuda.to_device(rope_table(steps, head_dim).astype(np.int32).ravel()), cuda.to_device(LUTS),
            cuda.device_array(pairs * plan.noise_len + SLACK if perturbed else 1, np.int8),
            cuda.device_array(members * plan.n_vecs + SLACK, np.int8), out, logits,
            *(np.int64(v) for v in plan.scalars), np.int64(first_member), np.int64(members), bool(perturbed),
            bool(keep_logits))
    allow_dynamic_shared(transformer_epoch_cuda, args, SHARED_BYTES)
    transformer_epoch_cuda[math.ceil(members / plan.per_block), THREADS, 0, SHARED_BYTES](*args)
    return out, logits


# ---- roofline of the static report (kernels/STATIC_REPORT.md) -------------------------------------

ROOFLINE_WORKLOADS = ("d-eggs 4x256, heads of 64, vocabulary 8192, 64 tokens, population 40960",
                      "d-eggs 4x256, heads of 64, vocabulary 8192, 64 tokens, population 40960, unperturbed")


def roofline(workload, n_layer=4, dim=256, vocab=8192, steps=64, members=40960):
    """Operations and bytes per member-token from this kernel's loop structure. A block carries 128 rows
    (ROWS // steps members) through the window: it reads every weight twice from L2 (the padded model,
    ~5.6 MB, stays there): the head in its two passes, the other matrices once per 64-row half. Each block
    hashes its pairs' noise rows and its members' vectors into global scratch and reads them back from
    L1/L2 (per-element A loads hit the pair's row, a few KB); that scratch reaches HBM once. Attention,
    norms and epilogues run on the CUDA cores beside the tensor cores and are not in this estimate (the
    static model's prediction counts them)."""
    perturbed = not workload.endswith("unperturbed")
    per_block = ROWS // steps
    model_macs = (8 + 12 * n_layer) * dim * dim + vocab * dim  # init MLP, layers, head once
    executed = model_macs + vocab * dim  # the head's second pass
    matrices = [(4 * dim, dim), (dim, 4 * dim)] * (n_layer + 1) + [(dim, dim)] * 4 * n_layer + [(vocab, dim)]
    pair_noise = sum(d_out + d_in for d_out, d_in in matrices) if perturbed else 0
    vectors = dim * (1 + 7 * (n_layer + 1) + 2 * n_layer + 2)
    scratch = pair_noise / 2 + vectors  # one member's share, written once and read back
    l2 = (2 * model_macs + 2 * scratch * per_block) / ROWS  # weights twice, scratch out and in, per block
    return {
        "name": f"{workload}: tensor-core epoch (transformer_epoch_cuda)",
        "kernel": f"{__name__}.transformer_epoch_cuda",
        "unit": "member-token",
        "ops_per_unit": 2 * executed,
        "compute_limit": "int8_tensor",
        "reference_limit": "int8_tensor",
        "bytes_per_unit": {"hbm": scratch / steps, "l2": l2},
        "basis": (f"{executed} int8 MACs per member-token on IMMA ({model_macs} the model's, plus the head's second "
                  f"pass); weights read twice per block of {ROWS} rows ({per_block} members x {steps} "
                  f"tokens) from L2; {scratch:.0f} B of noise rows and vectors per member written once (HBM) and "
                  "read back per block; attention and element-wise work on the CUDA cores not counted."),
        "launches": _launches(n_layer, dim, vocab, steps, members, perturbed),
        "units": members * steps,
        "measured": {"benchmark": f"eggroll_throughput-transformer{n_layer}x{dim}",
                     "row": {"population": members, "tokens": steps},
                     "rate": "perturbed_tokens_per_s" if perturbed else "plain_tokens_per_s"},
    }


def _launches(n_layer, dim, vocab, steps, members, perturbed, head_dim=64):
    """run_epoch's two launches for the static model, with the benchmark's shifts and noise settings
    (d-eggs' uniform noise, sigma shift 2, vector shift 6): array shapes, the tables it reads, scalars."""
    spec = np.array([n_layer, dim, head_dim, vocab, 8, 6, 9, 8, 8, 10, 2, 6, 1], np.int64)
    plan, table = Plan(spec, steps), tensor_table(spec)
    params = int(table[-1, 0] + table[-1, 1])
    rows = int(plan.segments[:, 5].sum())
    pairs = (members - 1) // 2 + 1
    args = [{"shape": (params,), "dtype": "int8"}, {"shape": (plan.w_words,), "dtype": "int32"},
            {"shape": (members, steps + 1), "dtype": "int32"}, {"shape": (len(table),), "dtype": "int64"},
            plan.tensors, rope_table(steps, head_dim).astype(np.int32).ravel(), LUTS,
            {"shape": (pairs * plan.noise_len + SLACK if perturbed else 1,), "dtype": "int8"},
            {"shape": (members * plan.n_vecs + SLACK,), "dtype": "int8"}, {"shape": (members, 2), "dtype": "int64"},
            {"shape": (1, 1), "dtype": "int8"}, *plan.scalars, 0, members, perturbed, False]
    pad = {"kernel": f"{__name__}.pad_weights_cuda", "grid": (rows + PAD_THREADS - 1) // PAD_THREADS,
           "block": PAD_THREADS, "args": [args[0], plan.segments, args[1]]}
    epoch = {"kernel": f"{__name__}.transformer_epoch_cuda", "grid": math.ceil(members / plan.per_block),
             "block": THREADS, "shared": SHARED_BYTES, "args": args}
    return [pad, epoch]
