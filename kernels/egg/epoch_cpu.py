"""The CPU twin of egg_epoch: one numba function per epoch, `prange` over tiles of members, every
byte and layer inside, so no thread is forked or joined per byte.

More in docs/internals.md (kernels/egg/epoch_cpu.py)."""

import llvmlite.ir as ir
import numba
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from eggnog.kernels.egg.int_math import EXP2, FIXED_POINT, MAX8, matmul_divisor
from eggnog.kernels.egg.layout import VOCAB
from eggnog.kernels.egg.member_ops import cpu_clip8, cpu_floor_log2_x16
from eggnog.kernels.noise.gains import GAIN_ONE, GAIN_SHIFT, gain_offsets, kernel_args
from eggnog.kernels.noise.streams import cpu_bits_of, cpu_gaussian_int8, cpu_member_key_a, cpu_member_key_b, cpu_round1

ROWS = 6  # members of a product block: 6 x 2 accumulators + 2 panel loads + 1 broadcast = 15 ymm
COLS = 16  # outputs of a product block: two <8 x i32> accumulators per member
BUFFER_ROWS = 12  # tile buffers hold a multiple of this many rows: whole product blocks and dots4 groups
TILE = 36  # most members per tile (a multiple of BUFFER_ROWS): the fastest of 12..72 at EGG 1x64 and 6x256
OUT_CHUNK = 256  # outputs whose sums are held in a tile buffer before the epilogue runs over them
# Floor of p / d for |p| <= 2^14 and 1 <= d <= 128 through a float64 product: a non-integer quotient
# is at least 1/128 below the next integer and the product's error is below 2^-36, so adding 2^-20
# before the floor gives the exact integer result (checked exhaustively in tests/test_egg_epoch.py).
QUOTIENT_NUDGE = 2.0**-20

_I8, _I16, _I32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
_V16, _W16, _V8 = ir.VectorType(_I16, 16), ir.VectorType(_I32, 16), ir.VectorType(_I32, 8)


# ---- int8 products in LLVM vector IR -------------------------------------------------------------

def _shuffle(builder, a, b, lanes):
    return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(_I32, len(lanes)), lanes))


def vpmaddwd_ir(builder, a, b):
    """<16 x i16> . <16 x i16> -> <8 x i32>, neighbouring products summed: vpmaddwd's semantics."""
    p = builder.mul(builder.sext(a, _W16), builder.sext(b, _W16))
    return builder.add(_shuffle(builder, p, p, list(range(0, 16, 2))), _shuffle(builder, p, p, list(range(1, 16, 2))))


def _load16(builder, array, dtype, index):
    """16 elements from `index` as <16 x i16> (int8 elements sign-extended)."""
    ptr = builder.gep(array.data, [index])
    if dtype.bitwidth == 16:
        return builder.load(builder.bitcast(ptr, _V16.as_pointer()), align=2)
    return builder.sext(builder.load(builder.bitcast(ptr, ir.VectorType(_I8, 16).as_pointer()), align=1), _V16)


def _broadcast_pair(builder, array, index):
    """Elements index, index + 1 of an int16 array repeated 8 times, as <16 x i16>."""
    word = builder.load(builder.bitcast(builder.gep(array.data, [index]), _I32.as_pointer()), align=2)
    vec = builder.insert_element(ir.Constant(_V8, None), word, ir.Constant(_I32, 0))
    return builder.bitcast(_shuffle(builder, vec, vec, [0] * 8), _V16)


