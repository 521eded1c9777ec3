"""The fused EGG epoch on the GPU: one launch carries a tile of MEMBERS members through every byte
and layer of the window (no grid-wide synchronisation: members are independent), with the
population matmuls on int8 tensor cores (mma m16n8k32, see `mma`).

More in docs/internals.md (kernels/egg/epoch_cuda.py)."""

import functools

import numba
import numpy as np

from eggnog.kernels.core.cuda_api import (
    BOOL,
    I8_1D,
    I64_1D,
    U8_1D,
    U8_2D,
    allow_dynamic_shared,
    cuda,
    device_function,
    flat,
    kernel,
)
from eggnog.kernels.core.int_simd import abs_sum4, byte_of, dp4a, opaque, pack4, sar32
from eggnog.kernels.core.loads import (
    load_global_rw_v4,
    load_global_s32,
    load_global_v4,
    load_shared_v4,
    store_global_s32,
)
from eggnog.kernels.core.mma import mma_s8_16832
from eggnog.kernels.core.tuning import Tunable
from eggnog.kernels.egg.int_math import EXP2
from eggnog.kernels.egg.layout import DOWN, UF, UH, UP, WF, WH, egg_layout
from eggnog.kernels.egg.member_ops import gpu_floor_log2_x16
from eggnog.kernels.egg.scratch import Scratch
from eggnog.kernels.noise.gains import GAIN_SHIFT, device_args, gain_offsets
from eggnog.kernels.noise.streams import gpu_bits_of, gpu_gaussian_int8, gpu_member_key_a, gpu_member_key_b, gpu_round1

MEMBERS = 64  # rows of a block: 4 mma row tiles
ROWS = 32  # rows of a warp's products in the default kernel (ROW_VARIANTS: 16, 32 or 64)
ROW_VARIANTS = (16, 32, 64)
THREADS = 256
WARPS = THREADS // 32
ROW_THREADS = THREADS // MEMBERS  # threads per member row in element-wise passes (4: tid >> 2, tid & 3)
VOCAB = 256
I32_1D = numba.int32[::1]
I32 = numba.int32  # sizes: a 64-bit scalar would hold two registers for the whole kernel
EXP2_32 = EXP2.astype(np.int32)  # EXP2[255] * 256 < 2^31: row sums fit 32 bits
# int32 scratch in shared memory after the byte buffers: three partial-sum arrays, tokens, EXP2
PART, DOT1, DOT2 = 0, THREADS, 2 * THREADS
TOKENS = 3 * THREADS
EXP2_AT = TOKENS + MEMBERS
# per row, set once per block: 2 x (the byte of its pair's noise row in the block's view) + (1 if its sign is
# -1), and the word of its vectors in theirs. Read from shared memory where they are used, they are not
# hoisted by the compiler into registers held across the kernel (which would not fit 128).
ROW_NOISE = EXP2_AT + VOCAB
ROW_VECS = ROW_NOISE + MEMBERS
# the launch's sizes (_sizes) and the byte offsets of H, U, fh, the state slot, read where they are used for
# the same reason
SIZES = ROW_VECS + MEMBERS
H_AT, U_AT, FH_AT, ST_AT = SIZES + 8, SIZES + 9, SIZES + 10, SIZES + 11
ZERO_AT = SIZES + 12  # holds 0 (see _mma_rows)
SCRATCH_WORDS = SIZES + 13 + (-(SIZES + 13)) % 32  # padded to 128 bytes: the byte buffers start on bank 0
X_OFF = 4 * SCRATCH_WORDS  # the scratch comes first, at a constant address; then X, H and U
MAX_SHARED = 227 * 1024  # per block on sm_90 (opt-in above 48 KiB)
STORE, ADD, FORGET, OUTPUT = 0, 1, 2, 3  # what a matmul stage's epilogue does with its outputs


def pitch_words(width):
    """Row pitch in 32-bit words: at least width / 4, and 16 (mod 32) (see the module docstring)."""
    words = width // 4
    return words + (16 - words) % 32


