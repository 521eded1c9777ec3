"""A linear layer and its two gradients on bf16 tensor cores:

    matmul_bf16(x, w)                y = bf16(x) bf16(W)^T                (rows, out) = (rows, in) (out, in)^T
    matmul_backward_bf16(dy, x, w)   dx = bf16(dy) bf16(W),  dW = bf16(dy)^T bf16(x)      (matmul_backward's contract)

all accumulated in fp32. bf16(.) rounds fp32 to an 8-bit significand, to nearest with ties to even
(cvt.rn.bf16x2.f32; NumPy: `mma.round_bf16`: subnormals kept, overflow to inf, NaN stays NaN). The ops
are defined on the rounded inputs, so the reference (float64 products of the rounded values), the CPU
twins (BLAS fp32 products of the rounded values) and the kernels agree to fp32 accumulation error
(TOLERANCE); the rounding is the op's, not a backend's.

More in docs/internals.md (kernels/layers/matmul_bf16.py)."""

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Float64Array, FloatArray
from eggnog.kernels.core.cpu_products import product
from eggnog.kernels.core.cuda_api import F32_2D, cuda, device_function, f64, kernel
from eggnog.kernels.core.loads import load_global_v4, load_shared_v4, store_shared_f32x4
from eggnog.kernels.core.mma import mma_bf16_16816, pack_bf16x2, round_bf16
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import normal32, op, registered
from eggnog.kernels.core.tuning import Tunable
from eggnog.kernels.layers.matmul import check_layer, rounded_cpu_backward, rounded_reference_backward

BLOCK_M, BLOCK_N, BLOCK_K = 128, 256, 16
THREADS = 256
WORDS = BLOCK_K // 2  # bf16 pairs in a row of a slice
TOLERANCE = (1e-5, 1e-5)  # between backends: fp32 accumulation order


def _shapes():
    """(rows, in, out): one element; sizes off every tile with k tails; rows over two blocks; whole blocks
    of the forward (rows 128, out 256) and of each gradient, with two full 16-deep slices and a tail."""
    return ((1, 1, 1), (17, 33, 15), (130, 20, 9), (128, 40, 256), (128, 256, 40), (40, 256, 128))


def _matmul_cases(rng):
    for rows, d_in, d_out in _shapes()[:4]:
        yield normal32(rng, rows, d_in), normal32(rng, d_out, d_in)


def _backward_cases(rng):
    for rows, d_in, d_out in _shapes()[:3] + _shapes()[4:]:
        yield normal32(rng, rows, d_out), normal32(rng, rows, d_in), normal32(rng, d_out, d_in)


@op(cases=_matmul_cases, tolerance=TOLERANCE, args={"x": "float[rows, d_in]", "w": "float[d_out, d_in]"})
def reference_matmul_bf16(x: FloatArray, w: FloatArray) -> Float64Array:
    """matmul on bf16 tensor cores: y = bf16(x) bf16(W)^T accumulated in fp32, (rows, d_out) float32
    (float64 products of the rounded values here). What `matmul` runs at precision bf16.

    x: the layer's input (rows, d_in); w: its weights (d_out, d_in). bf16(.) rounds fp32 to
    an 8-bit significand, to nearest with ties to even (`mma.round_bf16`)."""
    check_layer(x, w)
    return f64(round_bf16(x)) @ f64(round_bf16(w)).T


@op(cases=_backward_cases, tolerance=TOLERANCE,
    args={"dy": "float[rows, d_out]", "x": "float[rows, d_in]", "w": "float[d_out, d_in]"})
def reference_matmul_backward_bf16(dy: FloatArray, x: FloatArray, w: FloatArray) -> tuple[Float64Array, Float64Array]:
    """matmul_backward on bf16 tensor cores: (dx, dW) = (bf16(dy) bf16(W), bf16(dy)^T bf16(x)),
    shapes (rows, d_in) and (d_out, d_in), accumulated in fp32. What `matmul_backward` runs at precision bf16.

    dy: the loss's gradient with respect to y = x W^T; x and w: the forward's input and weights, each
    rounded by bf16(.) before the products."""
    return rounded_reference_backward(round_bf16, dy, x, w)


@op
def cpu_matmul_bf16(x: Float32Array, w: Float32Array) -> Float32Array:
    check_layer(x, w)
    return product(round_bf16(x), round_bf16(w).T)