@intrinsic
def panel_product(typingctx, x, x_at, x_pitch, panel, panel_at, pairs, acc, acc_at, acc_pitch):
    """acc[acc_at + r * acc_pitch + c] = sum over k < 2 * pairs of x[x_at + r * x_pitch + k] *
    W[c, k] for r < ROWS, c < COLS, where the panel (int8, from panel_at) holds W's k-pairs
    interleaved: [pair][COLS][2]. x is int16; arrays are C-contiguous, offsets in elements."""
    sig = types.void(x, x_at, x_pitch, panel, panel_at, pairs, acc, acc_at, acc_pitch)

    def codegen(context, builder, signature, args):
        xa = context.make_array(x)(context, builder, args[0])
        pa = context.make_array(panel)(context, builder, args[3])
        aa = context.make_array(acc)(context, builder, args[6])
        const = lambda v: context.get_constant(types.intp, v)  # noqa: E731
        halves = COLS // 8
        accs = [cgutils.alloca_once_value(builder, ir.Constant(_V8, None)) for _ in range(ROWS * halves)]
        rows = [builder.add(args[1], builder.mul(const(r), args[2])) for r in range(ROWS)]
        with cgutils.for_range(builder, args[5]) as loop:
            step = builder.add(args[4], builder.mul(loop.index, const(2 * COLS)))
            w = [_load16(builder, pa, panel.dtype, builder.add(step, const(16 * h))) for h in range(halves)]
            k = builder.mul(loop.index, const(2))
            for r in range(ROWS):
                xb = _broadcast_pair(builder, xa, builder.add(rows[r], k))
                for h in range(halves):
                    slot = accs[r * halves + h]
                    builder.store(builder.add(builder.load(slot), vpmaddwd_ir(builder, xb, w[h])), slot)
        for r in range(ROWS):
            for h in range(halves):
                at = builder.add(builder.add(args[7], builder.mul(const(r), args[8])), const(8 * h))
                ptr = builder.bitcast(builder.gep(aa.data, [at]), _V8.as_pointer())
                builder.store(builder.load(accs[r * halves + h]), ptr, align=4)
        return context.get_dummy_value()

    return sig, codegen


def _sums4(builder, v):
    """The horizontal sums of 4 <8 x i32> in lanes 0..3 of one <8 x i32> (a tree of hadds)."""
    zero = ir.Constant(_V8, None)
    p = _hadd(builder, _hadd(builder, v[0], v[1]), _hadd(builder, v[2], v[3]))
    return builder.add(p, _shuffle(builder, p, zero, [4, 5, 6, 7, 8, 8, 8, 8]))


def _hadd(builder, a, b):
    """vphaddd's lanes: [a0+a1, a2+a3, b0+b1, b2+b3 | a4+a5, a6+a7, b4+b5, b6+b7]."""
    return builder.add(_shuffle(builder, a, b, [0, 2, 8, 10, 4, 6, 12, 14]),
                       _shuffle(builder, a, b, [1, 3, 9, 11, 5, 7, 13, 15]))


@intrinsic
def dots4(typingctx, x, x_at, x_pitch, w, w_at0, w_at1, w_at2, w_at3, n):
    """Four dot products sum_k x[x_at + r * x_pitch + k] * w[w_at_r + k], r < 4, over k < n (a
    multiple of 16) as int32: x int16, w int8 or int16; four independent chains, one reduction."""
    sig = types.UniTuple(types.int32, 4)(x, x_at, x_pitch, w, w_at0, w_at1, w_at2, w_at3, n)

    def codegen(context, builder, signature, args):
        xa = context.make_array(x)(context, builder, args[0])
        wa = context.make_array(w)(context, builder, args[3])
        const = lambda v: context.get_constant(types.intp, v)  # noqa: E731
        slots = [cgutils.alloca_once_value(builder, ir.Constant(_V8, None)) for _ in range(4)]
        with cgutils.for_range(builder, builder.sdiv(args[8], const(16))) as loop:
            k = builder.mul(loop.index, const(16))
            for r in range(4):
                xr = _load16(builder, xa, x.dtype, builder.add(builder.add(args[1], builder.mul(const(r), args[2])), k))
                product = vpmaddwd_ir(builder, xr, _load16(builder, wa, w.dtype, builder.add(args[4 + r], k)))
                builder.store(builder.add(builder.load(slots[r]), product), slots[r])
        total = _sums4(builder, [builder.load(slot) for slot in slots])
        return context.make_tuple(builder, signature.return_type,
                                  [builder.extract_element(total, ir.Constant(_I32, r)) for r in range(4)])

    return sig, codegen


