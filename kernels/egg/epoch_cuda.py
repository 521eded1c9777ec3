"""The fused EGG epoch on the GPU: one launch carries a tile of MEMBERS members through every byte
and layer of the window (no grid-wide synchronisation: members are independent), with the
population matmuls on int8 tensor cores (mma m16n8k32, see `mma`).

Per block (MEMBERS = 128 members, THREADS = 256 threads, 8 warps):
- prelude: the noise rows of every matrix for the block's pairs (B = noise[0:d_in], A =
  noise[d_in:d_in + d_out]) and its members' perturbed vectors are hashed once per epoch (and scaled
  by their gains, noise.gains) into global scratch (they are constant over the epoch, so no hash runs
  per byte);
- per byte and layer, in shared memory: the residual X, the normed input H and a region U: the MLP
  hidden, or three GRU slots (f, fh, and the layer's state S, which later holds x Wh). A matmul's
  rank-1 term (x . B_p) * (sign A_p[j]) >> shift, its division (a shift: d_in is a power of 4) and
  its clip run in the epilogue of the mma tile, on the accumulator registers; a gate that sums two
  products stores the first and adds it in the second one's epilogue (same thread, same element);
- each warp owns 8-wide output tiles over all MEMBERS rows, so a weight fragment, loaded once from
  global memory (L2) with a 128-bit non-coherent load, serves 8 mma row tiles.

Shared memory: every buffer has a row pitch of 16 (mod 32) 32-bit words. A fragment load reads 16
bytes (one LDS.128) of rows g and g + 8 at word 4q of a 64-byte k step (g = lane // 4, q = lane % 4).
A 128-bit access is served in four phases of 8 lanes; the 8 lanes of a phase (rows g and g + 1,
q = 0..3) read words 4q..4q+3 of one row (16 banks) and of the next row, 16 banks further, so no
two lanes of a phase share a bank. The k order inside a 64-byte step is permuted alike for A and B
(lane q holds bytes 16q..16q+15 of both), which leaves each dot product unchanged. Element-wise
passes give each member row 2 threads at alternate bytes.

Only the summed log-likelihood of each member leaves the device; states are updated in place.
"""

import numba
import numpy as np

from eggnog.kernels.core.cuda_api import (
    BOOL,
    I8_1D,
    I64,
    I64_1D,
    U8_1D,
    U8_2D,
    allow_dynamic_shared,
    cuda,
    device_function,
    flat,
    kernel,
)
from eggnog.kernels.core.loads import load_global_v4, load_shared_v4
from eggnog.kernels.core.mma import mma_s8_16832
from eggnog.kernels.egg.int_math import EXP2
from eggnog.kernels.egg.layout import DOWN, UF, UH, UP, WF, WH, egg_layout
from eggnog.kernels.egg.member_ops import gpu_clip8, gpu_floor_log2_x16, gpu_gru_gate, gpu_gru_mix
from eggnog.kernels.noise.gains import GAIN_SHIFT, device_args, gain_offsets
from eggnog.kernels.noise.streams import gpu_bits_of, gpu_gaussian_int8, gpu_member_key_a, gpu_member_key_b, gpu_round1

MEMBERS = 128  # rows of a block: 8 mma row tiles
THREADS = 256
WARPS = THREADS // 32
ROW_THREADS = THREADS // MEMBERS  # threads per member row in element-wise passes
VOCAB = 256
I32_1D = numba.int32[::1]
EXP2_32 = EXP2.astype(np.int32)  # EXP2[255] * 256 < 2^31: row sums fit 32 bits
# int32 scratch in shared memory after the byte buffers: three partial-sum arrays, tokens, EXP2
PART, DOT1, DOT2 = 0, THREADS, 2 * THREADS
TOKENS = 3 * THREADS
EXP2_AT = TOKENS + MEMBERS
SCRATCH_WORDS = EXP2_AT + VOCAB
MAX_SHARED = 227 * 1024  # per block on sm_90 (opt-in above 48 KiB)
STORE, ADD, FORGET, OUTPUT = 0, 1, 2, 3  # what a matmul stage's epilogue does with its outputs


