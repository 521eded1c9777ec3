"""A linear layer on TF32 tensor cores:

    matmul_tf32(x, w)    y = tf32(x) tf32(W)^T, accumulated in fp32    (rows, out) = (rows, in) (out, in)^T

tf32(.) rounds to a 10-bit mantissa, to nearest with ties away from zero (cvt.rna.tf32.f32; NumPy:
`mma.round_tf32`). The op is defined on the rounded inputs, so the reference (float64 product of the
rounded values), the CPU twin (BLAS fp32 product of the rounded values) and the kernel agree to fp32
accumulation error (TOLERANCE); the rounding is the op's, not a backend's.

Accuracy against the fp32 product of the unrounded inputs: each rounding is within 2^-11 relative,
so every product x_k w_k is within 2^-10 (+ 2^-22) of exact, and
    |y_ij - (x W^T)_ij| <= (2^-10 + 2^-22 + K 2^-24) (|x| |W|^T)_ij          (K = in)
(tests/test_matmul_tf32.py checks this bound and that the error is really of TF32 size). For inputs
of random sign the rounding errors add up like the output does: the error's rms is about 2^-11 sqrt(2/3)
= 4e-4 of the output's rms, whatever K (fp32 alone: about 1e-7).

Where it is used: the float EGGROLL population forward on a GPU (--forward-precision auto). Measured
with bench/tf32_fitness.py (MinGRU 256 x 4 trained 150 steps, 128 members): TF32 moved member losses by
at most 1.3e-4 of their spread, kept every antithetic pair's sign, and the update's direction to
1 - cos < 1e-7. BPTT gradients stay fp32 (matmul, matmul_backward: an optimiser integrates their error
over thousands of steps), as do validation, sampling and the LSTM input projection.

Kernel: a block of 256 threads (8 warps, 2 x 4) computes a 128 x 128 tile of y; each warp a 64 x 32
tile as 4 x 4 mma.m16n8k8 tiles (64 fp32 accumulators per thread). The k loop stages 32-wide slices of
x and W in shared memory, converted to TF32 once on the way in; slices wholly inside both matrices
(rows a multiple of 4 floats) move as 128-bit loads and stores. Inside each 8-deep k step, lane q holds
the PTX ISA's k = q and q + 4 at physical columns 2q and 2q + 1, alike for A and B (a dot product does
not depend on the order of its terms). x is stored in row pairs, x[16 t + g + 8 h, k] at word
(8 t + g) 80 + 2 k + h, so a lane's A fragment (rows g, g + 8 at k 2q, 2q + 1) is one LDS.128 in
register order; W is row-major with a pitch of 40 words, so a B fragment pair is one LDS.64.

Shared memory: fragment loads are conflict-free. An LDS.128 is served in four phases of 8 lanes
(g = 2i, 2i + 1; q = 0..3): words 80 g + 16 s + 4q .. + 3, 16 banks for each g, 80 = 16 (mod 32) apart.
An LDS.64 is served in two phases of 16 lanes (g = 0..3 or 4..7): words 40 g + 2q, + 1 at banks
8 (g mod 4) + 2q, + 1, 32 different banks. Staging W writes 32 consecutive words of one row per phase
(conflict-free). Staging x is 2-way conflicted: the 8 lanes of a 128-bit store phase write words 8 j .. + 3
of one row pair (j = 0..7), and j, j + 4 share banks: each of a warp's 4 STS.128 per k slice takes 8
wavefronts instead of 4, against the warp's 64 mma of that slice.
"""

import numba
import numpy as np

from eggnog.kernels.core.cuda_api import F32_2D, cuda, device_function, f64, kernel
from eggnog.kernels.core.loads import load_global_v4, load_shared_v2, load_shared_v4, store_shared_f32x4
from eggnog.kernels.core.mma import mma_tf32_1688, round_tf32, to_tf32
from eggnog.kernels.core.registry import normal32, op
from eggnog.kernels.layers.matmul import check_layer