@intrinsic
def scale_clip(typingctx, acc, acc_at, a, a_at, out, out_at, n, sd, shift, div_shift, perturbed):
    """out[out_at + j] = clip((acc[acc_at + j] + (perturbed ? (sd * a[a_at + j]) >> shift : 0))
    >> div_shift, +-127) for j < n (a multiple of 8), all in int32 lanes: acc int32, a int8, out
    int16. The caller checks that sd * a fits int32 (divide_row)."""
    sig = types.void(acc, acc_at, a, a_at, out, out_at, n, sd, shift, div_shift, perturbed)

    def codegen(context, builder, signature, args):
        acc_a = context.make_array(acc)(context, builder, args[0])
        a_a = context.make_array(a)(context, builder, args[2])
        out_a = context.make_array(out)(context, builder, args[4])
        const = lambda v: context.get_constant(types.intp, v)  # noqa: E731

        def splat(value):
            word = builder.trunc(value, _I32)
            vec = builder.insert_element(ir.Constant(_V8, None), word, ir.Constant(_I32, 0))
            return _shuffle(builder, vec, vec, [0] * 8)

        sd_v, shift_v, div_v = splat(args[7]), splat(args[8]), splat(args[9])
        low, high = ir.Constant(_V8, [-MAX8] * 8), ir.Constant(_V8, [MAX8] * 8)

        def run(with_noise):
            with cgutils.for_range(builder, builder.sdiv(args[6], const(8))) as loop:
                j = builder.mul(loop.index, const(8))
                ptr = builder.gep(acc_a.data, [builder.add(args[1], j)])
                v = builder.load(builder.bitcast(ptr, _V8.as_pointer()), align=4)
                if with_noise:
                    ptr = builder.gep(a_a.data, [builder.add(args[3], j)])
                    noise = builder.load(builder.bitcast(ptr, ir.VectorType(_I8, 8).as_pointer()), align=1)
                    v = builder.add(v, builder.ashr(builder.mul(builder.sext(noise, _V8), sd_v), shift_v))
                q = builder.ashr(v, div_v)
                q = builder.select(builder.icmp_signed("<", q, low), low, q)
                q = builder.select(builder.icmp_signed(">", q, high), high, q)
                ptr = builder.gep(out_a.data, [builder.add(args[5], j)])
                builder.store(builder.trunc(q, ir.VectorType(_I16, 8)),
                              builder.bitcast(ptr, ir.VectorType(_I16, 8).as_pointer()), align=2)

        with builder.if_else(args[10]) as (with_noise, plain):
            with with_noise:
                run(True)
            with plain:
                run(False)
        return context.get_dummy_value()

    return sig, codegen


# ---- once per call: matrices as panels -----------------------------------------------------------