@op
def cpu_matmul_backward_bf16(dy: Float32Array, x: Float32Array, w: Float32Array) -> tuple[Float32Array, Float32Array]:
    return rounded_cpu_backward(round_bf16, dy, x, w)


# ---- staging: a slice of A or B into its shared tile as bf16 pairs --------------------------------------

@device_function
def _word_at(r, w, is_b):
    """The shared word of tile row r, pair w (module docstring): A interleaves the row pair's two rows word
    by word, B pair of words by pair of words."""
    h = (r >> 3) & 1
    at = (((r >> 4) << 3) + (r & 7)) * 16
    return at + 4 * (w >> 1) + 2 * h + (w & 1) if is_b else at + 2 * w + h


@device_function
def _load_unit(src, trans, base, k0, e):
    """Unit e of a slice: 8 values by two 128-bit loads. Untransposed: rows r, r + 8 of row pair e // 4,
    columns 4 (e % 4) .. + 3; transposed: k rows 2 (e % 8), + 1 of 4 tile rows from 4 (e // 8)."""
    if trans:
        k = k0 + 2 * (e & 7)
        n = base + ((e >> 3) << 2)
        u0, u1, u2, u3 = load_global_v4(src, k, n)
        v0, v1, v2, v3 = load_global_v4(src, k + 1, n)
    else:
        p = e >> 2
        r = base + ((p >> 3) << 4) + (p & 7)
        k = k0 + ((e & 3) << 2)
        u0, u1, u2, u3 = load_global_v4(src, r, k)
        v0, v1, v2, v3 = load_global_v4(src, r + 8, k)
    return u0, u1, u2, u3, v0, v1, v2, v3


@device_function
def _store_unit(tile, off, trans, is_b, e, u):
    """Unit e's values (_load_unit's) as bf16 pairs into the tile at word offset `off` (the buffer)."""
    u0, u1, u2, u3, v0, v1, v2, v3 = u
    if trans:  # (n + i, pair w) = (k 2w, 2w + 1 of column n + i)
        n = (e >> 3) << 2
        w = e & 7
        tile[off + _word_at(n, w, is_b)] = pack_bf16x2(u0, v0)
        tile[off + _word_at(n + 1, w, is_b)] = pack_bf16x2(u1, v1)
        tile[off + _word_at(n + 2, w, is_b)] = pack_bf16x2(u2, v2)
        tile[off + _word_at(n + 3, w, is_b)] = pack_bf16x2(u3, v3)
    else:  # row pair e // 4, pairs 2 (e % 4), + 1 of its two rows: four consecutive words
        at = off + (e >> 2) * 16 + ((e & 3) << 2)
        if is_b:
            store_shared_f32x4(tile, at, pack_bf16x2(u0, u1), pack_bf16x2(u2, u3), pack_bf16x2(v0, v1),
                               pack_bf16x2(v2, v3))
        else:
            store_shared_f32x4(tile, at, pack_bf16x2(u0, u1), pack_bf16x2(v0, v1), pack_bf16x2(u2, u3),
                               pack_bf16x2(v2, v3))


