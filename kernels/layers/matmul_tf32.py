"""A linear layer and its two gradients on TF32 tensor cores:

    matmul_tf32(x, w)                y = tf32(x) tf32(W)^T, accumulated in fp32    (rows, out) = (rows, in) (out, in)^T
    matmul_backward_tf32(dy, x, w)   dx = tf32(dy) tf32(W),  dW = tf32(dy)^T tf32(x)   (matmul_backward's contract)

tf32(.) rounds to a 10-bit mantissa, to nearest with ties away from zero (cvt.rna.tf32.f32; NumPy:
`mma.round_tf32`). The gradients are the forward kernel's products of transposed copies (a tiled
transpose: the kernel reads both operands along k). The ops are defined on the rounded inputs, so the
references (float64 products of the rounded values), the CPU twins (BLAS fp32 products of the rounded
values) and the kernels agree to fp32 accumulation error (TOLERANCE); the rounding is the op's, not a
backend's.

More in docs/internals.md (kernels/layers/matmul_tf32.py)."""

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Float64Array, FloatArray
from eggnog.kernels.core.cuda_api import F32_2D, allow_dynamic_shared, cuda, device_function, f64, kernel
from eggnog.kernels.core.loads import (
    copy_async_commit,
    copy_async_f32,
    copy_async_v4,
    copy_async_wait,
    load_shared_tf32_v2,
)
from eggnog.kernels.core.mma import mma_tf32_1688, round_tf32
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import normal32, op, registered
from eggnog.kernels.core.tuning import Tunable
from eggnog.kernels.layers.matmul import check_layer, rounded_cpu_backward, rounded_reference_backward

BLOCK_M, BLOCK_N, BLOCK_K = 256, 192, 32
STAGES = 3  # k slices in flight: one computed, the next ones copied
WAIT = STAGES - 2  # copy groups left in flight when a slice is needed
THREADS = 256
WARPS_N = 4  # 8 warps, 2 x 4
WARP_M, WARP_N = BLOCK_M // 2, BLOCK_N // WARPS_N
M_TILES, N_TILES = WARP_M // 16, WARP_N // 8  # mma tiles of a warp
ACCUMULATORS, B_REGISTERS = M_TILES * N_TILES * 4, N_TILES * 2  # per thread
PITCH = BLOCK_K + 8  # words per shared row (module docstring)
X_WORDS, W_WORDS = BLOCK_M * PITCH, BLOCK_N * PITCH
STAGE_WORDS = X_WORDS + W_WORDS
SHARED_BYTES = 4 * STAGES * STAGE_WORDS
CHUNKS = BLOCK_K // 4  # 16-byte pieces of a row of a slice
TOLERANCE = (1e-5, 1e-5)  # between backends: fp32 accumulation order


def _cases(rng):
    """One element; one slice of 16-byte pieces; two slices element by element (all in flight before the
    loop); two blocks of rows and three slices element by element (the ring turns); two blocks of columns
    and four slices of 16-byte pieces, the last a k tail."""
    for rows, d_in, d_out in ((1, 1, 1), (3, 8, 5), (17, 33, 15), (260, 70, 9), (20, 100, 200)):
        yield normal32(rng, rows, d_in), normal32(rng, d_out, d_in)


@op(cases=_cases, tolerance=TOLERANCE, args={"x": "float[rows, d_in]", "w": "float[d_out, d_in]"})
def reference_matmul_tf32(x: FloatArray, w: FloatArray) -> Float64Array:
    """matmul on TF32 tensor cores: y = tf32(x) tf32(W)^T accumulated in fp32, (rows, d_out) float32
    (float64 products of the rounded values here). What `matmul` runs at precision tf32.

    x: the layer's input (rows, d_in); w: its weights (d_out, d_in). tf32(.) rounds fp32 to
    a 10-bit mantissa, to nearest with ties away from zero (`mma.round_tf32`)."""
    check_layer(x, w)
    return f64(round_tf32(x)) @ f64(round_tf32(w)).T


@op
def cpu_matmul_tf32(x: Float32Array, w: Float32Array) -> Float32Array:
    check_layer(x, w)
    return np.ascontiguousarray(round_tf32(x) @ round_tf32(w).T)