LOGIT_PITCH = 4 * pitch_words(VOCAB)
# floor(a / m) == (a * RECIPROCALS[m]) >> 32 for 0 <= a < 2^25 and 2 <= m <= 127 (|x * w| <= 127^2, mean
# |x| <= 127): the L1 norm's division as the high word of a 32-bit product (m = 1 divides by nothing)
RECIPROCALS = np.array([0, 0] + [(1 << 32) // m + 1 for m in range(2, 128)], np.uint32)


class Plan:
    """Host-side tables of one (n_layer, dim): noise segments, vector slots, shared-memory layout."""

    def __init__(self, n_layer, dim):
        layout = egg_layout(n_layer, dim)
        self.param_off = np.array([entry[3] for entry in layout], np.int32)
        self.gain_off = gain_offsets(layout)[0]
        self.noise_off = np.zeros(len(layout), np.int32)
        self.noise_cnt = np.zeros(len(layout), np.int32)
        vec_tensor, noise = [], 0
        for tid, (_, shape, kind, _) in enumerate(layout):
            if kind == "vector":
                vec_tensor.append(tid)
            else:
                self.noise_off[tid], self.noise_cnt[tid] = noise, shape[0] + shape[1]
                noise += shape[0] + shape[1]
        self.vec_tensor = np.array(vec_tensor, np.int32)  # slot -> tensor id: ln1, bf, bh, ln2 per layer, ln_out
        self.noise_len = noise
        self.px = 4 * pitch_words(dim)  # bytes per row of X, H and of each GRU slot
        self.pu = max(4 * pitch_words(4 * dim), 3 * self.px, LOGIT_PITCH)  # bytes per row of U
        self.shared_bytes = MEMBERS * (2 * self.px + self.pu) + 4 * SCRATCH_WORDS
        self.shape = (n_layer, dim)


def fused_width(dim):
    """The fused kernel takes dim = 4^k whose buffers fit in shared memory (64 and 256): every matmul
    divisor 16 * sqrt(d_in) is then a power of two, every row a whole number of 64-byte chunks, and the
    rank-1 term fits 32 bits."""
    return dim >= 64 and dim & (dim - 1) == 0 and dim.bit_length() % 2 == 1 and Plan(1, dim).shared_bytes <= MAX_SHARED


# ---- small device functions ---------------------------------------------------------------------

@device_function
def _pair(first_member, m):
    """Pair index of member m relative to the slice's first pair, and the member's sign."""
    g = first_member + m
    return (g >> 1) - (first_member >> 1), 1 - 2 * (g & 1)


@device_function
def _sizes(part):
    """(first_member, m0, members, noise_len, px, n_vectors, log2_dim, perturbed) from the SIZES table."""
    return (part[SIZES], part[SIZES + 1], part[SIZES + 2], part[SIZES + 3], part[SIZES + 4], part[SIZES + 5],
            part[SIZES + 6], part[SIZES + 7] != 0)


@device_function
def _block_noise(part):
    """Where the block's first pair starts in the noise scratch (sizes from the SIZES table)."""
    first_member, m0 = part[SIZES], part[SIZES + 1]
    return np.int64(((first_member + m0) >> 1) - (first_member >> 1)) * part[SIZES + 3]


@device_function
def _block_vecs(part):
    """Where the block's first member starts in the perturbed vectors."""
    return (np.int64(part[SIZES + 1]) * part[SIZES + 5]) << part[SIZES + 6]


@device_function
def _layer_states(part, layer):
    """Where the block's first member's state of a layer starts in the states."""
    return (np.int64(layer) * part[SIZES + 2] + part[SIZES + 1]) << part[SIZES + 6]


@device_function
def _row_noise(part, r):
    """(byte of row r's noise row in the block's view, its sign) from the ROW_NOISE table."""
    v = part[ROW_NOISE + r]
    return np.int32(v >> 1), np.int32(1 - 2 * (v & 1))


@device_function
def _row_sum(part, at, r):
    """The sum of row r's ROW_THREADS partials (one LDS.128)."""
    a, b, c, d = load_shared_v4(part, at + ROW_THREADS * r)
    return np.int32(a + b + c + d)


@device_function
def _clip(v):
    return np.int32(min(max(np.int32(v), np.int32(-127)), np.int32(127)))


@device_function
def _word(base, r, pitch, j0):
    """The 32-bit word of byte base + r * pitch + j0 of shared memory (j0 a multiple of 4): unsigned (no
    wraparound code)."""
    return np.uint32(np.int32(np.int32(base) + np.int32(r * pitch) + j0) >> 2)


@device_function
def _chunk(base, sub, c, chunks):
    """Word index of chunk sub + 4c of a row that starts at word `base` and has `chunks` 16-byte chunks
    (clamped to its last chunk)."""
    return np.int32(base + 4 * min(np.int32(sub + 4 * c), np.int32(chunks - 1)))


@device_function
def _row_chunks(sub, chunks):
    """Word indices of this thread's four chunks of a row that starts at word 0 (_chunk)."""
    return _chunk(0, sub, 0, chunks), _chunk(0, sub, 1, chunks), _chunk(0, sub, 2, chunks), _chunk(0, sub, 3, chunks)


@device_function
def _mt_step(sh32, p, pitch, w, x, c):
    """Two mma k-steps (64 bytes of k) of one 16-row tile whose row g starts at word p, times two 8-column
    weight tiles (w: c0..c3, x: c4..c7; w, x and c are tuples of 4, 4 and 8 words): the A fragment serves
    both."""
    w0, w1, w2, w3 = w
    x0, x1, x2, x3 = x
    c0, c1, c2, c3, c4, c5, c6, c7 = c
    h0, h1, h2, h3 = load_shared_v4(sh32, p)
    h4, h5, h6, h7 = load_shared_v4(sh32, p + 8 * pitch)
    c0, c1, c2, c3 = mma_s8_16832(h0, h4, h1, h5, w0, w1, c0, c1, c2, c3)
    c4, c5, c6, c7 = mma_s8_16832(h0, h4, h1, h5, x0, x1, c4, c5, c6, c7)
    c0, c1, c2, c3 = mma_s8_16832(h2, h6, h3, h7, w2, w3, c0, c1, c2, c3)
    c4, c5, c6, c7 = mma_s8_16832(h2, h6, h3, h7, x2, x3, c4, c5, c6, c7)
    return c0, c1, c2, c3, c4, c5, c6, c7


@device_function
def _weights(w32, wrow, kw, words):
    """A 64-byte k step's weight fragment, zero past the row (d_in = 64 has one step of the two a trip)."""
    z = np.int32(0)
    w0 = w1 = w2 = w3 = z
    if kw < words:
        w0, w1, w2, w3 = load_global_v4(w32, wrow + kw)
    return w0, w1, w2, w3


@device_function
def _mma_rows(sh32, a_word, pitch, w32, w_word, d_in, n0, lane):
    """The 32 x 16 int32 product of 32 rows of a shared buffer (row 0 at word a_word) with output rows
    n0..n0+15 of a weight matrix (row-major (d_out, d_in) from word w_word): 16 values, 8 per row tile.
    The weight rows are fed to the mma columns in an order that gives lane q the four neighbouring output
    columns n0 + 4q .. + 3 (c0, c1, c4, c5 of row g; c2, c3, c6, c7 of row g + 8): the epilogue's loads and
    stores are 4 bytes. The other half of the block's rows reads the same weight fragments again, from L1."""
    g = lane >> 2
    q = lane & 3
    z = np.int32(0)
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = z
    words = np.int32(d_in >> 2)
    # mma column g of the first tile is output n0 + 4 (g >> 1) + (g & 1), of the second that + 2
    wrow = np.int32(w_word + (n0 + 4 * (g >> 1) + (g & 1)) * words + 4 * q)
    xrow = np.int32(wrow + 2 * words)
    arow = np.int32(a_word + g * pitch + 4 * q)
    tile = np.int32(16 * pitch)
    kw = np.int32(0)
    while kw < words:  # two 64-byte steps a trip, all weight loads before the mmas (one latency); 32-bit counters
        w = load_global_v4(w32, wrow + kw)
        x = load_global_v4(w32, xrow + kw)
        u = _weights(w32, wrow, kw + 16, words)
        y = _weights(w32, xrow, kw + 16, words)
        p = np.int32(arow + kw)
        a0, a1, a2, a3, a4, a5, a6, a7 = _mt_step(sh32, p, pitch, w, x, (a0, a1, a2, a3, a4, a5, a6, a7))
        b0, b1, b2, b3, b4, b5, b6, b7 = _mt_step(sh32, p + tile, pitch, w, x, (b0, b1, b2, b3, b4, b5, b6, b7))
        # the second step's shared reads wait for the first step's products (their address depends on one,
        # through a zero the compiler cannot see): not hoisted with the first step's, they fit 128 registers
        p = np.int32(p + 16 + (a0 & sh32[ZERO_AT]))
        a0, a1, a2, a3, a4, a5, a6, a7 = _mt_step(sh32, p, pitch, u, y, (a0, a1, a2, a3, a4, a5, a6, a7))
        b0, b1, b2, b3, b4, b5, b6, b7 = _mt_step(sh32, p + tile, pitch, u, y, (b0, b1, b2, b3, b4, b5, b6, b7))
        kw = opaque(np.int32(kw + 32))  # not unrolled further: more steps' loads would not fit 128 registers
    return a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, b4, b5, b6, b7



@device_function
def _mma_row_tile(sh32, a_word, pitch, w32, w_word, d_in, n0, lane):
    """_mma_rows for one 16-row tile (16 rows a warp): 8 values; each weight fragment serves one tile."""
    g = lane >> 2
    q = lane & 3
    z = np.int32(0)
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = z
    words = np.int32(d_in >> 2)
    wrow = np.int32(w_word + (n0 + 4 * (g >> 1) + (g & 1)) * words + 4 * q)
    xrow = np.int32(wrow + 2 * words)
    arow = np.int32(a_word + g * pitch + 4 * q)
    kw = np.int32(0)
    while kw < words:
        w = load_global_v4(w32, wrow + kw)
        x = load_global_v4(w32, xrow + kw)
        u = _weights(w32, wrow, kw + 16, words)
        y = _weights(w32, xrow, kw + 16, words)
        p = np.int32(arow + kw)
        a0, a1, a2, a3, a4, a5, a6, a7 = _mt_step(sh32, p, pitch, w, x, (a0, a1, a2, a3, a4, a5, a6, a7))
        p = np.int32(p + 16 + (a0 & sh32[ZERO_AT]))  # as in _mma_rows
        a0, a1, a2, a3, a4, a5, a6, a7 = _mt_step(sh32, p, pitch, u, y, (a0, a1, a2, a3, a4, a5, a6, a7))
        kw = opaque(np.int32(kw + 32))
    return a0, a1, a2, a3, a4, a5, a6, a7


@device_function
def _mma_rows4(sh32, a_word, pitch, w32, w_word, d_in, n0, lane):
    """_mma_rows for four 16-row tiles (64 rows a warp): 32 values, each weight fragment serving four
    tiles. One 64-byte k step a trip: four tiles' accumulators leave no registers for a second step's."""
    g = lane >> 2
    q = lane & 3
    z = np.int32(0)
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = z
    c0 = c1 = c2 = c3 = c4 = c5 = c6 = c7 = d0 = d1 = d2 = d3 = d4 = d5 = d6 = d7 = z
    words = np.int32(d_in >> 2)
    wrow = np.int32(w_word + (n0 + 4 * (g >> 1) + (g & 1)) * words + 4 * q)
    xrow = np.int32(wrow + 2 * words)
    arow = np.int32(a_word + g * pitch + 4 * q)
    tile = np.int32(16 * pitch)
    kw = np.int32(0)
    while kw < words:
        w = load_global_v4(w32, wrow + kw)
        x = load_global_v4(w32, xrow + kw)
        p = np.int32(arow + kw)
        a0, a1, a2, a3, a4, a5, a6, a7 = _mt_step(sh32, p, pitch, w, x, (a0, a1, a2, a3, a4, a5, a6, a7))
        b0, b1, b2, b3, b4, b5, b6, b7 = _mt_step(sh32, p + tile, pitch, w, x, (b0, b1, b2, b3, b4, b5, b6, b7))
        c0, c1, c2, c3, c4, c5, c6, c7 = _mt_step(sh32, p + 2 * tile, pitch, w, x, (c0, c1, c2, c3, c4, c5, c6, c7))
        d0, d1, d2, d3, d4, d5, d6, d7 = _mt_step(sh32, p + 3 * tile, pitch, w, x, (d0, d1, d2, d3, d4, d5, d6, d7))
        kw = opaque(np.int32(kw + 16))
    return (a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, b4, b5, b6, b7,
            c0, c1, c2, c3, c4, c5, c6, c7, d0, d1, d2, d3, d4, d5, d6, d7)


MMA_ROWS = {16: _mma_row_tile, 32: _mma_rows, 64: _mma_rows4}  # rows a warp -> its product

@device_function
def _dot_chunk(sh32, nz32, a, b, acc):
    """acc + the dot product of 16 bytes of shared memory (word a) with 16 noise bytes (word b)."""
    x0, x1, x2, x3 = load_shared_v4(sh32, a)
    n0, n1, n2, n3 = load_global_rw_v4(nz32, b)
    return dp4a(x3, n3, dp4a(x2, n2, dp4a(x1, n1, dp4a(x0, n0, acc))))


@device_function
def _row_dots(sh32, part, src, pitch, width, noise8, seg, at, tid):
    """x . B_p times the member's sign, of every row of a shared buffer (src, pitch in bytes), as
    ROW_THREADS partials per row at part[at + ...]; four chunks' loads are in flight at a time; no barrier."""
    if part[SIZES + 7] == 0:  # unperturbed
        return
    nz32 = noise8[_block_noise(part):].view(np.int32)
    r, sub = tid >> 2, tid & 3
    nrow, sign = _row_noise(part, r)
    a = np.int32((src + r * pitch) >> 2)
    b = np.int32((nrow + seg) >> 2)
    chunks = np.int32(width >> 4)
    acc = np.int32(0)
    base = np.int32(0)
    while base < (width >> 2):  # 64 words: one chunk for each thread of the row, four times
        c0 = _chunk(base, sub, 0, chunks)
        c1 = _chunk(base, sub, 1, chunks)
        c2 = _chunk(base, sub, 2, chunks)
        c3 = _chunk(base, sub, 3, chunks)
        acc = _dot_chunk(sh32, nz32, a + c0, b + c0, acc)
        if width >= 256:
            acc = _dot_chunk(sh32, nz32, a + c1, b + c1, acc)
            acc = _dot_chunk(sh32, nz32, a + c2, b + c2, acc)
            acc = _dot_chunk(sh32, nz32, a + c3, b + c3, acc)
        base = opaque(np.int32(base + 64))
    part[at + tid] = np.int32(acc * sign)  # the member's sign here, once, not in every epilogue


@device_function
def _l1_word(x, v, mean_abs, recip):
    """Four outputs of EGG's L1 norm (int_math.l1_norm_value) from a word of x and of the weights:
    floor(x w / mean_abs) as the high word of a 32-bit product with the reciprocal, clipped."""
    out = np.int32(0)
    for k in range(4):
        p = byte_of(x, k) * byte_of(v, k)
        if mean_abs == 0:
            y = np.int32(-1 if p == 0 else -2)
        else:
            a = np.uint32(abs(p) if p >= 0 else abs(p) + mean_abs - 1)  # floor of a negative quotient
            q = np.int32(a if mean_abs == 1 else (np.uint64(a) * np.uint64(recip)) >> np.uint64(32))
            y = _clip(q if p >= 0 else -q)
        out = np.int32(out | (np.int64(y & 255) << (8 * k)))
    return out


@device_function
def _l1_norm_rows(sh32, part, src, dst, pitch, vecs, vec_word, tid):
    """dst = EGG L1 norm of src (byte offsets, pitch in bytes) with each member's vector at word
    vec_word of its row of the block's vectors (barriers inside). The vector's loads are issued before the
    sum."""
    vec32 = vecs[_block_vecs(part):].view(np.int32)
    r, sub = tid >> 2, tid & 3
    log2_dim = part[SIZES + 6]  # read here, not hoisted (see ROW_NOISE)
    dim = np.int32(1 << log2_dim)
    chunks = np.int32(dim >> 4)
    row = np.int32((src + r * pitch) >> 2)
    out = np.int32((dst + r * pitch) >> 2)
    c0, c1, c2, c3 = _row_chunks(sub, chunks)
    vec_word += part[ROW_VECS + r]
    w00, w01, w02, w03 = load_global_rw_v4(vec32, vec_word + c0)
    w10, w11, w12, w13 = load_global_rw_v4(vec32, vec_word + c1)
    w20, w21, w22, w23 = load_global_rw_v4(vec32, vec_word + c2)
    w30, w31, w32, w33 = load_global_rw_v4(vec32, vec_word + c3)
    x00, x01, x02, x03 = load_shared_v4(sh32, row + c0)
    x10, x11, x12, x13 = load_shared_v4(sh32, row + c1)
    x20, x21, x22, x23 = load_shared_v4(sh32, row + c2)
    x30, x31, x32, x33 = load_shared_v4(sh32, row + c3)
    acc = abs_sum4(x03, abs_sum4(x02, abs_sum4(x01, abs_sum4(x00, 0))))
    if dim >= 256:
        acc = abs_sum4(x13, abs_sum4(x12, abs_sum4(x11, abs_sum4(x10, acc))))
        acc = abs_sum4(x23, abs_sum4(x22, abs_sum4(x21, abs_sum4(x20, acc))))
        acc = abs_sum4(x33, abs_sum4(x32, abs_sum4(x31, abs_sum4(x30, acc))))
    part[PART + tid] = acc
    cuda.syncthreads()
    # x again from shared memory rather than held over the barrier (registers)
    x00, x01, x02, x03 = load_shared_v4(sh32, row + c0)
    x10, x11, x12, x13 = load_shared_v4(sh32, row + c1)
    x20, x21, x22, x23 = load_shared_v4(sh32, row + c2)
    x30, x31, x32, x33 = load_shared_v4(sh32, row + c3)
    mean_abs = np.int32(max(_row_sum(part, PART, r), 1) >> log2_dim)
    recip = RECIPROCALS[mean_abs]
    sh32[out + c0] = _l1_word(x00, w00, mean_abs, recip)
    sh32[out + c0 + 1] = _l1_word(x01, w01, mean_abs, recip)
    sh32[out + c0 + 2] = _l1_word(x02, w02, mean_abs, recip)
    sh32[out + c0 + 3] = _l1_word(x03, w03, mean_abs, recip)
    if dim >= 256:
        sh32[out + c1] = _l1_word(x10, w10, mean_abs, recip)
        sh32[out + c1 + 1] = _l1_word(x11, w11, mean_abs, recip)
        sh32[out + c1 + 2] = _l1_word(x12, w12, mean_abs, recip)
        sh32[out + c1 + 3] = _l1_word(x13, w13, mean_abs, recip)
        sh32[out + c2] = _l1_word(x20, w20, mean_abs, recip)
        sh32[out + c2 + 1] = _l1_word(x21, w21, mean_abs, recip)
        sh32[out + c2 + 2] = _l1_word(x22, w22, mean_abs, recip)
        sh32[out + c2 + 3] = _l1_word(x23, w23, mean_abs, recip)
        sh32[out + c3] = _l1_word(x30, w30, mean_abs, recip)
        sh32[out + c3 + 1] = _l1_word(x31, w31, mean_abs, recip)
        sh32[out + c3 + 2] = _l1_word(x32, w32, mean_abs, recip)
        sh32[out + c3 + 3] = _l1_word(x33, w33, mean_abs, recip)
    cuda.syncthreads()


# ---- matmul stages: each warp covers its 16-wide output tiles for its half of the rows ----------------

@functools.cache
def _row_inputs_of(kind):
    """The loads of a row of an output tile for the `kind` epilogue (STORE, ADD, FORGET,
    OUTPUT), compiled for that kind alone."""
    @device_function
    def row_inputs(part, noise8, vecs, states, bases, r, j0, seg_a, bias_at):
        """What row r of an output tile needs from global memory, loaded before the tile's products so that
        the latency of the loads hides behind the k loop: 4 bytes of A (perturbed), of the bias (FORGET,
        OUTPUT) and of the carried state (OUTPUT; 0 where a document starts). `bases`: the block's first byte in
        the noise, the vectors and the layer's states. Sizes are read from the SIZES table here, not held."""
        first_member, m0, members, noise_len, px, n_vectors, log2_dim, perturbed = _sizes(part)
        noise_at, vecs_at, states_at = bases
        a4 = bias = state = np.int32(0)
        if perturbed:
            a4 = load_global_s32(noise8, noise_at, np.int32((part[ROW_NOISE + r] >> 1) + seg_a + j0))
        if kind >= FORGET:
            bias = load_global_s32(vecs, vecs_at, np.int32(4 * part[ROW_VECS + r] + bias_at + j0))
        if kind == OUTPUT and m0 + r < members and part[TOKENS + r] != 0:
            state = load_global_s32(states, states_at, np.int32((r << log2_dim) + j0))
        return a4, bias, state

    return row_inputs


@device_function
def _product(v, ds, a4, k, shift, dshift):
    """Output k of a row: the product plus the rank-1 term (row dot x A[j] >> shift), shifted and clipped."""
    return _clip(sar32(np.int32(v + sar32(np.int32(ds * byte_of(a4, k)), shift)), dshift))


@functools.cache
def _row_outputs_of(kind):
    """The epilogue of a row for `kind`, compiled for that kind alone."""
    @device_function
    def row_outputs(sh32, part, states, states_at, v, inputs, r, j0, out, shifts, ctx):
        """The four outputs of row r (columns j0 .. j0 + 3): rank-1 term, shift, clip, then what the stage does
        (ADD: onto the destination; FORGET: f = clip(x Wf + s Uf + bf) with x Wf in the f slot, and fh =
        ((f + 127) s) >> 8; OUTPUT: h = s + (((f + 127) (clip(x Wh + fh Uh + bh) - s)) >> 8) with x Wh in
        the state slot, into the states and onto the residual). Loads and stores are 4 bytes. v: the row's
        four products; out: (dot_at, dst, dst_pitch) of the stage; shifts: (shift, dshift)."""
        first_member, m0, members, noise_len, px, n_vectors, log2_dim, perturbed = ctx
        v0, v1, v2, v3 = v
        dot_at, dst, dst_pitch = out
        shift, dshift = shifts
        a4, bias, state = inputs
        ds = np.int32(0)
        if perturbed:  # the row dot times the member's sign (shared memory: read here, not held in registers)
            ds = _row_sum(part, dot_at, r)
        y0 = _product(v0, ds, a4, 0, shift, dshift)
        y1 = _product(v1, ds, a4, 1, shift, dshift)
        y2 = _product(v2, ds, a4, 2, shift, dshift)
        y3 = _product(v3, ds, a4, 3, shift, dshift)
        if kind == STORE:
            sh32[_word(dst, r, dst_pitch, j0)] = pack4(y0, y1, y2, y3)
            return
        if kind == ADD:
            at = _word(dst, r, dst_pitch, j0)
            old = sh32[at]
            sh32[at] = pack4(_clip(byte_of(old, 0) + y0), _clip(byte_of(old, 1) + y1), _clip(byte_of(old, 2) + y2),
                             _clip(byte_of(old, 3) + y3))
            return
        # the GRU slots in U: f, fh, the state
        f_at, fh_at = _word(X_OFF + 2 * MEMBERS * px, r, px, j0), _word(X_OFF + 3 * MEMBERS * px, r, px, j0)
        slot = sh32[_word(X_OFF + 4 * MEMBERS * px, r, px, j0)]
        if kind == FORGET:
            xw = sh32[f_at]
            f0 = _clip(byte_of(xw, 0) + y0 + byte_of(bias, 0))
            f1 = _clip(byte_of(xw, 1) + y1 + byte_of(bias, 1))
            f2 = _clip(byte_of(xw, 2) + y2 + byte_of(bias, 2))
            f3 = _clip(byte_of(xw, 3) + y3 + byte_of(bias, 3))
            sh32[f_at] = pack4(f0, f1, f2, f3)
            sh32[fh_at] = pack4(_gated(f0, byte_of(slot, 0)), _gated(f1, byte_of(slot, 1)), _gated(f2, byte_of(slot,
                                                                                                               2)),
                                _gated(f3, byte_of(slot, 3)))
            return
        x_at = _word(X_OFF, r, px, j0)
        f, x = sh32[f_at], sh32[x_at]
        h0 = _mixed(byte_of(f, 0), byte_of(state, 0), byte_of(slot, 0) + y0 + byte_of(bias, 0))
        h1 = _mixed(byte_of(f, 1), byte_of(state, 1), byte_of(slot, 1) + y1 + byte_of(bias, 1))
        h2 = _mixed(byte_of(f, 2), byte_of(state, 2), byte_of(slot, 2) + y2 + byte_of(bias, 2))
        h3 = _mixed(byte_of(f, 3), byte_of(state, 3), byte_of(slot, 3) + y3 + byte_of(bias, 3))
        if m0 + r < members:
            store_global_s32(states, states_at, np.int32((r << log2_dim) + j0), pack4(h0, h1, h2, h3))
        sh32[x_at] = pack4(_clip(byte_of(x, 0) + h0), _clip(byte_of(x, 1) + h1), _clip(byte_of(x, 2) + h2),
                           _clip(byte_of(x, 3) + h3))

    return row_outputs


@device_function
def _gated(f, s):
    """fh = ((f + 127) s) >> 8."""
    return np.int32(np.int32((f + 127) * s) >> 8)


@device_function
def _mixed(f, s, pre):
    """h = s + (((f + 127) (clip(pre) - s)) >> 8)."""
    return np.int32(s + (np.int32((f + 127) * (_clip(pre) - s)) >> 8))


@functools.cache
def _stage_of(kind, rows=ROWS):
    """The matmul stage whose epilogue is `kind`, each warp's products `rows` rows high (16, 32 or 64),
    compiled for that kind and height alone: its branches on them are settled when it compiles."""
    row_inputs = _row_inputs_of(kind)
    row_outputs = _row_outputs_of(kind)
    mma, tiles = MMA_ROWS[rows], rows // 16
    groups = MEMBERS // rows  # the warps of a row group sit side by side: warp & (groups - 1) is the group
    group_mask, group_bits, step = groups - 1, groups.bit_length() - 1, 16 * WARPS // groups

    @device_function
    def stage(sh32, part, arrays, layer, a, w, out, shifts, tid):
        """One matmul for the block's rows: each warp's 16-wide output tiles, each with its epilogue.
        arrays: (params32, noise8, vecs, states); a: (a_off, a_pitch) of the input in shared memory;
        w: (w_off, d_in, d_out, seg) of the weight and its noise; out: (dot_at, dst, dst_pitch, bias_at);
        shifts: (shift, dshift)."""
        params32, noise8, vecs, states = arrays
        a_off, a_pitch = a
        w_off, d_in, d_out, seg = w
        dot_at, dst, dst_pitch, bias_at = out
        lane = tid & 31
        g = lane >> 2
        j_lane = 4 * (lane & 3)
        seg_a = seg + d_in
        warp = tid >> 5
        r0 = np.int32(rows * (warp & group_mask) + g)  # 32 rows: even warps take rows 0..31, odd ones 32..63
        n0 = np.int32(16 * (warp >> group_bits))
        bases = _block_noise(part), _block_vecs(part), _layer_states(part, layer)  # once a stage: 64-bit
        while n0 < d_out:
            j0 = np.int32(n0 + j_lane)
            i0 = row_inputs(part, noise8, vecs, states, bases, r0, j0, seg_a, bias_at)
            i1 = row_inputs(part, noise8, vecs, states, bases, r0 + 8, j0, seg_a, bias_at)
            if tiles >= 2:
                i2 = row_inputs(part, noise8, vecs, states, bases, r0 + 16, j0, seg_a, bias_at)
                i3 = row_inputs(part, noise8, vecs, states, bases, r0 + 24, j0, seg_a, bias_at)
            if tiles == 4:
                i4 = row_inputs(part, noise8, vecs, states, bases, r0 + 32, j0, seg_a, bias_at)
                i5 = row_inputs(part, noise8, vecs, states, bases, r0 + 40, j0, seg_a, bias_at)
                i6 = row_inputs(part, noise8, vecs, states, bases, r0 + 48, j0, seg_a, bias_at)
                i7 = row_inputs(part, noise8, vecs, states, bases, r0 + 56, j0, seg_a, bias_at)
            c = mma(sh32, (a_off >> 2) + (r0 - g) * (a_pitch >> 2), a_pitch >> 2, params32, w_off >> 2, d_in, n0, lane)
            ctx = _sizes(part)  # after the products: not held in registers over them
            # row g of row tile t: c[8t + 0, 1, 4, 5]; row g + 8: c[8t + 2, 3, 6, 7] (columns j0 .. j0 + 3)
            where = (dot_at, dst, dst_pitch)
            row_outputs(sh32, part, states, bases[2], (c[0], c[1], c[4], c[5]), i0, r0, j0, where, shifts, ctx)
            row_outputs(sh32, part, states, bases[2], (c[2], c[3], c[6], c[7]), i1, r0 + 8, j0, where, shifts, ctx)
            if tiles >= 2:
                row_outputs(sh32, part, states, bases[2], (c[8], c[9], c[12], c[13]), i2, r0 + 16, j0, where, shifts,
                             ctx)
                row_outputs(sh32, part, states, bases[2], (c[10], c[11], c[14], c[15]), i3, r0 + 24, j0, where, shifts,
                             ctx)
            if tiles == 4:
                row_outputs(sh32, part, states, bases[2], (c[16], c[17], c[20], c[21]), i4, r0 + 32, j0, where, shifts,
                             ctx)
                row_outputs(sh32, part, states, bases[2], (c[18], c[19], c[22], c[23]), i5, r0 + 40, j0, where, shifts,
                             ctx)
                row_outputs(sh32, part, states, bases[2], (c[24], c[25], c[28], c[29]), i6, r0 + 48, j0, where, shifts,
                             ctx)
                row_outputs(sh32, part, states, bases[2], (c[26], c[27], c[30], c[31]), i7, r0 + 56, j0, where, shifts,
                             ctx)
            n0 = opaque(np.int32(n0 + step))  # the next 16 columns of this warp's row group

    return stage


@functools.cache
def _gate_of(kind, rows=ROWS):
    """The GRU gate whose second product ends in the `kind` epilogue (FORGET or OUTPUT), its stages `rows`
    rows a warp."""
    store, stage = _stage_of(STORE, rows), _stage_of(kind, rows)

    @device_function
    def gate(sh32, part, arrays, layer, offsets, tensors, slots, px, dim, shifts, tid):
        """A GRU gate: H W1 stored at the slot part[dst_at] names, then the slot part[a2_at] names times W2
        added to it in the `kind` epilogue (barriers). offsets: (param_off, noise_off) tables; tensors: the
        ids (t1, t2) of W1, W2; slots: (a2_at, dst_at, bias_at). Sizes and offsets are read where they are
        used (see ROW_NOISE)."""
        noise8 = arrays[1]
        param_off, noise_off = offsets
        t1, t2 = tensors
        a2_at, dst_at, bias_at = slots
        _row_dots(sh32, part, part[H_AT], px, dim, noise8, noise_off[t1], DOT1, tid)
        _row_dots(sh32, part, part[a2_at], px, dim, noise8, noise_off[t2], DOT2, tid)
        cuda.syncthreads()
        store(sh32, part, arrays, layer, (part[H_AT], px), (param_off[t1], dim, dim, noise_off[t1]),
              (DOT1, part[dst_at], px, 0), shifts, tid)
        stage(sh32, part, arrays, layer, (part[a2_at], px), (param_off[t2], dim, dim, noise_off[t2]),
              (DOT2, 0, px, bias_at), shifts, tid)
        cuda.syncthreads()

    return gate




@device_function
def _embed_word(e, b, a, shift):
    """A word of E[token] + ((sign A[token]) * B) >> shift, clipped, from words of E and of B."""
    return pack4(_clip(byte_of(e, 0) + sar32(np.int32(a * byte_of(b, 0)), shift)),
                 _clip(byte_of(e, 1) + sar32(np.int32(a * byte_of(b, 1)), shift)),
                 _clip(byte_of(e, 2) + sar32(np.int32(a * byte_of(b, 2)), shift)),
                 _clip(byte_of(e, 3) + sar32(np.int32(a * byte_of(b, 3)), shift)))


@device_function
def _embed_rows(sh32, part, params32, noise8, x_off, shift, tid):
    """X = each row's (perturbed) embedding of its token; no barrier."""
    first_member, m0, members, noise_len, px, n_vectors, log2_dim, perturbed = _sizes(part)
    r, sub = tid >> 2, tid & 3
    dim = np.int32(1 << log2_dim)
    tok = np.int32(part[TOKENS + r])
    nrow, sign = _row_noise(part, r)
    nz8 = noise8[_block_noise(part):]
    nz32 = nz8.view(np.int32)
    a = np.int32(sign * nz8[nrow + dim + tok]) if perturbed else np.int32(0)
    erow = np.int32((tok << log2_dim) >> 2)
    brow = np.int32(nrow >> 2)
    out = np.int32((x_off + r * px) >> 2)
    for c in range(4):  # constant trips: unrolled, the loads of all four chunks in flight together
        if c == 0 or dim >= 256:
            k = _chunk(0, sub, c, dim >> 4)
            e0, e1, e2, e3 = load_global_v4(params32, erow + k)
            b0 = b1 = b2 = b3 = np.int32(0)
            if perturbed:
                b0, b1, b2, b3 = load_global_rw_v4(nz32, brow + k)
            sh32[out + k] = _embed_word(e0, b0, a, shift)
            sh32[out + k + 1] = _embed_word(e1, b1, a, shift)
            sh32[out + k + 2] = _embed_word(e2, b2, a, shift)
            sh32[out + k + 3] = _embed_word(e3, b3, a, shift)


@device_function
def _load_states(sh32, part, states, layer, st_off, tid):
    """The GRU state slot = the layer's states of each row, 0 where a document starts; no barrier."""
    first_member, m0, members, noise_len, px, n_vectors, log2_dim, perturbed = _sizes(part)
    r, sub = tid >> 2, tid & 3
    chunks = np.int32(1 << (part[SIZES + 6] - 4))
    keep = m0 + r < members and part[TOKENS + r] != 0
    st32 = states[_layer_states(part, layer):].view(np.int32)
    src = np.int32((r << log2_dim) >> 2)
    out = np.int32((st_off + r * px) >> 2)
    c0, c1, c2, c3 = _row_chunks(sub, chunks)
    z = np.int32(0)
    s00 = s01 = s02 = s03 = s10 = s11 = s12 = s13 = s20 = s21 = s22 = s23 = s30 = s31 = s32 = s33 = z
    if keep:
        s00, s01, s02, s03 = load_global_rw_v4(st32, src + c0)
        s10, s11, s12, s13 = load_global_rw_v4(st32, src + c1)
        s20, s21, s22, s23 = load_global_rw_v4(st32, src + c2)
        s30, s31, s32, s33 = load_global_rw_v4(st32, src + c3)
    sh32[out + c0], sh32[out + c0 + 1], sh32[out + c0 + 2], sh32[out + c0 + 3] = s00, s01, s02, s03
    if chunks >= 16:
        sh32[out + c1], sh32[out + c1 + 1], sh32[out + c1 + 2], sh32[out + c1 + 3] = s10, s11, s12, s13
        sh32[out + c2], sh32[out + c2 + 1], sh32[out + c2 + 2], sh32[out + c2 + 3] = s20, s21, s22, s23
        sh32[out + c3], sh32[out + c3 + 1], sh32[out + c3 + 2], sh32[out + c3 + 3] = s30, s31, s32, s33


@device_function
def _exp2_word(part, w):
    return (part[EXP2_AT + byte_of(w, 0) + 128] + part[EXP2_AT + byte_of(w, 1) + 128]
            + part[EXP2_AT + byte_of(w, 2) + 128] + part[EXP2_AT + byte_of(w, 3) + 128])


@device_function
def _loglik_partials(sh32, part, u_off, tid):
    """part[PART + tid] = this thread's share of its row's sum of EXP2[logit + 128]; no barrier."""
    r, sub = tid >> 2, tid & 3
    row = np.int32((u_off + r * LOGIT_PITCH) >> 2)
    acc = np.int32(0)
    for c in range(4):  # VOCAB = 256: 16 chunks, 4 per thread
        l0, l1, l2, l3 = load_shared_v4(sh32, row + 4 * (sub + 4 * c))
        acc += _exp2_word(part, l0) + _exp2_word(part, l1) + _exp2_word(part, l2) + _exp2_word(part, l3)
    part[PART + tid] = acc


@device_function
def _add_loglik(sh8, part, windows, out, step, tid):
    """Each row's first thread adds the log-likelihood of the next byte (logits in U) to its member's sum."""
    r = tid >> 2
    first_member, m0, members, noise_len, px, n_vectors, log2_dim, perturbed = _sizes(part)
    if tid & 3 == 0 and m0 + r < members:
        target = np.int32(windows[m0 + r, step + 1])
        y = np.int32(sh8[part[U_AT] + r * LOGIT_PITCH + target]) + 128
        out[m0 + r] += y - (gpu_floor_log2_x16(_row_sum(part, PART, r)) - 64)


# ---- the kernel ---------------------------------------------------------------------------------

def epoch_name(rows):
    """The kernel of `rows` rows a warp: the default keeps the plain name."""
    return "egg_epoch_cuda" if rows == ROWS else f"egg_epoch_cuda_rows{rows}"


SIGNATURE = (I8_1D, I32_1D, U8_2D, I8_1D, I64_1D, I32_1D, I32_1D, I32_1D, I32_1D, I8_1D, I8_1D, I64_1D, I32_1D, I32,
             I32, I32, I32, I32, I32, BOOL, I32, I32, I32, I32, U8_1D, I64_1D, BOOL)


def _epoch_template(rows):
    """The fused epoch kernel with its matmul stages `rows` rows a warp (ROW_VARIANTS), compiled for that
    height alone."""
    store_stage, add_stage = _stage_of(STORE, rows), _stage_of(ADD, rows)
    forget_gate, output_gate = _gate_of(FORGET, rows), _gate_of(OUTPUT, rows)

    def egg_epoch(params8, params32, windows, states, prefixes, param_off, noise_off, noise_cnt, vec_tensor, noise8,
                       vecs, out, exp2, first_member, members, n_layer, dim, log2_dim, shift, perturbed, noise_len,
                       n_vectors, px, pu, gains, gain_off, scaled):
        """One block: MEMBERS members through every byte and layer (see the module docstring), its matmuls
        `rows` rows a warp."""
        sh8 = cuda.shared.array(0, numba.int8)
        sh32 = cuda.shared.array(0, numba.int32)
        tid = cuda.threadIdx.x
        m0 = np.int32(cuda.blockIdx.x * MEMBERS)
        x_off = X_OFF
        part = sh32
        d_shift = np.int32(4 + (log2_dim >> 1))  # divisor 16 * sqrt(dim)
        arrays = (params32, noise8, vecs, states)  # what the stages read and write in global memory
        offsets = (param_off, noise_off)
        shifts = (shift, d_shift)
        r = tid // ROW_THREADS
        sub = tid % ROW_THREADS

        # prelude: this block's noise rows and perturbed vectors, hashed once for the epoch
        for v in range(tid, VOCAB, THREADS):
            part[EXP2_AT + v] = exp2[v]
        if tid == 0:
            part[SIZES], part[SIZES + 1], part[SIZES + 2], part[SIZES + 3] = first_member, m0, members, noise_len
            part[SIZES + 4], part[SIZES + 5], part[SIZES + 6], part[SIZES + 7] = px, n_vectors, log2_dim, perturbed
            # X, H, then U, which holds the GRU slots f (at U), fh and the state
            part[H_AT], part[U_AT] = X_OFF + MEMBERS * px, X_OFF + 2 * MEMBERS * px
            part[FH_AT], part[ST_AT] = X_OFF + 3 * MEMBERS * px, X_OFF + 4 * MEMBERS * px
            part[ZERO_AT] = 0
        if tid < MEMBERS:  # rows past the slice take the last member: computed, never stored
            g = first_member + min(m0 + tid, members - 1)
            part[ROW_NOISE + tid] = np.int32(2 * ((g >> 1) - ((first_member + m0) >> 1)) * noise_len + (g & 1))
            part[ROW_VECS + tid] = np.int32(((min(tid, members - 1 - m0) * n_vectors) << log2_dim) >> 2)
        p_first, _ = _pair(first_member, m0)
        p_last, _ = _pair(first_member, min(m0 + MEMBERS, members) - 1)
        base_pair = first_member >> 1
        if perturbed:
            for pl in range(p_first, p_last + 1):
                for t in range(noise_off.size):
                    if noise_cnt[t] > 0:
                        ka = gpu_member_key_a(prefixes[t], base_pair + pl)
                        kb = gpu_member_key_b(ka)
                        at = pl * noise_len + noise_off[t]
                        for idx in range(tid, noise_cnt[t], THREADS):
                            n = gpu_gaussian_int8(gpu_bits_of(gpu_round1(ka, idx), kb))
                            if scaled:
                                n = (n * np.int64(gains[gain_off[t] + idx])) >> GAIN_SHIFT
                            noise8[at + idx] = n
        for idx in range(tid, MEMBERS * n_vectors * dim, THREADS):
            m = m0 + (idx >> log2_dim) // n_vectors
            slot = (idx >> log2_dim) % n_vectors
            j = idx & (dim - 1)
            if m < members:
                t = vec_tensor[slot]
                v = np.int64(params8[param_off[t] + j])
                if perturbed:
                    pl, sign = _pair(first_member, m)
                    ka = gpu_member_key_a(prefixes[t], base_pair + pl)
                    kb = gpu_member_key_b(ka)
                    a1 = gpu_gaussian_int8(gpu_bits_of(gpu_round1(ka, j), kb))
                    if scaled:
                        a1 = (a1 * np.int64(gains[gain_off[t] + j])) >> GAIN_SHIFT
                    a2 = gpu_gaussian_int8(gpu_bits_of(gpu_round1(ka, dim + j), kb))
                    v += (a1 * a2 * sign) >> shift
                vecs[(m * n_vectors + slot) * dim + j] = min(max(v, -127), 127)
        if sub == 0 and m0 + r < members:
            out[m0 + r] = 0  # the row's log-likelihood, summed over the bytes in place
        cuda.syncthreads()

        # each byte: the embedding, every layer, the head and the log-likelihood of the next byte
        step = np.int32(0)
        while step < windows.shape[1] - 1:
            if tid < MEMBERS:
                part[TOKENS + tid] = np.int32(windows[min(m0 + tid, members - 1), step])
            cuda.syncthreads()
            _embed_rows(sh32, part, params32, noise8, x_off, shift, tid)
            cuda.syncthreads()
            layer = np.int32(0)
            while layer < n_layer:
                lt = np.int32(10 * layer)
                slots = np.int32(4 * layer << log2_dim)  # byte of the layer's first vector in a member's row
                _load_states(sh32, part, states, layer, part[ST_AT], tid)
                _l1_norm_rows(sh32, part, x_off, part[H_AT], px, vecs, slots >> 2, tid)
                # forget gate f, fh; then the new state (into the states and the residual)
                forget_gate(sh32, part, arrays, layer, offsets, (lt + WF, lt + UF), (ST_AT, U_AT, slots + dim), px, dim,
                             shifts, tid)
                output_gate(sh32, part, arrays, layer, offsets, (lt + WH, lt + UH), (FH_AT, ST_AT, slots + 2 * dim), px,
                             dim, shifts, tid)
                # MLP: x = clip(x + down(up(L1(x))))
                _l1_norm_rows(sh32, part, x_off, part[H_AT], px, vecs, (slots + 3 * dim) >> 2, tid)
                _row_dots(sh32, part, part[H_AT], px, dim, noise8, noise_off[lt + UP], DOT1, tid)
                cuda.syncthreads()
                w_up = (param_off[lt + UP], dim, 4 * dim, noise_off[lt + UP])
                store_stage(sh32, part, arrays, layer, (part[H_AT], px), w_up, (DOT1, part[U_AT], pu, 0), shifts, tid)
                cuda.syncthreads()
                _row_dots(sh32, part, part[U_AT], pu, 4 * dim, noise8, noise_off[lt + DOWN], DOT1, tid)
                cuda.syncthreads()
                w_down = (param_off[lt + DOWN], 4 * dim, dim, noise_off[lt + DOWN])
                add_stage(sh32, part, arrays, layer, (part[U_AT], pu), w_down, (DOT1, x_off, px, 0),
                           (shift, np.int32(d_shift + 1)), tid)
                cuda.syncthreads()
                layer = np.int32(layer + 1)
            # head and the log-likelihood of the next byte
            head = 10 * n_layer + 2
            _l1_norm_rows(sh32, part, x_off, part[H_AT], px, vecs, (4 * n_layer << log2_dim) >> 2, tid)
            _row_dots(sh32, part, part[H_AT], px, dim, noise8, noise_off[head], DOT1, tid)
            cuda.syncthreads()
            store_stage(sh32, part, arrays, 0, (part[H_AT], px), (param_off[head], dim, VOCAB, noise_off[head]),
                         (DOT1, part[U_AT], LOGIT_PITCH, 0), shifts, tid)
            cuda.syncthreads()
            _loglik_partials(sh32, part, part[U_AT], tid)
            cuda.syncthreads()
            _add_loglik(sh8, part, windows, out, step, tid)
            cuda.syncthreads()
            step = np.int32(step + 1)


    egg_epoch.__name__ = egg_epoch.__qualname__ = epoch_name(rows)
    return kernel(SIGNATURE, tensor_cores=True, block=THREADS, launch_bounds=(THREADS, 2))(egg_epoch)


# every variant bound at module level (the PTX inventory finds kernels there); the default by its plain name
egg_epoch_cuda_rows16 = _epoch_template(16)
egg_epoch_cuda_rows64 = _epoch_template(64)
egg_epoch_cuda = _epoch_template(ROWS)
EPOCH = {16: egg_epoch_cuda_rows16, ROWS: egg_epoch_cuda, 64: egg_epoch_cuda_rows64}
assert tuple(sorted(EPOCH)) == ROW_VARIANTS

def rows_variant(rows):
    return f"rows{rows}"


def run_epoch(params, windows, states, prefixes, first_member, sigma_shift, perturbed, gains=None, variant=None):
    """Launch the fused epoch on device arrays; returns the (members,) int64 sums on the device. `variant`
    (rows16, rows32, rows64) names the rows a warp of its matmuls; None asks the tuning file (EGG_EPOCH_TUNABLE)
    for this device and (n_layer, dim, members)."""
    n_layer, members, dim = states.shape
    launched = EPOCH[int((variant or EGG_EPOCH_TUNABLE.choose((n_layer, dim, members))).removeprefix("rows"))]
    plan = Plan(n_layer, dim)
    pairs = ((first_member + members - 1) >> 1) - (first_member >> 1) + 1
    scratch = Scratch.of(plan, EXP2_32)
    noise8 = scratch.array("noise", pairs * plan.noise_len if perturbed else 16, np.int8)
    vecs = scratch.array("vectors", members * plan.vec_tensor.size * dim, np.int8)
    out = cuda.device_array(members, np.int64)
    gain_array, scaled = device_args(gains)
    args = (params, params.view(np.int32), windows, flat(states), prefixes, *scratch.tables, noise8, vecs, out,
            scratch.exp2, np.int32(first_member), np.int32(members), np.int32(n_layer), np.int32(dim),
            np.int32(dim.bit_length() - 1), np.int32(4 + sigma_shift), bool(perturbed), np.int32(plan.noise_len),
            np.int32(plan.vec_tensor.size), np.int32(plan.px), np.int32(plan.pu), gain_array, scratch.gain_off,
            scaled)
    allow_dynamic_shared(launched, args, plan.shared_bytes)
    launched[(members + MEMBERS - 1) // MEMBERS, THREADS, 0, plan.shared_bytes](*args)
    return out


TUNED_STEPS = 4  # bytes a tuning launch reads; one where the population is a single block (the simulator's)


def _tuning_launch(variant, sizes):
    """Device inputs of an epoch of (n_layer, dim, members) over TUNED_STEPS bytes, perturbed, and the
    launch of `variant` on them (the tuner's Tunable.run)."""
    n_layer, dim, members = sizes
    steps = TUNED_STEPS if members > MEMBERS else 1
    rng = np.random.default_rng(0)
    layout = egg_layout(n_layer, dim)
    n_params = layout[-1][3] + int(np.prod(layout[-1][1]))
    params = cuda.to_device(rng.integers(-40, 41, n_params).astype(np.int8))
    windows = cuda.to_device(rng.integers(0, 256, (members, steps + 1)).astype(np.uint8))
    states = cuda.to_device(np.zeros((n_layer, members, dim), np.int8))
    prefixes = cuda.to_device(rng.integers(0, 1 << 32, len(layout)).astype(np.int64))
    return lambda: run_epoch(params, windows, states, prefixes, 0, 4, True, variant=variant)


EGG_EPOCH_TUNABLE = Tunable(
    kernel="egg_epoch", variants=tuple(rows_variant(n) for n in ROW_VARIANTS), default=rows_variant(ROWS),
    run=_tuning_launch, problems=(("EGG 6x256, population 32768", (6, 256, 32768)),),
    small=((1, 64, 9),))  # one block of the smallest fused width
TUNABLES = (EGG_EPOCH_TUNABLE,)


# ---- roofline of the static report (kernels/STATIC_REPORT.md) -------------------------------------

ROOFLINE_WORKLOADS = ("EGG 6x256, population 32768", "EGG 6x256, population 32768, unperturbed")


def roofline(workload, n_layer=6, dim=256, members=32768, tokens=100):
    """Operations and bytes per member-token from this kernel's loop structure: each block reads every
    weight once per byte for its MEMBERS members (from L2: the model fits); each pair's noise rows (d_in
    + d_out per matmul; not unperturbed) are read once per byte for both its members, whose rows sit in
    neighbouring threads of the same load instructions (row dots: threads 4r..4r+3 and the next row's;
    epilogue: lanes g and g ^ 1); each member reads its vectors and its states (read and written) once per
    byte. At population
    32768 those per-member scratch arrays (hundreds of MB) stream from HBM. The unperturbed row is plain
    batched inference of the same kernel: the ratio of the two is the static estimate of perturbed /
    plain throughput."""
    perturbed = not workload.endswith("unperturbed")
    layout = egg_layout(n_layer, dim)
    matrices = [shape for _, shape, kind, _ in layout if kind == "matrix"]
    macs = sum(d_out * d_in for d_out, d_in in matrices)
    pair_noise = sum(d_out + d_in for d_out, d_in in matrices) + dim + 1  # + the embedding's
    noise = pair_noise / 2 if perturbed else 0
    per_member = noise + (4 * n_layer + 1) * dim + 2 * n_layer * dim + 2  # vectors, states in and out, 2 bytes
    return {
        "name": f"{workload}: fused epoch (egg_epoch_cuda)",
        "kernel": f"{__name__}.egg_epoch_cuda",
        "unit": "member-token",
        "ops_per_unit": 2 * macs,
        "compute_limit": "int8_tensor",
        "reference_limit": "int8_tensor",
        "bytes_per_unit": {"hbm": per_member, "l2": per_member + macs / MEMBERS},
        "basis": (f"{macs} int8 MACs per member-token on IMMA; weights {macs} B read once per byte per block of "
                  f"{MEMBERS} members (L2); {per_member} B per member-token of "
                  + ("half a pair's noise rows, " if perturbed else "") + "vectors, states and window bytes."),
        "launches": [_launch(n_layer, dim, members, tokens, perturbed)],
        "units": members * tokens,
        "measured": {"benchmark": f"eggroll_throughput-egg{n_layer}x{dim}", "row": {"population": members,
                     "tokens": tokens}, "rate": "perturbed_tokens_per_s" if perturbed else "plain_tokens_per_s"},
    }


def _launch(n_layer, dim, members, tokens, perturbed, sigma_shift=4):
    """run_epoch's launch for the static model: array shapes, the tables it reads sizes from, scalars."""
    plan, layout = Plan(n_layer, dim), egg_layout(n_layer, dim)
    params = int(sum(np.prod(shape) for _, shape, _, _ in layout))
    pairs = (members + 1) // 2
    args = [{"shape": (params,), "dtype": "int8"}, {"shape": (params // 4,), "dtype": "int32"},
            {"shape": (members, tokens + 1), "dtype": "uint8"}, {"shape": (n_layer * members * dim,), "dtype": "int8"},
            {"shape": (len(layout),), "dtype": "int64"}, plan.param_off, plan.noise_off, plan.noise_cnt,
            plan.vec_tensor, {"shape": (pairs * plan.noise_len if perturbed else 16,), "dtype": "int8"},
            {"shape": (members * plan.vec_tensor.size * dim,), "dtype": "int8"},
            {"shape": (members,), "dtype": "int64"},
            EXP2_32, 0, members, n_layer, dim, dim.bit_length() - 1, 4 + sigma_shift, perturbed, plan.noise_len,
            plan.vec_tensor.size, plan.px, plan.pu, np.zeros(1, np.uint8), plan.gain_off, False]
    return {"kernel": f"{__name__}.egg_epoch_cuda", "grid": (members + MEMBERS - 1) // MEMBERS, "block": THREADS,
            "shared": plan.shared_bytes, "args": args}