def pitch_words(width):
    """Row pitch in 32-bit words: at least width / 4, and 16 (mod 32) (see the module docstring)."""
    words = width // 4
    return words + (16 - words) % 32


LOGIT_PITCH = 4 * pitch_words(VOCAB)
# floor(a / m) == (a * RECIPROCALS[m]) >> 32 for 0 <= a < 2^25 and 1 <= m <= 127 (|x * w| <= 127^2, mean
# |x| <= 127): the L1 norm's division without the 64-bit division routine
RECIPROCALS = np.array([0] + [(1 << 32) // m + 1 for m in range(1, 128)], np.uint64)


class Plan:
    """Host-side tables of one (n_layer, dim): noise segments, vector slots, shared-memory layout."""

    def __init__(self, n_layer, dim):
        layout = egg_layout(n_layer, dim)
        self.param_off = np.array([entry[3] for entry in layout], np.int64)
        self.gain_off = gain_offsets(layout)[0]
        self.noise_off = np.zeros(len(layout), np.int64)
        self.noise_cnt = np.zeros(len(layout), np.int64)
        vec_tensor, noise = [], 0
        for tid, (_, shape, kind, _) in enumerate(layout):
            if kind == "vector":
                vec_tensor.append(tid)
            else:
                self.noise_off[tid], self.noise_cnt[tid] = noise, shape[0] + shape[1]
                noise += shape[0] + shape[1]
        self.vec_tensor = np.array(vec_tensor, np.int64)  # slot -> tensor id: ln1, bf, bh, ln2 per layer, ln_out
        self.noise_len = noise
        self.px = 4 * pitch_words(dim)  # bytes per row of X, H and of each GRU slot
        self.pu = max(4 * pitch_words(4 * dim), 3 * self.px, LOGIT_PITCH)  # bytes per row of U
        self.shared_bytes = MEMBERS * (2 * self.px + self.pu) + 4 * SCRATCH_WORDS


def fused_width(dim):
    """The fused kernel takes dim = 4^k whose buffers fit in shared memory (64 and 256): every matmul
    divisor 16 * sqrt(d_in) is then a power of two, and the rank-1 term fits 32 bits."""
    return dim >= 64 and dim & (dim - 1) == 0 and dim.bit_length() % 2 == 1 and Plan(1, dim).shared_bytes <= MAX_SHARED


# ---- small device functions ---------------------------------------------------------------------

@device_function
def _pair(first_member, m):
    """Pair index of member m relative to the slice's first pair, and the member's sign."""
    g = first_member + m
    return (g >> 1) - (first_member >> 1), 1 - 2 * (g & 1)


@device_function
def _row_sum(part, at, r):
    b = at + r * ROW_THREADS
    return part[b] + part[b + 1]


@device_function
def _mt_step(sh32, p, pitch, w0, w1, w2, w3, c0, c1, c2, c3):
    """Two mma k-steps (64 bytes of k) of one 16-row tile whose row g starts at word p."""
    h0, h1, h2, h3 = load_shared_v4(sh32, p)
    h4, h5, h6, h7 = load_shared_v4(sh32, p + 8 * pitch)
    c0, c1, c2, c3 = mma_s8_16832(h0, h4, h1, h5, w0, w1, c0, c1, c2, c3)
    return mma_s8_16832(h2, h6, h3, h7, w2, w3, c0, c1, c2, c3)


@device_function
def _mma_rows(sh32, a_word, pitch, w32, w_word, d_in, n0, lane):
    """The 128 x 8 int32 product of a shared buffer's rows with output rows n0..n0+7 of a weight matrix
    (row-major (d_out, d_in) from word w_word): 32 values, 4 per row tile (c0..c3 layout)."""
    g = lane >> 2
    q = lane & 3
    z = np.int32(0)
    a0 = a1 = a2 = a3 = b0 = b1 = b2 = b3 = c0 = c1 = c2 = c3 = d0 = d1 = d2 = d3 = z
    e0 = e1 = e2 = e3 = f0 = f1 = f2 = f3 = g0 = g1 = g2 = g3 = h0 = h1 = h2 = h3 = z
    wrow = w_word + (n0 + g) * (d_in >> 2) + 4 * q
    arow = a_word + g * pitch + 4 * q
    tile = 16 * pitch
    for kw in range(0, d_in >> 2, 16):
        w0, w1, w2, w3 = load_global_v4(w32, wrow + kw)
        p = arow + kw
        a0, a1, a2, a3 = _mt_step(sh32, p, pitch, w0, w1, w2, w3, a0, a1, a2, a3)
        b0, b1, b2, b3 = _mt_step(sh32, p + tile, pitch, w0, w1, w2, w3, b0, b1, b2, b3)
        c0, c1, c2, c3 = _mt_step(sh32, p + 2 * tile, pitch, w0, w1, w2, w3, c0, c1, c2, c3)
        d0, d1, d2, d3 = _mt_step(sh32, p + 3 * tile, pitch, w0, w1, w2, w3, d0, d1, d2, d3)
        e0, e1, e2, e3 = _mt_step(sh32, p + 4 * tile, pitch, w0, w1, w2, w3, e0, e1, e2, e3)
        f0, f1, f2, f3 = _mt_step(sh32, p + 5 * tile, pitch, w0, w1, w2, w3, f0, f1, f2, f3)
        g0, g1, g2, g3 = _mt_step(sh32, p + 6 * tile, pitch, w0, w1, w2, w3, g0, g1, g2, g3)
        h0, h1, h2, h3 = _mt_step(sh32, p + 7 * tile, pitch, w0, w1, w2, w3, h0, h1, h2, h3)
    return (a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3, d0, d1, d2, d3,
            e0, e1, e2, e3, f0, f1, f2, f3, g0, g1, g2, g3, h0, h1, h2, h3)


@device_function
def _row_dots(sh8, src, pitch, width, noise8, noise_len, seg, first_member, m0, members, part, at, perturbed, tid):
    """Partial x . B_p of every row (ROW_THREADS partials per row at part[at + ...]); no barrier."""
    if not perturbed:
        return
    r = tid // ROW_THREADS
    pl, _ = _pair(first_member, min(m0 + r, members - 1))
    nb = pl * noise_len + seg
    acc = np.int32(0)
    for j in range(tid % ROW_THREADS, width, ROW_THREADS):
        acc += np.int32(sh8[src + r * pitch + j]) * np.int32(noise8[nb + j])
    part[at + tid] = acc


@device_function
def _l1_value(p, mean_abs, recip):
    """int_math.l1_norm_value without a division: floor(p / mean_abs) as a multiply by the reciprocal."""
    if mean_abs == 0:
        return -1 if p == 0 else -2
    a = abs(p) if p >= 0 else abs(p) + mean_abs - 1  # floor of a negative quotient = -ceil(|p| / m)
    q = np.int64((np.uint64(a) * recip) >> np.uint64(32))
    return gpu_clip8(q if p >= 0 else -q)


@device_function
def _l1_norm_rows(sh8, part, src, dst, pitch, vecs, slot, n_vectors, m0, members, dim, log2_dim, tid):
    """dst = EGG L1 norm of src with each member's vector `slot` (barriers inside)."""
    r = tid // ROW_THREADS
    acc = np.int32(0)
    for j in range(tid % ROW_THREADS, dim, ROW_THREADS):
        acc += abs(np.int32(sh8[src + r * pitch + j]))
    part[PART + tid] = acc
    cuda.syncthreads()
    mean_abs = max(_row_sum(part, PART, r), 1) >> log2_dim
    m = min(m0 + r, members - 1)  # rows past the slice read a valid vector; they are never stored
    vb = (m * n_vectors + slot) * dim
    recip = RECIPROCALS[mean_abs]
    for j in range(tid % ROW_THREADS, dim, ROW_THREADS):
        sh8[dst + r * pitch + j] = _l1_value(np.int32(sh8[src + r * pitch + j]) * np.int32(vecs[vb + j]), mean_abs,
                                             recip)
    cuda.syncthreads()


# ---- matmul stages: each warp covers its 8-wide output tiles for all MEMBERS rows ----------------------

@device_function
def _epilogue(kind, sh8, part, noise8, states, vecs, acc, r, j, d_in, seg, dot_at, dst, dst_pitch, bias_slot,
              n_vectors, x_off, f_off, fh_off, st_off, px, state_at, dim, first_member, m0, members, noise_len, shift,
              dshift, perturbed):
    """One matmul output y (rank-1 term, shift, clip), then what the stage does with it (module docstring)."""
    m = m0 + r
    mc = min(m, members - 1)
    pl, sign = _pair(first_member, mc)
    y = np.int32(acc)
    if perturbed:
        dot = _row_sum(part, dot_at, r)
        y += (np.int32(dot) * np.int32(sign * noise8[pl * noise_len + seg + d_in + j])) >> shift
    y = gpu_clip8(y >> dshift)
    if kind == STORE:
        sh8[dst + r * dst_pitch + j] = y
        return
    if kind == ADD:
        at = dst + r * dst_pitch + j
        sh8[at] = gpu_clip8(np.int32(sh8[at]) + y)
        return
    e = r * px + j
    bias = np.int32(vecs[(mc * n_vectors + bias_slot) * dim + j])
    if kind == FORGET:  # f = clip(x Wf + s Uf + bf), with x Wf stored in the f slot
        f = gpu_clip8(np.int32(sh8[f_off + e]) + y + bias)
        sh8[f_off + e] = f
        sh8[fh_off + e] = gpu_gru_gate(f, np.int32(sh8[st_off + e]))
        return
    # OUTPUT: h = s + (((f + 127) (clip(x Wh + fh Uh + bh) - s)) >> 8), with x Wh stored in the state slot
    hh = gpu_clip8(np.int32(sh8[st_off + e]) + y + bias)
    s = np.int32(states[state_at + m * dim + j]) if m < members and part[TOKENS + r] != 0 else np.int32(0)
    h = gpu_gru_mix(np.int32(sh8[f_off + e]), s, hh)
    if m < members:
        states[state_at + m * dim + j] = h
    sh8[x_off + e] = gpu_clip8(np.int32(sh8[x_off + e]) + h)


@device_function
def _stage(kind, sh8, sh32, part, params32, noise8, states, vecs, a_off, a_pitch, w_off, d_in, d_out, seg, dot_at,
           dst, dst_pitch, bias_slot, n_vectors, x_off, f_off, fh_off, st_off, px, state_at, dim, first_member, m0,
           members, noise_len, shift, dshift, perturbed, tid):
    lane = tid & 31
    g = lane >> 2
    q = lane & 3
    for n0 in range(8 * (tid >> 5), d_out, 8 * WARPS):
        c = _mma_rows(sh32, a_off >> 2, a_pitch >> 2, params32, w_off >> 2, d_in, n0, lane)
        for k in range(32):  # row tile k // 4, element k % 4 of the c0..c3 layout
            _epilogue(kind, sh8, part, noise8, states, vecs, c[k], 16 * (k >> 2) + g + 8 * ((k >> 1) & 1),
                      n0 + 2 * q + (k & 1), d_in, seg, dot_at, dst, dst_pitch, bias_slot, n_vectors, x_off, f_off,
                      fh_off, st_off, px, state_at, dim, first_member, m0, members, noise_len, shift, dshift,
                      perturbed)


@device_function
def _gate(kind, sh8, sh32, part, params32, noise8, states, vecs, w1_off, seg1, w2_off, seg2, a2_off, first_dst,
          bias_slot, n_vectors, h_off, x_off, f_off, fh_off, st_off, px, state_at, dim, first_member, m0, members,
          noise_len, shift, dshift, perturbed, tid):
    """A GRU gate: H W1 stored at first_dst, then A2 W2 added to it in the `kind` epilogue (barriers)."""
    _row_dots(sh8, h_off, px, dim, noise8, noise_len, seg1, first_member, m0, members, part, DOT1, perturbed, tid)
    _row_dots(sh8, a2_off, px, dim, noise8, noise_len, seg2, first_member, m0, members, part, DOT2, perturbed, tid)
    cuda.syncthreads()
    _stage(STORE, sh8, sh32, part, params32, noise8, states, vecs, h_off, px, w1_off, dim, dim, seg1, DOT1, first_dst,
           px, 0, n_vectors, x_off, f_off, fh_off, st_off, px, state_at, dim, first_member, m0, members, noise_len,
           shift, dshift, perturbed, tid)
    _stage(kind, sh8, sh32, part, params32, noise8, states, vecs, a2_off, px, w2_off, dim, dim, seg2, DOT2, 0, px,
           bias_slot, n_vectors, x_off, f_off, fh_off, st_off, px, state_at, dim, first_member, m0, members, noise_len,
           shift, dshift, perturbed, tid)
    cuda.syncthreads()


# ---- the kernel ---------------------------------------------------------------------------------

@kernel((I8_1D, I32_1D, U8_2D, I8_1D, I64_1D, I64_1D, I64_1D, I64_1D, I64_1D, I8_1D, I8_1D, I64_1D, I32_1D, I64, I64,
         I64, I64, I64, I64, BOOL, I64, I64, I64, I64, U8_1D, I64_1D, BOOL),
        tensor_cores=True, block=THREADS)
def egg_epoch_cuda(params8, params32, windows, states, prefixes, param_off, noise_off, noise_cnt, vec_tensor, noise8,
                   vecs, out, exp2, first_member, members, n_layer, dim, log2_dim, shift, perturbed, noise_len,
                   n_vectors, px, pu, gains, gain_off, scaled):
    """One block: MEMBERS members through every byte and layer (see the module docstring)."""
    sh8 = cuda.shared.array(0, numba.int8)
    sh32 = cuda.shared.array(0, numba.int32)
    tid = cuda.threadIdx.x
    m0 = cuda.blockIdx.x * MEMBERS
    x_off, h_off, u_off = 0, MEMBERS * px, 2 * MEMBERS * px
    f_off, fh_off, st_off = u_off, u_off + MEMBERS * px, u_off + 2 * MEMBERS * px  # GRU slots in U
    part = sh32[(u_off + MEMBERS * pu) >> 2:]
    d_shift = 4 + (log2_dim >> 1)  # divisor 16 * sqrt(dim)
    r = tid // ROW_THREADS
    sub = tid % ROW_THREADS

    # prelude: this block's noise rows and perturbed vectors, hashed once for the epoch
    for v in range(tid, VOCAB, THREADS):
        part[EXP2_AT + v] = exp2[v]
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
            vecs[(m * n_vectors + slot) * dim + j] = gpu_clip8(v)
    total = np.int64(0)  # the log-likelihood of this thread's row (kept by the row's first thread)
    cuda.syncthreads()

    for step in range(windows.shape[1] - 1):
        if tid < MEMBERS:
            part[TOKENS + tid] = np.int32(windows[min(m0 + tid, members - 1), step])
        cuda.syncthreads()
        # embedding: E[token] + ((sign A[token]) * B) >> shift
        for idx in range(tid, MEMBERS * dim, THREADS):
            rr = idx >> log2_dim
            j = idx & (dim - 1)
            tok = part[TOKENS + rr]
            v = np.int32(params8[tok * dim + j])
            if perturbed:
                pl, sign = _pair(first_member, min(m0 + rr, members - 1))
                nb = pl * noise_len
                v += (np.int32(sign * noise8[nb + dim + tok]) * np.int32(noise8[nb + j])) >> shift
            sh8[x_off + rr * px + j] = gpu_clip8(v)
        cuda.syncthreads()
        for layer in range(n_layer):
            lt = 10 * layer
            state_at = layer * members * dim
            for idx in range(tid, MEMBERS * dim, THREADS):  # S: the layer's state, reset where a document starts
                rr = idx >> log2_dim
                j = idx & (dim - 1)
                m = m0 + rr
                keep = m < members and part[TOKENS + rr] != 0
                sh8[st_off + rr * px + j] = states[state_at + m * dim + j] if keep else 0
            _l1_norm_rows(sh8, part, x_off, h_off, px, vecs, 4 * layer, n_vectors, m0, members, dim, log2_dim, tid)
            # forget gate f, fh; then the new state (into the states and the residual)
            _gate(FORGET, sh8, sh32, part, params32, noise8, states, vecs, param_off[lt + WF], noise_off[lt + WF],
                  param_off[lt + UF], noise_off[lt + UF], st_off, f_off, 4 * layer + 1, n_vectors, h_off, x_off, f_off,
                  fh_off, st_off, px, state_at, dim, first_member, m0, members, noise_len, shift, d_shift, perturbed,
                  tid)
            _gate(OUTPUT, sh8, sh32, part, params32, noise8, states, vecs, param_off[lt + WH], noise_off[lt + WH],
                  param_off[lt + UH], noise_off[lt + UH], fh_off, st_off, 4 * layer + 2, n_vectors, h_off, x_off,
                  f_off, fh_off, st_off, px, state_at, dim, first_member, m0, members, noise_len, shift, d_shift,
                  perturbed, tid)
            # MLP: x = clip(x + down(up(L1(x))))
            _l1_norm_rows(sh8, part, x_off, h_off, px, vecs, 4 * layer + 3, n_vectors, m0, members, dim, log2_dim,
                          tid)
            _row_dots(sh8, h_off, px, dim, noise8, noise_len, noise_off[lt + UP], first_member, m0, members, part,
                      DOT1, perturbed, tid)
            cuda.syncthreads()
            _stage(STORE, sh8, sh32, part, params32, noise8, states, vecs, h_off, px, param_off[lt + UP], dim,
                   4 * dim, noise_off[lt + UP], DOT1, u_off, pu, 0, n_vectors, x_off, f_off, fh_off, st_off, px,
                   state_at, dim, first_member, m0, members, noise_len, shift, d_shift, perturbed, tid)
            cuda.syncthreads()
            _row_dots(sh8, u_off, pu, 4 * dim, noise8, noise_len, noise_off[lt + DOWN], first_member, m0, members,
                      part, DOT1, perturbed, tid)
            cuda.syncthreads()
            _stage(ADD, sh8, sh32, part, params32, noise8, states, vecs, u_off, pu, param_off[lt + DOWN], 4 * dim,
                   dim, noise_off[lt + DOWN], DOT1, x_off, px, 0, n_vectors, x_off, f_off, fh_off, st_off, px,
                   state_at, dim, first_member, m0, members, noise_len, shift, d_shift + 1, perturbed, tid)
            cuda.syncthreads()
        # head and the log-likelihood of the next byte
        head = 10 * n_layer + 2
        _l1_norm_rows(sh8, part, x_off, h_off, px, vecs, 4 * n_layer, n_vectors, m0, members, dim, log2_dim, tid)
        _row_dots(sh8, h_off, px, dim, noise8, noise_len, noise_off[head], first_member, m0, members, part, DOT1,
                  perturbed, tid)
        cuda.syncthreads()
        _stage(STORE, sh8, sh32, part, params32, noise8, states, vecs, h_off, px, param_off[head], dim, VOCAB,
               noise_off[head], DOT1, u_off, LOGIT_PITCH, 0, n_vectors, x_off, f_off, fh_off, st_off, px, state_at,
               dim, first_member, m0, members, noise_len, shift, d_shift, perturbed, tid)
        cuda.syncthreads()
        acc = np.int32(0)
        for v in range(sub, VOCAB, ROW_THREADS):
            acc += part[EXP2_AT + np.int32(sh8[u_off + r * LOGIT_PITCH + v]) + 128]
        part[PART + tid] = acc
        cuda.syncthreads()
        if sub == 0:
            target = np.int32(windows[min(m0 + r, members - 1), step + 1])
            y = np.int32(sh8[u_off + r * LOGIT_PITCH + target]) + 128
            total += y - (gpu_floor_log2_x16(_row_sum(part, PART, r)) - 64)
        cuda.syncthreads()
    if sub == 0 and m0 + r < members:
        out[m0 + r] = total


def run_epoch(params, windows, states, prefixes, first_member, sigma_shift, perturbed, gains=None):
    """Launch the fused epoch on device arrays; returns the (members,) int64 sums on the device."""
    n_layer, members, dim = states.shape
    plan = Plan(n_layer, dim)
    pairs = ((first_member + members - 1) >> 1) - (first_member >> 1) + 1
    noise8 = cuda.device_array(pairs * plan.noise_len if perturbed else 1, np.int8)
    vecs = cuda.device_array(members * plan.vec_tensor.size * dim, np.int8)
    out = cuda.device_array(members, np.int64)
    tables = [cuda.to_device(a) for a in (plan.param_off, plan.noise_off, plan.noise_cnt, plan.vec_tensor)]
    gain_array, scaled = device_args(gains)
    args = (params, params.view(np.int32), windows, flat(states), prefixes, *tables, noise8, vecs, out,
            cuda.to_device(EXP2_32), np.int64(first_member), np.int64(members), np.int64(n_layer), np.int64(dim),
            np.int64(dim.bit_length() - 1), np.int64(4 + sigma_shift), bool(perturbed), np.int64(plan.noise_len),
            np.int64(plan.vec_tensor.size), np.int64(plan.px), np.int64(plan.pu), gain_array,
            cuda.to_device(plan.gain_off), scaled)
    allow_dynamic_shared(egg_epoch_cuda, args, plan.shared_bytes)
    egg_epoch_cuda[(members + MEMBERS - 1) // MEMBERS, THREADS, 0, plan.shared_bytes](*args)
    return out


# ---- roofline of the static report (kernels/STATIC_REPORT.md) -------------------------------------

ROOFLINE_WORKLOADS = ("EGG 6x256, population 32768", "EGG 6x256, population 32768, unperturbed")


def roofline(workload, n_layer=6, dim=256, members=32768, tokens=100):
    """Operations and bytes per member-token from this kernel's loop structure: each block reads every
    weight once per byte for its MEMBERS members (from L2: the model fits); each pair's noise rows (d_in
    + d_out per matmul; not unperturbed) are read once per byte for both its members, whose rows sit in
    neighbouring lanes of the same load instructions (row dots: threads 2r, 2r + 1; epilogue: lanes g and
    g ^ 1); each member reads its vectors and its states (read and written) once per byte. At population
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
            plan.vec_tensor, {"shape": (pairs * plan.noise_len if perturbed else 1,), "dtype": "int8"},
            {"shape": (members * plan.vec_tensor.size * dim,), "dtype": "int8"},
            {"shape": (members,), "dtype": "int64"},
            EXP2_32, 0, members, n_layer, dim, dim.bit_length() - 1, 4 + sigma_shift, perturbed, plan.noise_len,
            plan.vec_tensor.size, plan.px, plan.pu, np.zeros(1, np.uint8), plan.gain_off, False]
    return {"kernel": f"{__name__}.egg_epoch_cuda", "grid": (members + MEMBERS - 1) // MEMBERS, "block": THREADS,
            "shared": plan.shared_bytes, "args": args}