def _backward_cases(rng):
    """Sizes off the tiles with a k tail; rows past one transpose tile (the forward's cases cover its
    blocks)."""
    for rows, d_in, d_out in ((17, 33, 15), (40, 12, 36)):
        yield normal32(rng, rows, d_out), normal32(rng, rows, d_in), normal32(rng, d_out, d_in)


@op(cases=_backward_cases, tolerance=TOLERANCE,
    args={"dy": "float[rows, d_out]", "x": "float[rows, d_in]", "w": "float[d_out, d_in]"})
def reference_matmul_backward_tf32(dy: FloatArray, x: FloatArray, w: FloatArray) -> tuple[Float64Array, Float64Array]:
    """matmul_backward on TF32 tensor cores: (dx, dW) = (tf32(dy) tf32(W), tf32(dy)^T tf32(x)),
    shapes (rows, d_in) and (d_out, d_in), accumulated in fp32. What `matmul_backward` runs at precision tf32.

    dy: the loss's gradient with respect to y = x W^T; x and w: the forward's input and weights, each
    rounded by tf32(.) before the products."""
    return rounded_reference_backward(round_tf32, dy, x, w)


@op
def cpu_matmul_backward_tf32(dy: Float32Array, x: Float32Array, w: Float32Array) -> tuple[Float32Array, Float32Array]:
    return rounded_cpu_backward(round_tf32, dy, x, w)