BLOCK_M = BLOCK_N = 128
BLOCK_K = 32
PITCH = BLOCK_K + 8  # words per shared row of W (module docstring)
PAIR_PITCH = 2 * BLOCK_K + 16  # words per shared row pair (g, g + 8) of x
X_WORDS = BLOCK_M // 2 * PAIR_PITCH
W_WORDS = BLOCK_N * PITCH
THREADS = 256
TOLERANCE = (1e-5, 1e-5)  # between backends: fp32 accumulation order


def _cases(rng):
    """One element; sizes off the 128 x 128 block and the 32-wide k slice; rows over two blocks; one whole
    block, whose first k slice takes the 128-bit path and its last the checked one."""
    for rows, d_in, d_out in ((1, 1, 1), (17, 33, 15), (130, 70, 9), (128, 40, 128)):
        yield normal32(rng, rows, d_in), normal32(rng, d_out, d_in)


@op(cases=_cases, tolerance=TOLERANCE)
def reference_matmul_tf32(x, w):
    check_layer(x, w)
    return f64(round_tf32(x)) @ f64(round_tf32(w)).T


@op
def cpu_matmul_tf32(x, w):
    check_layer(x, w)
    return np.ascontiguousarray(round_tf32(x) @ round_tf32(w).T)


@device_function
def _stage_checked(src, k0, tile, base, pairs, tid):
    """Rows base..base+127, columns k0..k0+31 of src into a shared tile as TF32, element by element, with
    zeros outside src; `pairs`: the x layout (row pairs), else the W layout (rows of PITCH)."""
    rows, cols = src.shape
    for i in range(BLOCK_M * BLOCK_K // THREADS):
        e = i * THREADS + tid
        r = e >> 5
        k = e & 31
        v = np.float32(0.0)
        if base + r < rows and k0 + k < cols:
            v = src[base + r, k0 + k]
        at = ((r >> 4) * 8 + (r & 7)) * PAIR_PITCH + 2 * k + ((r >> 3) & 1) if pairs else r * PITCH + k
        tile[at] = to_tf32(v)


@device_function
def _stage_w(src, k0, tile, base, inside, tid):
    """Rows base..base+127, columns k0..k0+31 of W into its shared tile (row-major, PITCH) as TF32.
    `inside`: the slice lies wholly inside src, whose rows are a multiple of 4 floats: 128-bit loads and
    stores, no bounds checks; otherwise the checked path."""
    if not inside:
        _stage_checked(src, k0, tile, base, False, tid)
        return
    for i in range(BLOCK_N * BLOCK_K // (4 * THREADS)):
        e = i * THREADS + tid  # 8 threads per row, 4 floats each
        r = e >> 3
        k = (e & 7) << 2
        v0, v1, v2, v3 = load_global_v4(src, base + r, k0 + k)
        store_shared_f32x4(tile, r * PITCH + k, to_tf32(v0), to_tf32(v1), to_tf32(v2), to_tf32(v3))


@device_function
def _stage_x(src, k0, tile, base, inside, tid):
    """The same for x, into row pairs: x[16 t + g + 8 h, k] at word (8 t + g) PAIR_PITCH + 2 k + h."""
    if not inside:
        _stage_checked(src, k0, tile, base, True, tid)
        return
    for i in range(BLOCK_M * BLOCK_K // (8 * THREADS)):
        e = i * THREADS + tid  # 8 threads per row pair, 4 floats of each row
        p = e >> 3
        r = base + ((p >> 3) << 4) + (p & 7)
        k = (e & 7) << 2
        u0, u1, u2, u3 = load_global_v4(src, r, k0 + k)
        v0, v1, v2, v3 = load_global_v4(src, r + 8, k0 + k)
        at = p * PAIR_PITCH + 2 * k
        store_shared_f32x4(tile, at, to_tf32(u0), to_tf32(v0), to_tf32(u1), to_tf32(v1))
        store_shared_f32x4(tile, at + 4, to_tf32(u2), to_tf32(v2), to_tf32(u3), to_tf32(v3))


@device_function
def _row_tile(sa, at, b0, b1, b2, b3, b4, b5, b6, b7, c):
    """One 16-row tile against four 8-column tiles (B fragments b0..b7): 4 mma on 16 accumulators."""
    a0, a1, a2, a3 = load_shared_v4(sa, at)  # rows g, g + 8 at k 2q, 2q + 1 (module docstring)
    d0, d1, d2, d3 = mma_tf32_1688(a0, a1, a2, a3, b0, b1, c[0], c[1], c[2], c[3])
    d4, d5, d6, d7 = mma_tf32_1688(a0, a1, a2, a3, b2, b3, c[4], c[5], c[6], c[7])
    d8, d9, d10, d11 = mma_tf32_1688(a0, a1, a2, a3, b4, b5, c[8], c[9], c[10], c[11])
    d12, d13, d14, d15 = mma_tf32_1688(a0, a1, a2, a3, b6, b7, c[12], c[13], c[14], c[15])
    return (d0, d1, d2, d3, d4, d5, d6, d7, d8, d9, d10, d11, d12, d13, d14, d15)


@device_function
def _k_step(sa, sb, at, bt, c0, c1, c2, c3):
    """One 8-deep k step of the warp's 64 x 32 tile: 16 mma."""
    b0, b1 = load_shared_v2(sb, bt)
    b2, b3 = load_shared_v2(sb, bt + 8 * PITCH)
    b4, b5 = load_shared_v2(sb, bt + 16 * PITCH)
    b6, b7 = load_shared_v2(sb, bt + 24 * PITCH)
    c0 = _row_tile(sa, at, b0, b1, b2, b3, b4, b5, b6, b7, c0)
    c1 = _row_tile(sa, at + 8 * PAIR_PITCH, b0, b1, b2, b3, b4, b5, b6, b7, c1)
    c2 = _row_tile(sa, at + 16 * PAIR_PITCH, b0, b1, b2, b3, b4, b5, b6, b7, c2)
    c3 = _row_tile(sa, at + 24 * PAIR_PITCH, b0, b1, b2, b3, b4, b5, b6, b7, c3)
    return c0, c1, c2, c3


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
    """A row tile's 16 accumulators (four 8-column tiles) into y."""
    _put4(y, r, j, c[0], c[1], c[2], c[3])
    _put4(y, r, j + 8, c[4], c[5], c[6], c[7])
    _put4(y, r, j + 16, c[8], c[9], c[10], c[11])
    _put4(y, r, j + 24, c[12], c[13], c[14], c[15])


@device_function
def _slice(x, w, sa, sb, k0, m_base, n_base, inside, tid, at, bt, c0, c1, c2, c3):
    """One 32-deep k slice: stage x and W, then 4 k steps of 16 mma per warp (barriers inside)."""
    _stage_x(x, k0, sa, m_base, inside, tid)
    _stage_w(w, k0, sb, n_base, inside, tid)
    cuda.syncthreads()
    c0, c1, c2, c3 = _k_step(sa, sb, at, bt, c0, c1, c2, c3)
    c0, c1, c2, c3 = _k_step(sa, sb, at + 16, bt + 8, c0, c1, c2, c3)
    c0, c1, c2, c3 = _k_step(sa, sb, at + 32, bt + 16, c0, c1, c2, c3)
    c0, c1, c2, c3 = _k_step(sa, sb, at + 48, bt + 24, c0, c1, c2, c3)
    cuda.syncthreads()
    return c0, c1, c2, c3


@kernel((F32_2D, F32_2D, F32_2D), tensor_cores=True, block=THREADS)
def matmul_tf32_cuda(x, w, y):
    sa = cuda.shared.array(X_WORDS, numba.float32)
    sb = cuda.shared.array(W_WORDS, numba.float32)
    tid = cuda.threadIdx.x
    lane = tid & 31
    warp = tid >> 5
    g = lane >> 2
    q = lane & 3
    m_base = cuda.blockIdx.y * BLOCK_M
    n_base = cuda.blockIdx.x * BLOCK_N
    wm = (warp >> 2) * 64  # the warp's 64 x 32 tile inside the block's 128 x 128
    wn = (warp & 3) * 32
    at = (wm // 2 + g) * PAIR_PITCH + 4 * q  # row pair (wm / 16) * 8 + g, k 2q
    bt = (wn + g) * PITCH + 2 * q
    z = np.float32(0.0)
    c0 = c1 = c2 = c3 = (z, z, z, z, z, z, z, z, z, z, z, z, z, z, z, z)
    d_in = x.shape[1]
    # slices wholly inside x and W take the vector path (the hot loop); the rest, the checked one
    inside = d_in % 4 == 0 and m_base + BLOCK_M <= x.shape[0] and n_base + BLOCK_N <= w.shape[0]
    k_inside = d_in - d_in % BLOCK_K if inside else 0
    for k0 in range(0, k_inside, BLOCK_K):
        c0, c1, c2, c3 = _slice(x, w, sa, sb, k0, m_base, n_base, True, tid, at, bt, c0, c1, c2, c3)
    for k0 in range(k_inside, d_in, BLOCK_K):
        c0, c1, c2, c3 = _slice(x, w, sa, sb, k0, m_base, n_base, False, tid, at, bt, c0, c1, c2, c3)
    r = m_base + wm + g
    j = n_base + wn + 2 * q
    _store(y, c0, r, j)
    _store(y, c1, r + 16, j)
    _store(y, c2, r + 32, j)
    _store(y, c3, r + 48, j)


@op
def cuda_matmul_tf32(x, w):
    check_layer(x, w)
    y = cuda.device_array((x.shape[0], w.shape[0]), np.float32)
    grid = ((w.shape[0] + BLOCK_N - 1) // BLOCK_N, (x.shape[0] + BLOCK_M - 1) // BLOCK_M)
    matmul_tf32_cuda[grid, THREADS](x, w, y)
    return y


# ---- roofline of the static report (kernels/STATIC_REPORT.md) -------------------------------------

ROOFLINE_WORKLOADS = ("matmul 32768x1536x1536, TF32",)


def roofline(workload, rows=32768, d_in=1536, d_out=1536):
    """Per row of x: each 128 x 128 block reads its 128 rows of x and 128 rows of W once per k slice, so a
    row of x is read d_out / 128 times and W rows / 128 times from L2; HBM: x read and y written once,
    W once per launch."""
    l2 = 4 * d_in * (d_out / BLOCK_N) + 4 * d_in * d_out / BLOCK_M + 4 * d_out
    return {
        "name": f"{workload} (matmul_tf32_cuda)",
        "kernel": f"{__name__}.matmul_tf32_cuda",
        "unit": "row",
        "ops_per_unit": 2 * d_in * d_out,
        "compute_limit": "tf32_tensor",
        "reference_limit": "tf32_tensor",
        "bytes_per_unit": {"hbm": 4 * (d_in + d_out) + 4 * d_in * d_out / rows, "l2": l2},
        "basis": (f"{BLOCK_M}x{BLOCK_N} output blocks, {BLOCK_K}-wide k slices staged in shared memory: each "
                  "block reads its x and W rows once (L2); HBM: x read and y written once, W once per launch."),
        "launches": [{"kernel": f"{__name__}.matmul_tf32_cuda", "block": THREADS,
                      "grid": ((d_out + BLOCK_N - 1) // BLOCK_N, (rows + BLOCK_M - 1) // BLOCK_M),
                      "args": [{"shape": shape, "dtype": "float32"}
                               for shape in ((rows, d_in), (d_out, d_in), (rows, d_out))]}],
        "units": rows,
        "measured": {"benchmark": "matmul_throughput", "row": {"op": "forward_tf32", "shape": f"{rows}x{d_in}x{d_out}"},
                     "ms_per_run": "ours_ms"},
    }