@numba.njit(parallel=True, cache=True)
def pack_panels(params, tensors, packed):
    """Every matrix (kind 1, with a panel offset) into packed[at:]: for each block of COLS outputs,
    each k-pair, W[j, 2p], W[j, 2p + 1] for the block's j; zero past d_out and d_in."""
    for t in numba.prange(tensors.shape[0]):
        at = tensors[t, 6]
        if at < 0:
            continue
        w_at, d_in, d_out = tensors[t, 1], tensors[t, 2], tensors[t, 7]
        pairs = (d_in + 1) // 2
        blocks = (d_out + COLS - 1) // COLS
        panel = packed[at:at + blocks * pairs * 2 * COLS]
        if d_out % COLS or d_in % 2:
            panel[:] = 0
        for j in range(d_out):
            row = params[w_at + j * d_in:w_at + (j + 1) * d_in]
            out = panel[(j // COLS) * pairs * 2 * COLS + 2 * (j % COLS):]
            for k in range(d_in):
                out[(k >> 1) * 2 * COLS + (k & 1)] = row[k]


# ---- per-tile pieces ----------------------------------------------------------------------------

@numba.njit(cache=True)
def _noise_rows(noise, at, prefix, pair0, pairs, width, gain_row, scaled):
    """Elements [0, width) of every local pair's stream of one tensor into noise[:, at:at + width],
    scaled by gain_row[at:at + width] (noise.gains) where `scaled`."""
    for q in range(pairs):
        ka = cpu_member_key_a(prefix, pair0 + q)
        kb = cpu_member_key_b(ka)
        row = noise[q, at:at + width]
        for j in range(width):
            n = cpu_gaussian_int8(cpu_bits_of(cpu_round1(ka, j), kb))
            row[j] = (n * np.int64(gain_row[at + j])) >> GAIN_SHIFT if scaled else n


@numba.njit(cache=True)
def _matmul(x, count, packed, t, tensors, noise, pair_of, sign_of, shift, perturbed, divide, acc, noise_dot, out):
    """out[m, :d_out] = clip((x[m] . W^T + (x[m] . B) * sign * A >> shift) // divisor) for the
    tile's members m < count; x and out are int16 tile buffers, W is tensor t (packed)."""
    d_in, d_out, b_at, panel_at = tensors[t, 2], tensors[t, 7], tensors[t, 3], tensors[t, 6]
    div_shift, divisor, narrow = divide[t, 0], divide[t, 1], divide[t, 2] == 1
    xp, ap, op, width = x.shape[1], acc.shape[1], out.shape[1], noise.shape[1]
    xf, af, of, nf = x.reshape(x.size), acc.reshape(acc.size), out.reshape(out.size), noise.reshape(noise.size)
    rows = (count + ROWS - 1) // ROWS * ROWS
    pairs = (d_in + 1) // 2
    if perturbed:  # x . B_p for each member, four at a time (rows past count are zero)
        n16 = d_in // 16 * 16
        last = count - 1
        for m in range(0, count, 4):
            at0, at1 = pair_of[m] * width + b_at, pair_of[min(m + 1, last)] * width + b_at
            at2, at3 = pair_of[min(m + 2, last)] * width + b_at, pair_of[min(m + 3, last)] * width + b_at
            sums = dots4(xf, m * xp, xp, nf, at0, at1, at2, at3, n16)
            for r in range(min(4, count - m)):
                s = np.int64(sums[r])
                at = pair_of[m + r] * width + b_at
                for k in range(n16, d_in):
                    s += np.int64(x[m + r, k]) * np.int64(nf[at + k])
                noise_dot[m + r] = s * sign_of[m + r]
    for j0 in range(0, d_out, OUT_CHUNK):
        j1 = min(j0 + OUT_CHUNK, d_out)
        for jb in range(j0 // COLS, (j1 + COLS - 1) // COLS):
            for m in range(0, rows, ROWS):
                panel_product(xf, m * xp, xp, packed, panel_at + jb * pairs * 2 * COLS, pairs, af,
                              m * ap + jb * COLS - j0, ap)
        n8 = (j1 - j0) // 8 * 8
        for m in range(count):
            a_at = pair_of[m] * width + b_at + d_in + j0
            if div_shift >= 0 and shift < 32 and (narrow or not perturbed):
                scale_clip(af, m * ap, nf, a_at, of, m * op + j0, n8, noise_dot[m], shift, div_shift, perturbed)
                start = j0 + n8
            else:
                start = j0
            for j in range(start, j1):  # the rest, and the general case in int64
                total = np.int64(acc[m, j - j0])
                if perturbed:
                    total += (noise_dot[m] * np.int64(nf[a_at + j - j0])) >> shift
                q = total >> div_shift if div_shift >= 0 else total // divisor
                out[m, j] = min(max(q, -MAX8), MAX8)


@numba.njit(cache=True)
def _l1_norm(x, count, vec, slot, dim, out):
    """EGG_LN of each member row: x * w / mean|x|, floor, clipped (int_math.l1_norm_value)."""
    for m in range(count):
        total = 0
        for j in range(dim):
            total += abs(np.int64(x[m, j]))
        mean_abs = max(total, 1) // dim
        if mean_abs == 0:  # mean |x| < 1: nano-egg's division by zero
            for j in range(dim):
                out[m, j] = -1 if np.int64(x[m, j]) * np.int64(vec[m, slot, j]) == 0 else -2
        else:
            inverse = 1.0 / mean_abs
            for j in range(dim):
                q = np.int64(np.floor(np.int64(x[m, j]) * np.int64(vec[m, slot, j]) * inverse + QUOTIENT_NUDGE))
                out[m, j] = min(max(q, -MAX8), MAX8)


@numba.njit(cache=True)
def tile_pairs(g0, count):
    """Members g0 .. g0 + count - 1: the first pair, how many pairs they span, each member's pair
    relative to the first and its sign (+1 for even members)."""
    pair0 = g0 >> 1
    pair_of = np.empty(count, np.int64)
    sign_of = np.empty(count, np.int64)
    for m in range(count):
        pair_of[m] = ((g0 + m) >> 1) - pair0
        sign_of[m] = 1 - 2 * ((g0 + m) & 1)
    return pair0, ((g0 + count - 1) >> 1) - pair0 + 1, pair_of, sign_of


@numba.njit(cache=True)
def _tile(params, packed, windows, states, prefixes, first_member, start, count, shift, perturbed, tensors, divide,
          layer_ids, head_ids, gain_row, scaled, total):
    """One tile: members [start, start + count) of the slice through the whole epoch."""
    n_layer, _, dim = states.shape
    n_tensors = tensors.shape[0]
    pair0, pairs, pair_of, sign_of = tile_pairs(first_member + start, count)

    # prelude: every tensor's noise for the tile's pairs, then each member's perturbed vectors
    width = tensors[n_tensors - 1, 3] + tensors[n_tensors - 1, 4] if perturbed else 1
    noise = np.zeros((pairs, width), np.int8)
    n_vec = 0
    for t in range(n_tensors):
        n_vec += tensors[t, 0] == 0
        if perturbed:
            _noise_rows(noise, tensors[t, 3], prefixes[t], pair0, pairs, tensors[t, 4], gain_row, scaled)
    vec = np.empty((count, n_vec, dim), np.int16)
    for t in range(n_tensors):
        if tensors[t, 0] == 0:
            slot, at, n = tensors[t, 5], tensors[t, 3], tensors[t, 2]
            for m in range(count):
                nf = noise[pair_of[m]]
                for j in range(n):
                    v = np.int64(params[tensors[t, 1] + j])
                    if perturbed:
                        v += (np.int64(nf[at + j]) * np.int64(nf[at + n + j]) * sign_of[m]) >> shift
                    vec[m, slot, j] = cpu_clip8(v)

    rows = (count + BUFFER_ROWS - 1) // BUFFER_ROWS * BUFFER_ROWS
    pitch = dim + (dim & 1)  # products read k in pairs: an odd width reads one zero more
    x = np.zeros((rows, pitch), np.int16)  # the residual stream
    h_in = np.zeros((rows, pitch), np.int16)
    s = np.zeros((rows, pitch), np.int16)  # a layer's state
    fh = np.zeros((rows, pitch), np.int16)
    a = np.zeros((rows, pitch), np.int16)
    b = np.zeros((rows, pitch), np.int16)
    f = np.zeros((rows, pitch), np.int16)
    up = np.zeros((rows, 4 * dim), np.int16)
    logits = np.zeros((rows, VOCAB), np.int16)
    acc = np.zeros((rows, OUT_CHUNK), np.int32)
    noise_dot = np.zeros(rows, np.int64)
    emb, ln_out, head = head_ids[0], head_ids[1], head_ids[2]
    e_at, e_noise = tensors[emb, 1], tensors[emb, 3]

    for t in range(windows.shape[1] - 1):
        for m in range(count):  # embedding: E[token] + ((sign * A[token]) * B) >> shift
            token = np.int64(windows[start + m, t])
            if token == 0:  # a document starts: every layer's state restarts from zero
                for layer in range(n_layer):
                    states[layer, start + m, :] = 0
            row = params[e_at + token * dim:e_at + (token + 1) * dim]
            if perturbed:
                nf = noise[pair_of[m]]
                am = sign_of[m] * np.int64(nf[e_noise + dim + token])
                bn = nf[e_noise:e_noise + dim]
                for j in range(dim):
                    x[m, j] = cpu_clip8(np.int64(row[j]) + ((am * np.int64(bn[j])) >> shift))
            else:
                for j in range(dim):
                    x[m, j] = cpu_clip8(np.int64(row[j]))
        for layer in range(n_layer):
            ids = layer_ids[layer]
            for m in range(count):
                for j in range(dim):
                    s[m, j] = states[layer, start + m, j]
            _l1_norm(x, count, vec, tensors[ids[0], 5], dim, h_in)
            _matmul(h_in, count, packed, ids[1], tensors, noise, pair_of, sign_of, shift, perturbed, divide, acc,
                    noise_dot, a)
            _matmul(s, count, packed, ids[2], tensors, noise, pair_of, sign_of, shift, perturbed, divide, acc,
                    noise_dot, b)
            slot = tensors[ids[5], 5]
            for m in range(count):  # forget gate: f = clip(xf + sf + bf), fh = ((f + 127) * s) >> 8
                for j in range(dim):
                    v = min(max(np.int64(a[m, j]) + np.int64(b[m, j]) + np.int64(vec[m, slot, j]), -MAX8), MAX8)
                    f[m, j] = v
                    fh[m, j] = ((v + MAX8) * np.int64(s[m, j])) >> 8
            _matmul(h_in, count, packed, ids[3], tensors, noise, pair_of, sign_of, shift, perturbed, divide, acc,
                    noise_dot, a)
            _matmul(fh, count, packed, ids[4], tensors, noise, pair_of, sign_of, shift, perturbed, divide, acc,
                    noise_dot, b)
            slot = tensors[ids[6], 5]
            for m in range(count):  # h = s + (((f + 127) * (clip(xh + fhh + bh) - s)) >> 8); x += h
                for j in range(dim):
                    hh = min(max(np.int64(a[m, j]) + np.int64(b[m, j]) + np.int64(vec[m, slot, j]), -MAX8), MAX8)
                    sv = np.int64(s[m, j])
                    h = sv + (((np.int64(f[m, j]) + MAX8) * (hh - sv)) >> 8)
                    states[layer, start + m, j] = h
                    x[m, j] = min(max(np.int64(x[m, j]) + h, -MAX8), MAX8)
            _l1_norm(x, count, vec, tensors[ids[7], 5], dim, h_in)
            _matmul(h_in, count, packed, ids[8], tensors, noise, pair_of, sign_of, shift, perturbed, divide, acc,
                    noise_dot, up)
            _matmul(up, count, packed, ids[9], tensors, noise, pair_of, sign_of, shift, perturbed, divide, acc,
                    noise_dot, a)
            for m in range(count):
                for j in range(dim):
                    x[m, j] = min(max(np.int64(x[m, j]) + np.int64(a[m, j]), -MAX8), MAX8)
        _l1_norm(x, count, vec, tensors[ln_out, 5], dim, h_in)
        _matmul(h_in, count, packed, head, tensors, noise, pair_of, sign_of, shift, perturbed, divide, acc, noise_dot,
                logits)
        for m in range(count):  # log-likelihood of the next byte (int_math)
            sum_exp = 0
            for v in range(VOCAB):
                sum_exp += EXP2[np.int64(logits[m, v]) + 128]
            target = np.int64(windows[start + m, t + 1])
            total[start + m] += np.int64(logits[m, target]) + 128 - (cpu_floor_log2_x16(sum_exp) - 64)


@numba.njit(parallel=True, cache=True)
def egg_epoch_tiles(params, packed, windows, states, prefixes, first_member, shift, perturbed, tensors, divide,
                    layer_ids, head_ids, gain_row, scaled, tile, total):
    """Every member of the slice through the epoch, tiles of `tile` members in parallel."""
    members = windows.shape[0]
    for i in numba.prange((members + tile - 1) // tile):
        start = i * tile
        _tile(params, packed, windows, states, prefixes, first_member, start, min(tile, members - start), shift,
              perturbed, tensors, divide, layer_ids, head_ids, gain_row, scaled, total)


def tensor_table(layout):
    """int64 (n_tensors, 8) per tensor id: kind (0 vector, 1 matrix or embedding), offset in params,
    d_in (a vector's n), offset of its noise in a pair's noise row, noise width (d_in + d_out or 2n),
    slot among the vectors (-1), offset of its panels (-1 unless a matrix), d_out; and the packed size."""
    rows, noise_at, slot, panel_at = [], 0, 0, 0
    for _name, shape, kind, offset in layout:
        d_in, d_out = shape[-1], shape[0]
        width = 2 * d_in if kind == "vector" else d_in + d_out
        panels = -1
        if kind == "matrix":
            panels = panel_at
            panel_at += -(-d_out // COLS) * COLS * -(-d_in // 2) * 2
        rows.append((0 if kind == "vector" else 1, offset, d_in, noise_at, width, slot if kind == "vector" else -1,
                     panels, d_out))
        noise_at += width
        slot += kind == "vector"
    return np.array(rows, np.int64), panel_at


def divide_row(d_in):
    """How a matmul of width d_in ends: log2 of its divisor (-1 if not a power of two), the divisor,
    and 1 where its rank-1 term fits int32 (|x| <= 128, |noise| <= 55)."""
    d = matmul_divisor(d_in)
    return d.bit_length() - 1 if d & (d - 1) == 0 else -1, d, int(d_in * 128 * 55 * 55 < 2**31)


def tile_size(members):
    """TILE, or less so that every thread gets a tile; a multiple of ROWS."""
    per_thread = -(-members // numba.get_num_threads())
    return min(TILE, max(ROWS, -(-per_thread // ROWS) * ROWS))


def gain_row(tensors, layout, gains):
    """The model's gains laid out as a pair's noise row (tensor_table): a vector's a2 half at 64."""
    row = np.full(tensors[-1, 3] + tensors[-1, 4], GAIN_ONE, np.uint8)
    for t, at in enumerate(gain_offsets(layout)[0]):
        width = tensors[t, 2] if tensors[t, 0] == 0 else tensors[t, 4]
        row[tensors[t, 3]:tensors[t, 3] + width] = gains[at:at + width]
    return row


def run_epoch(params, windows, states, prefixes, first_member, sigma_shift, perturbed, layout, layer_ids, head_ids,
              gains=None):
    """egg_epoch on the CPU for a model of `layout` (egg_layout); layer_ids: per layer the tensor ids
    of ln1, wf, uf, wh, uh, bf, bh, ln2, up, down; head_ids: embedding, ln_out, head; gains: None or
    the model's noise gains (noise.gains)."""
    if not (states.dtype == np.int8 and states.flags.c_contiguous):
        raise ValueError("egg_epoch updates states in place: they must be a C-contiguous int8 array")
    params = np.ascontiguousarray(params)
    tensors, packed_size = tensor_table(layout)
    divide = np.array([divide_row(int(t[2])) for t in tensors], np.int64)
    packed = np.empty(packed_size, np.int8)
    pack_panels(params, tensors, packed)
    total = np.zeros(windows.shape[0], np.int64)
    egg_epoch_tiles(params, packed, np.ascontiguousarray(windows), states, np.ascontiguousarray(prefixes, np.int64),
                    int(first_member), FIXED_POINT + int(sigma_shift), bool(perturbed), tensors, divide,
                    np.array(layer_ids, np.int64).reshape(-1, 10), np.array(head_ids, np.int64),
                    *kernel_args(None if gains is None else gain_row(tensors, layout, gains)),
                    tile_size(windows.shape[0]), total)
    return total