def _build(block_m, block_n, stages):
    """The forward kernel for output blocks of block_m x block_n and a ring of `stages` k slices (the
    module's constants are the default's): the device functions close over this shape's constants, so
    each shape is its own compiled kernel. Returns (kernel, shared bytes)."""
    BLOCK_M, BLOCK_N, STAGES = block_m, block_n, stages  # the default's names, shadowed
    WAIT = STAGES - 2
    WARP_M, WARP_N = BLOCK_M // 2, BLOCK_N // WARPS_N
    M_TILES, N_TILES = WARP_M // 16, WARP_N // 8
    ACCUMULATORS, B_REGISTERS = M_TILES * N_TILES * 4, N_TILES * 2
    X_WORDS = BLOCK_M * PITCH
    STAGE_WORDS = X_WORDS + BLOCK_N * PITCH
    if M_TILES not in (4, 8) or BLOCK_N % (8 * WARPS_N) or STAGES < 2:
        raise ValueError(f"no forward kernel of {block_m} x {block_n} x {stages}")

    @device_function
    def _copy_rows(src, base, count, k0, sh, at, vector, tid):
        """Rows base..base+count-1, columns k0..k0+BLOCK_K-1 of src to shared rows of PITCH words at `at`, as
        asynchronous copies with zeros outside src: 16-byte pieces when rows are a multiple of 4 floats (8
        threads a row, THREADS // 8 rows apart), else element by element (32 threads a row)."""
        rows, cols = src.shape
        if vector:
            r = tid >> 3
            k = (tid & 7) << 2
            inside = k0 + k < cols
            for _ in range(count * CHUNKS // THREADS):
                full = inside and base + r < rows
                copy_async_v4(sh, at + r * PITCH + k, src, base + r if full else 0, k0 + k if full else 0, full)
                r += THREADS // CHUNKS
        else:
            r = tid >> 5
            k = tid & 31
            inside = k0 + k < cols
            for _ in range(count * BLOCK_K // THREADS):
                full = inside and base + r < rows
                copy_async_f32(sh, at + r * PITCH + k, src, base + r if full else 0, k0 + k if full else 0, full)
                r += THREADS // BLOCK_K


    @device_function
    def _copy_slice(x, w, sh, t, stage, m_base, n_base, vector, tid):
        """k slice t of the block's x and W rows into a stage, as this thread's group of copies."""
        at = stage * STAGE_WORDS
        _copy_rows(x, m_base, BLOCK_M, t * BLOCK_K, sh, at, vector, tid)
        _copy_rows(w, n_base, BLOCK_N, t * BLOCK_K, sh, at + X_WORDS, vector, tid)


    @device_function
    def _k_step(sh, at, bt, acc):
        """One 8-deep k step: M_TILES x N_TILES mma, fragments rounded to TF32 as loaded."""
        b = cuda.local.array(B_REGISTERS, numba.float32)
        for j in range(N_TILES):
            b[2 * j], b[2 * j + 1] = load_shared_tf32_v2(sh, bt + j * 8 * PITCH)
        for i in range(M_TILES):
            a0, a2 = load_shared_tf32_v2(sh, at + i * 16 * PITCH)  # row g at k 2q, 2q + 1
            a1, a3 = load_shared_tf32_v2(sh, at + (i * 16 + 8) * PITCH)  # row g + 8
            for j in range(N_TILES):
                o = (i * N_TILES + j) * 4
                acc[o], acc[o + 1], acc[o + 2], acc[o + 3] = mma_tf32_1688(
                    a0, a1, a2, a3, b[2 * j], b[2 * j + 1], acc[o], acc[o + 1], acc[o + 2], acc[o + 3])


    @device_function
    def _slice(x, w, sh, t, slices, stage, bases, vector, tid, words, acc):
        """One k slice: wait for it and copy slice t + STAGES - 1 into the stage freed by slice t - 1, then its
        4 k steps (written out: unrolled); returns the next stage. bases: the tile's (m_base, n_base);
        words: this warp's (at, bt) in a stage."""
        m_base, n_base = bases
        at, bt = words
        copy_async_wait(WAIT)  # slice t has landed (this thread's copies) ...
        cuda.syncthreads()  # ... and everyone's; everyone is done with slice t - 1
        if t + STAGES - 1 < slices:
            _copy_slice(x, w, sh, t + STAGES - 1, stage - 1 if stage > 0 else STAGES - 1, m_base, n_base, vector, tid)
        copy_async_commit()
        base = stage * STAGE_WORDS
        _k_step(sh, base + at, base + bt, acc)
        _k_step(sh, base + at + 8, base + bt + 8, acc)
        _k_step(sh, base + at + 16, base + bt + 16, acc)
        _k_step(sh, base + at + 24, base + bt + 24, acc)
        return stage + 1 if stage < STAGES - 1 else 0


    @device_function
    def _put(y, r, j, v):
        if r < y.shape[0] and j < y.shape[1]:
            y[r, j] = v


    @device_function
    def _store_row(y, acc, i, r, c):
        """Row tile i's accumulators: (r, c + 8 j + 0, 1) and (r + 8, c + 8 j + 0, 1), inside y."""
        for j in range(N_TILES):
            o = (i * N_TILES + j) * 4
            _put(y, r, c + 8 * j, acc[o])
            _put(y, r, c + 8 * j + 1, acc[o + 1])
            _put(y, r + 8, c + 8 * j, acc[o + 2])
            _put(y, r + 8, c + 8 * j + 1, acc[o + 3])


    def matmul_tf32_cuda(x, w, y):
        sh = cuda.shared.array(0, numba.float32)
        tid = cuda.threadIdx.x
        lane = tid & 31
        warp = tid >> 5
        g = lane >> 2
        q = lane & 3
        m_base = cuda.blockIdx.y * BLOCK_M
        n_base = cuda.blockIdx.x * BLOCK_N
        wm = (warp // WARPS_N) * WARP_M
        wn = (warp % WARPS_N) * WARP_N
        at = (wm + g) * PITCH + 2 * q
        bt = X_WORDS + (wn + g) * PITCH + 2 * q
        acc = cuda.local.array(ACCUMULATORS, numba.float32)
        for i in range(ACCUMULATORS):
            acc[i] = np.float32(0.0)
        d_in = x.shape[1]
        slices = (d_in + BLOCK_K - 1) // BLOCK_K
        vector = d_in % 4 == 0
        for t in range(STAGES - 1):
            if t < slices:
                _copy_slice(x, w, sh, t, t, m_base, n_base, vector, tid)
            copy_async_commit()
        stage = 0
        if vector:  # two loops, each with its own copies inlined
            for t in range(slices):
                stage = _slice(x, w, sh, t, slices, stage, (m_base, n_base), True, tid, (at, bt), acc)
        else:
            for t in range(slices):
                stage = _slice(x, w, sh, t, slices, stage, (m_base, n_base), False, tid, (at, bt), acc)
        r = m_base + wm + g
        c = n_base + wn + 2 * q
        _store_row(y, acc, 0, r, c)  # one call per mma row tile, written out: unrolled
        _store_row(y, acc, 1, r + 16, c)
        _store_row(y, acc, 2, r + 32, c)
        _store_row(y, acc, 3, r + 48, c)
        if M_TILES == 8:  # a constant: the other shape compiles without these
            _store_row(y, acc, 4, r + 64, c)
            _store_row(y, acc, 5, r + 80, c)
            _store_row(y, acc, 6, r + 96, c)
            _store_row(y, acc, 7, r + 112, c)

    name = "matmul_tf32_cuda" if (block_m, block_n, stages) == (BLOCK_M_DEFAULT, BLOCK_N_DEFAULT, STAGES_DEFAULT) \
        else f"matmul_tf32_cuda_{block_m}x{block_n}x{stages}"
    matmul_tf32_cuda.__name__ = matmul_tf32_cuda.__qualname__ = name
    compiled = kernel((F32_2D, F32_2D, F32_2D), tensor_cores=True, block=THREADS)(matmul_tf32_cuda)
    return compiled, 4 * STAGES * STAGE_WORDS


BLOCK_M_DEFAULT, BLOCK_N_DEFAULT, STAGES_DEFAULT = BLOCK_M, BLOCK_N, STAGES
VARIANTS = ("256x192x3", "128x192x3", "256x128x3", "256x192x2", "128x128x4")  # BLOCK_M x BLOCK_N x STAGES
DEFAULT = VARIANTS[0]
_FORWARD = {name: _build(*(int(n) for n in name.split("x"))) for name in VARIANTS}
matmul_tf32_cuda = _FORWARD[DEFAULT][0]
# every variant bound by name too: the PTX inventory finds kernels among module attributes
matmul_tf32_cuda_128x192x3 = _FORWARD["128x192x3"][0]
matmul_tf32_cuda_256x128x3 = _FORWARD["256x128x3"][0]
matmul_tf32_cuda_256x192x2 = _FORWARD["256x192x2"][0]
matmul_tf32_cuda_128x128x4 = _FORWARD["128x128x4"][0]


@op
def cuda_matmul_tf32(x: BackendArray, w: BackendArray) -> BackendArray:
    """y on the device, with the block shape tuned for this GPU and (rows, d_in, d_out) (MATMUL_TF32)."""
    check_layer(x, w)
    return matmul_tf32_variant(MATMUL_TF32.choose((x.shape[0], x.shape[1], w.shape[0])), x, w)


def matmul_tf32_variant(variant, x, w, y=None):
    """cuda_matmul_tf32 with the block shape `variant` (one of VARIANTS), into `y` when given."""
    compiled, shared = _FORWARD[variant]
    block_m, block_n, _ = (int(n) for n in variant.split("x"))
    y = cuda.device_array((x.shape[0], w.shape[0]), np.float32) if y is None else y
    grid = ((w.shape[0] + block_n - 1) // block_n, (x.shape[0] + block_m - 1) // block_m)
    allow_dynamic_shared(compiled, (x, w, y), shared)
    compiled[grid, THREADS, 0, shared](x, w, y)
    return y


TILE, TILE_ROWS = 32, 8  # a transpose block: a 32 x 32 tile, 8 rows of 32 threads, 4 elements a thread
PADDED = TILE + 1  # a constant, as shared array shapes must be


@kernel((F32_2D, F32_2D))
def transpose_cuda(a, out):
    """out = a^T through a 32 x 33 shared tile: rows of a are read and rows of out written 128 bytes a
    warp.

    Shared memory: a warp stores 32 consecutive words of a tile row; reading a tile column, lane tx reads
    word 33 tx + c, bank (tx + c) mod 32: the padding word puts the 32 lanes in 32 banks."""
    tile = cuda.shared.array((TILE, PADDED), numba.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    for k in range(0, TILE, TILE_ROWS):
        if r0 + ty + k < a.shape[0] and c0 + tx < a.shape[1]:
            tile[ty + k, tx] = a[r0 + ty + k, c0 + tx]
    cuda.syncthreads()
    for k in range(0, TILE, TILE_ROWS):
        if c0 + ty + k < out.shape[0] and r0 + tx < out.shape[1]:
            out[c0 + ty + k, r0 + tx] = tile[tx, ty + k]


def _transposed(a):
    out = cuda.device_array((a.shape[1], a.shape[0]), np.float32)
    transpose_cuda[((a.shape[1] + TILE - 1) // TILE, (a.shape[0] + TILE - 1) // TILE), (TILE, TILE_ROWS)](a, out)
    return out


@op
def cuda_matmul_backward_tf32(dy: BackendArray, x: BackendArray, w: BackendArray) -> tuple[BackendArray, BackendArray]:
    check_layer(x, w, dy)
    dy_t = _transposed(dy)
    return cuda_matmul_tf32(dy, _transposed(w)), cuda_matmul_tf32(dy_t, _transposed(x))


# ---- tuning (kernels/core/tuning.py: python -m bench.gpu.tune) ------------------------------------------

def _run(variant, sizes):
    rows, d_in, d_out = sizes
    rng = np.random.default_rng(0)
    x = cuda.to_device(normal32(rng, rows, d_in))
    w = cuda.to_device(normal32(rng, d_out, d_in))
    y = cuda.device_array((rows, d_out), np.float32)
    return lambda: matmul_tf32_variant(variant, x, w, y)


MATMUL_TF32 = Tunable("matmul_tf32", VARIANTS, DEFAULT,
                      (("MinGRU LM layer 32768 x 1536 x 1536", (32768, 1536, 1536)),
                       ("MinGRU LM gates 8192 x 512 x 1024", (8192, 512, 1024))),
                      _run, small=((17, 33, 15), (20, 100, 200)))
TUNABLES = (MATMUL_TF32,)


# ---- roofline of the static report (kernels/STATIC_REPORT.md) -------------------------------------

ROOFLINE_WORKLOADS = ("matmul 32768x1536x1536, TF32",)


def roofline(workload, rows=32768, d_in=1536, d_out=1536):
    """Per row of x: each block reads its BLOCK_M rows of x and BLOCK_N rows of W once, so a row of x is read
    d_out / BLOCK_N times and W rows / BLOCK_M times from L2; HBM: x read and y written once, W once per
    launch."""
    l2 = 4 * d_in * (d_out / BLOCK_N) + 4 * d_in * d_out / BLOCK_M + 4 * d_out
    return {
        "name": f"{workload} (matmul_tf32_cuda)",
        "kernel": f"{__name__}.matmul_tf32_cuda",
        "unit": "row",
        "ops_per_unit": 2 * d_in * d_out,
        "compute_limit": "tf32_tensor",
        "reference_limit": "tf32_tensor",
        "bytes_per_unit": {"hbm": 4 * (d_in + d_out) + 4 * d_in * d_out / rows, "l2": l2},
        "basis": (f"{BLOCK_M}x{BLOCK_N} output blocks, {BLOCK_K}-wide k slices copied asynchronously into a "
                  f"{STAGES}-stage ring in shared memory: each block reads its x and W rows once (L2); HBM: x read "
                  "and y written once, W once per launch."),
        "launches": [{"kernel": f"{__name__}.matmul_tf32_cuda", "block": THREADS, "shared": SHARED_BYTES,
                      "grid": ((d_out + BLOCK_N - 1) // BLOCK_N, (rows + BLOCK_M - 1) // BLOCK_M),
                      "args": [{"shape": shape, "dtype": "float32"}
                               for shape in ((rows, d_in), (d_out, d_in), (rows, d_out))]}],
        "units": rows,
        "measured": {"benchmark": "matmul_throughput", "row": {"op": "forward_tf32", "shape": f"{rows}x{d_in}x{d_out}"},
                     "ms_per_run": "ours_ms"},
    }

# the ops of this module by name, for callers: matmul_tf32(kernels, ...)
matmul_tf32 = registered(reference_matmul_tf32)
matmul_backward_tf32 = registered(reference_matmul_backward_tf32)