def _stager(threads):
    """_stage_checked for blocks of `threads` (a constant of the compiled code)."""

    @device_function
    def _stage_checked(src, trans, is_b, tile, off, base, rows, k0, depth, tid):
        """Tile rows base.. and k0..k0+15 element by element, zeros outside the `rows` x `depth` operand."""
        for i in range(rows * WORDS // threads):
            e = i * threads + tid
            r = e >> 3
            w = e & 7
            k = k0 + 2 * w
            lo = hi = np.float32(0.0)
            if base + r < (src.shape[1] if trans else src.shape[0]):
                if k < depth:
                    lo = src[k, base + r] if trans else src[base + r, k]
                if k + 1 < depth:
                    hi = src[k + 1, base + r] if trans else src[base + r, k + 1]
            tile[off + _word_at(r, w, is_b)] = pack_bf16x2(lo, hi)

    return _stage_checked


# ---- the warp's 64 x 64 tile: one 16-deep k step -----------------------------------------------------

@device_function
def _quad(a, x, y, c):
    """One row tile (a: its 4 words) against four n tiles (two LDS.128 of B, x and y, each b0, b1 of two
    n tiles 8 apart): 4 mma on 16 accumulators."""
    a0, a1, a2, a3 = a
    x0, x1, x2, x3 = x
    y0, y1, y2, y3 = y
    d0, d1, d2, d3 = mma_bf16_16816(a0, a1, a2, a3, x0, x1, c[0], c[1], c[2], c[3])
    d4, d5, d6, d7 = mma_bf16_16816(a0, a1, a2, a3, x2, x3, c[4], c[5], c[6], c[7])
    d8, d9, d10, d11 = mma_bf16_16816(a0, a1, a2, a3, y0, y1, c[8], c[9], c[10], c[11])
    d12, d13, d14, d15 = mma_bf16_16816(a0, a1, a2, a3, y2, y3, c[12], c[13], c[14], c[15])
    return (d0, d1, d2, d3, d4, d5, d6, d7, d8, d9, d10, d11, d12, d13, d14, d15)


@device_function
def _row_tile(sa, at, b, c_lo, c_hi):
    a = load_shared_v4(sa, at)
    c_lo = _quad(a, (b[0], b[1], b[2], b[3]), (b[4], b[5], b[6], b[7]), c_lo)
    c_hi = _quad(a, (b[8], b[9], b[10], b[11]), (b[12], b[13], b[14], b[15]), c_hi)
    return c_lo, c_hi


@device_function
def _k_step(sa, sb, at, bt, c):
    """32 mma: four row tiles (A words at, + 128, ...) by eight n tiles (B words bt, + 128, ...); c holds the
    accumulators as (row tile, n half) 16-tuples."""
    x0, x1, x2, x3 = load_shared_v4(sb, bt)
    y0, y1, y2, y3 = load_shared_v4(sb, bt + 128)
    z0, z1, z2, z3 = load_shared_v4(sb, bt + 256)
    t0, t1, t2, t3 = load_shared_v4(sb, bt + 384)
    b = (x0, x1, x2, x3, y0, y1, y2, y3, z0, z1, z2, z3, t0, t1, t2, t3)
    c0, c1 = _row_tile(sa, at, b, c[0], c[1])
    c2, c3 = _row_tile(sa, at + 128, b, c[2], c[3])
    c4, c5 = _row_tile(sa, at + 256, b, c[4], c[5])
    c6, c7 = _row_tile(sa, at + 384, b, c[6], c[7])
    return c0, c1, c2, c3, c4, c5, c6, c7


@device_function
def _put4(y, r, j, v0, v1, v2, v3):
    """One mma tile's c0..c3 of a lane: (r, j), (r, j + 1), (r + 8, j), (r + 8, j + 1), inside y."""
    if j < y.shape[1]:
        if r < y.shape[0]:
            y[r, j] = v0
        if r + 8 < y.shape[0]:
            y[r + 8, j] = v2
    if j + 1 < y.shape[1]:
        if r < y.shape[0]:
            y[r, j + 1] = v1
        if r + 8 < y.shape[0]:
            y[r + 8, j + 1] = v3


@device_function
def _store(y, c, r, j):
    """16 accumulators of one row tile and n half (n tiles 8 apart) into y."""
    _put4(y, r, j, c[0], c[1], c[2], c[3])
    _put4(y, r, j + 8, c[4], c[5], c[6], c[7])
    _put4(y, r, j + 16, c[8], c[9], c[10], c[11])
    _put4(y, r, j + 24, c[12], c[13], c[14], c[15])


# ---- the kernel template -----------------------------------------------------------------------------

def _template(name, trans_a, trans_b, block_m=BLOCK_M, block_n=BLOCK_N):
    """C = A B^T, A from a (M, K) or (trans_a) a (K, M), B from b (N, K) or (trans_b) b (K, N), in output
    blocks of block_m x block_n (the module's constants are the default's), a warp's 64 x 64 tile each:
    the kernel closes over the shape's constants, so each shape is its own compiled kernel."""
    BLOCK_M, BLOCK_N = block_m, block_n  # the default's names, shadowed
    WARPS_N = BLOCK_N // 64
    THREADS = 32 * (BLOCK_M // 64) * WARPS_N
    N_SHIFT = WARPS_N.bit_length() - 1  # warp // WARPS_N as a shift
    A_UNITS, B_UNITS = 2 * BLOCK_M // THREADS, 2 * BLOCK_N // THREADS  # a slice's 8-value units a thread
    A_WORDS, B_WORDS = BLOCK_M * WORDS, BLOCK_N * WORDS  # one buffer of each tile
    A_SHARED, B_SHARED = 2 * A_WORDS, 2 * B_WORDS  # two buffers
    if BLOCK_M % 64 or WARPS_N not in (1, 2, 4) or A_UNITS not in (1, 2) or B_UNITS not in (1, 2):
        raise ValueError(f"no bf16 matmul kernel of {block_m} x {block_n}")
    _stage_checked = _stager(THREADS)

    def matmul_bf16_kernel(a, b, c):
        sa = cuda.shared.array(A_SHARED, numba.float32)
        sb = cuda.shared.array(B_SHARED, numba.float32)
        tid = cuda.threadIdx.x
        lane = tid & 31
        warp = tid >> 5
        g = lane >> 2
        q = lane & 3
        m_base = cuda.blockIdx.y * BLOCK_M
        n_base = cuda.blockIdx.x * BLOCK_N
        wm = (warp >> N_SHIFT) * 64  # the warp's 64 x 64 tile inside the block
        wn = (warp & (WARPS_N - 1)) * 64
        at = (wm // 2 + g) * 16 + 4 * q
        bt = (wn // 2 + g) * 16 + 4 * q
        m, n = c.shape[0], c.shape[1]
        depth = a.shape[0] if trans_a else a.shape[1]
        # slices wholly inside both operands, whose rows are a multiple of 4 floats, take the vector path
        inside = (m_base + BLOCK_M <= m and n_base + BLOCK_N <= n and a.shape[1] % 4 == 0
                  and b.shape[1] % 4 == 0)
        n_vec = depth // BLOCK_K if inside else 0
        z = np.float32(0.0)
        zeros = (z, z, z, z, z, z, z, z, z, z, z, z, z, z, z, z)
        acc = (zeros, zeros, zeros, zeros, zeros, zeros, zeros, zeros)
        if n_vec > 0:
            _store_unit(sa, 0, trans_a, False, tid, _load_unit(a, trans_a, m_base, 0, tid))
            if A_UNITS == 2:  # a constant: one shape compiles without these
                _store_unit(sa, 0, trans_a, False, tid + THREADS, _load_unit(a, trans_a, m_base, 0, tid + THREADS))
            _store_unit(sb, 0, trans_b, True, tid, _load_unit(b, trans_b, n_base, 0, tid))
            if B_UNITS == 2:
                _store_unit(sb, 0, trans_b, True, tid + THREADS, _load_unit(b, trans_b, n_base, 0, tid + THREADS))
            cuda.syncthreads()
        for s in range(n_vec - 1):  # slice s + 1 in flight while the mma run on slice s
            k1 = (s + 1) * BLOCK_K
            ua = _load_unit(a, trans_a, m_base, k1, tid)
            va = _load_unit(a, trans_a, m_base, k1, tid + THREADS) if A_UNITS == 2 else ua
            ub = _load_unit(b, trans_b, n_base, k1, tid)
            vb = _load_unit(b, trans_b, n_base, k1, tid + THREADS) if B_UNITS == 2 else ub
            now = s & 1
            acc = _k_step(sa, sb, at + now * A_WORDS, bt + now * B_WORDS, acc)
            _store_unit(sa, (1 - now) * A_WORDS, trans_a, False, tid, ua)
            if A_UNITS == 2:
                _store_unit(sa, (1 - now) * A_WORDS, trans_a, False, tid + THREADS, va)
            _store_unit(sb, (1 - now) * B_WORDS, trans_b, True, tid, ub)
            if B_UNITS == 2:
                _store_unit(sb, (1 - now) * B_WORDS, trans_b, True, tid + THREADS, vb)
            cuda.syncthreads()
        if n_vec > 0:
            last = (n_vec - 1) & 1
            acc = _k_step(sa, sb, at + last * A_WORDS, bt + last * B_WORDS, acc)
            cuda.syncthreads()
        for k0 in range(n_vec * BLOCK_K, depth, BLOCK_K):
            _stage_checked(a, trans_a, False, sa, 0, m_base, BLOCK_M, k0, depth, tid)
            _stage_checked(b, trans_b, True, sb, 0, n_base, BLOCK_N, k0, depth, tid)
            cuda.syncthreads()
            acc = _k_step(sa, sb, at, bt, acc)
            cuda.syncthreads()
        r = m_base + wm + g
        j = n_base + wn + 2 * q
        _store(c, acc[0], r, j)
        _store(c, acc[1], r, j + 32)
        _store(c, acc[2], r + 16, j)
        _store(c, acc[3], r + 16, j + 32)
        _store(c, acc[4], r + 32, j)
        _store(c, acc[5], r + 32, j + 32)
        _store(c, acc[6], r + 48, j)
        _store(c, acc[7], r + 48, j + 32)

    if (block_m, block_n) != (BLOCK_M_DEFAULT, BLOCK_N_DEFAULT):
        name = f"{name}_{block_m}x{block_n}"
    matmul_bf16_kernel.__name__ = matmul_bf16_kernel.__qualname__ = name
    return kernel((F32_2D, F32_2D, F32_2D), tensor_cores=True, block=THREADS)(matmul_bf16_kernel)


BLOCK_M_DEFAULT, BLOCK_N_DEFAULT = BLOCK_M, BLOCK_N
VARIANTS = ("128x256", "256x128", "128x128")  # BLOCK_M x BLOCK_N; threads: a warp per 64 x 64 tile
DEFAULT = VARIANTS[0]
_GRADIENTS = {"": (False, False), "_dx": (False, True), "_dw": (True, True)}  # y = x W^T, dx = dy W, dW = dy^T x
_KERNELS = {(g, v): _template(f"matmul_bf16{g}_cuda", *trans, *(int(n) for n in v.split("x")))
            for g, trans in _GRADIENTS.items() for v in VARIANTS}
matmul_bf16_cuda = _KERNELS["", DEFAULT]
matmul_bf16_dx_cuda = _KERNELS["_dx", DEFAULT]
matmul_bf16_dw_cuda = _KERNELS["_dw", DEFAULT]
# every variant bound by name too: the PTX inventory finds kernels among module attributes
matmul_bf16_cuda_256x128 = _KERNELS["", "256x128"]
matmul_bf16_cuda_128x128 = _KERNELS["", "128x128"]
matmul_bf16_dx_cuda_256x128 = _KERNELS["_dx", "256x128"]
matmul_bf16_dx_cuda_128x128 = _KERNELS["_dx", "128x128"]
matmul_bf16_dw_cuda_256x128 = _KERNELS["_dw", "256x128"]
matmul_bf16_dw_cuda_128x128 = _KERNELS["_dw", "128x128"]


def _launch(gradient, variant, a, b, c):
    """C = A B^T of `gradient` ('', '_dx' or '_dw') into c, in variant's blocks."""
    block_m, block_n = (int(n) for n in variant.split("x"))
    m, n = c.shape
    threads = 32 * (block_m // 64) * (block_n // 64)
    _KERNELS[gradient, variant][((n + block_n - 1) // block_n, (m + block_m - 1) // block_m), threads](a, b, c)
    return c


def matmul_bf16_variant(variant, x, w, y=None):
    """cuda_matmul_bf16 in the block shape `variant` (one of VARIANTS), into `y` when given."""
    y = cuda.device_array((x.shape[0], w.shape[0]), np.float32) if y is None else y
    return _launch("", variant, x, w, y)


def matmul_backward_bf16_variants(dx_variant, dw_variant, dy, x, w, dx=None, dw=None):
    """cuda_matmul_backward_bf16 with dx in blocks of `dx_variant` and dW of `dw_variant`, into dx and dw
    when given."""
    dx = cuda.device_array(x.shape, np.float32) if dx is None else dx
    dw = cuda.device_array(w.shape, np.float32) if dw is None else dw
    return _launch("_dx", dx_variant, dy, w, dx), _launch("_dw", dw_variant, dy, x, dw)


@op
def cuda_matmul_bf16(x: BackendArray, w: BackendArray) -> BackendArray:
    """y on the device, in the block shape tuned for this GPU and (rows, d_in, d_out) (MATMUL_BF16)."""
    check_layer(x, w)
    return matmul_bf16_variant(MATMUL_BF16.choose((x.shape[0], x.shape[1], w.shape[0])), x, w)


@op
def cuda_matmul_backward_bf16(dy: BackendArray, x: BackendArray, w: BackendArray) -> tuple[BackendArray, BackendArray]:
    """(dx, dW) on the device, each in the block shape tuned for this GPU and (rows, d_in, d_out)."""
    check_layer(x, w, dy)
    sizes = (x.shape[0], x.shape[1], w.shape[0])
    return matmul_backward_bf16_variants(MATMUL_BF16_DX.choose(sizes), MATMUL_BF16_DW.choose(sizes), dy, x, w)


# ---- tuning (kernels/core/tuning.py: python -m bench.gpu.tune) ------------------------------------------

def _runner(gradient):
    """Tunable.run of one product: its operands for (rows, d_in, d_out) on the device, one launch a call."""

    def run(variant, sizes):
        rows, d_in, d_out = sizes
        rng = np.random.default_rng(0)
        x = cuda.to_device(normal32(rng, rows, d_in))
        w = cuda.to_device(normal32(rng, d_out, d_in))
        dy = cuda.to_device(normal32(rng, rows, d_out))
        a, b, shape = {"": (x, w, (rows, d_out)), "_dx": (dy, w, (rows, d_in)), "_dw": (dy, x, (d_out, d_in))}[gradient]
        c = cuda.device_array(shape, np.float32)
        return lambda: _launch(gradient, variant, a, b, c)

    return run


# the MinGRU BPTT bf16 run (105M: width 1024, batch 8 x 2048): the feed-forward's in and out, the GRU's halves
_PROBLEMS = (("MinGRU BPTT bf16 ff_in 16384 x 1024 x 4096", (16384, 1024, 4096)),
             ("MinGRU BPTT bf16 ff_out 16384 x 4096 x 1024", (16384, 4096, 1024)),
             ("MinGRU BPTT bf16 gru 16384 x 1024 x 1536", (16384, 1024, 1536)))
_SMALL = ((17, 33, 15),)  # one block of every shape, a k tail: launches each kernel
MATMUL_BF16 = Tunable("matmul_bf16", VARIANTS, DEFAULT, _PROBLEMS, _runner(""), small=_SMALL)
MATMUL_BF16_DX = Tunable("matmul_bf16_dx", VARIANTS, DEFAULT, _PROBLEMS, _runner("_dx"), small=_SMALL)
MATMUL_BF16_DW = Tunable("matmul_bf16_dw", VARIANTS, DEFAULT, _PROBLEMS, _runner("_dw"), small=_SMALL)
TUNABLES = (MATMUL_BF16, MATMUL_BF16_DX, MATMUL_BF16_DW)


# ---- roofline of the static report (kernels/STATIC_REPORT.md) -------------------------------------

ROOFLINE_WORKLOADS = ("matmul 32768x1536x1536, bf16",)


def roofline(workload, rows=32768, d_in=1536, d_out=1536):
    """Per row of x: each 128 x 256 block reads its 128 rows of x and 256 rows of W (fp32) once per k slice,
    so a row of x is read d_out / 256 times and W rows / 128 times from L2; HBM: x read and y written
    once, W once per launch."""
    l2 = 4 * d_in * (d_out / BLOCK_N) + 4 * d_in * d_out / BLOCK_M + 4 * d_out
    return {
        "name": f"{workload} (matmul_bf16_cuda)",
        "kernel": f"{__name__}.matmul_bf16_cuda",
        "unit": "row",
        "ops_per_unit": 2 * d_in * d_out,
        "compute_limit": "bf16_tensor",
        "reference_limit": "bf16_tensor",
        "bytes_per_unit": {"hbm": 4 * (d_in + d_out) + 4 * d_in * d_out / rows, "l2": l2},
        "basis": (f"{BLOCK_M}x{BLOCK_N} output blocks, {BLOCK_K}-deep k slices staged in shared memory as bf16: "
                  "each block reads its x and W rows (fp32) once (L2); HBM: x read and y written once, W once "
                  "per launch."),
        "launches": [{"kernel": f"{__name__}.matmul_bf16_cuda", "block": THREADS,
                      "grid": ((d_out + BLOCK_N - 1) // BLOCK_N, (rows + BLOCK_M - 1) // BLOCK_M),
                      "args": [{"shape": shape, "dtype": "float32"}
                               for shape in ((rows, d_in), (d_out, d_in), (rows, d_out))]}],
        "units": rows,
        "measured": {"benchmark": "matmul_throughput", "row": {"op": "forward_bf16", "shape": f"{rows}x{d_in}x{d_out}"},
                     "ms_per_run": "ours_ms"},
    }

# the ops of this module by name, for callers: matmul_backward_bf16(kernels, ...)
matmul_backward_bf16 = registered(reference_matmul_backward_bf16)
matmul_bf16 = registered(reference_matmul_bf16)
