"""fp32 matrix products:

    matmul(x, w)                 y = x W^T          (rows, out) = (rows, in) (out, in)^T   a linear layer
    matmul_backward(dy, x, w)    dx = dy W,  dW = dy^T x                                 its two gradients
    bmm(a, b, transpose_a, transpose_b)
                                 c[n] = op(a[n]) op(b[n]) over a leading batch axis, op(m) = m or m^T

The linear layer's three products share one kernel, C = op(A) op(B), register-blocked (a thread
computes 8 x 8 outputs of a 128 x 128 block tile; matmul_cuda's docstring has the layout). `bmm` runs
those tiles a grid layer a product where its outputs are at least 32 x 32 (the probe-batched LSTM's
tables and logits), else one thread per output (the DNC's thin products: one side R or 1 wide). The CPU
twins use NumPy's BLAS on fp32, large products split over the cores (cpu_products); references compute
in float64. Twins agree to 1e-5 relative + 1e-5 absolute.
"""

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Float64Array, FloatArray
from eggnog.kernels.core.cpu_products import batched_product, product
from eggnog.kernels.core.cuda_api import BOOL, F32_2D, F32_3D, blocks, cuda, device_function, f64, kernel, require
from eggnog.kernels.core.loads import load_global_v4, load_shared_v4, store_shared_f32x4
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import normal32, op, registered

THREADS = 16  # a block is THREADS x THREADS threads
PER = 8  # each thread computes PER x PER outputs
BLOCK = THREADS * PER  # a block's output tile is BLOCK x BLOCK
HALF = BLOCK // 2  # a thread's outputs lie in two groups of 4 rows (columns), HALF apart
STEP = 8  # inner-axis depth of one shared-memory stage
PITCH = BLOCK + 4
TILE = STEP * PITCH  # words of one operand's stage
BUFFERS = 2 * TILE  # two stages
OUTPUTS = PER * PER  # per thread
TOLERANCE = (1e-5, 1e-5)
TILED_FROM = 32  # bmm outputs at least this many rows and columns take the tiled kernel


def _layer_shapes():
    """(rows, in, out): one element, sizes that fill no tile or stage evenly (element-wise loads), and more
    than one block tile of rows: element-wise, then with every operand's rows a multiple of 4 floats
    (128-bit loads; the forward's in a whole number of stages, the weight gradient's 132 rows not)."""
    return ((1, 1, 1), (17, 33, 15), (130, 9, 5), (132, 40, 12))


def _matmul_cases(rng):
    for rows, d_in, d_out in _layer_shapes():
        yield normal32(rng, rows, d_in), normal32(rng, d_out, d_in)


def _matmul_backward_cases(rng):
    for rows, d_in, d_out in _layer_shapes():
        yield normal32(rng, rows, d_out), normal32(rng, rows, d_in), normal32(rng, d_out, d_in)


def check_layer(x, w, dy=None):
    require(len(x.shape) == 2 and len(w.shape) == 2 and x.shape[1] == w.shape[1],
            f"a linear layer takes x (rows, in) and W (out, in), got x {tuple(x.shape)} and W {tuple(w.shape)}")
    if dy is not None:
        require(tuple(dy.shape) == (x.shape[0], w.shape[0]),
                f"the gradient of a linear layer of x {tuple(x.shape)} and W {tuple(w.shape)} is "
                f"{(x.shape[0], w.shape[0])}, got {tuple(dy.shape)}")


@op(cases=_matmul_cases, tolerance=TOLERANCE, args={"x": "float[rows, d_in]", "w": "float[d_out, d_in]"})
def reference_matmul(x: FloatArray, w: FloatArray) -> Float64Array:
    """A linear layer without bias: y = x W^T, (rows, d_out) float32 (computed in float64 here).

    x: the layer's input, one row per token (or member); w: its weights, PyTorch's (out, in) layout.
    At precision tf32 or bf16 the op runs as matmul_tf32 or matmul_bf16 (inputs rounded first)."""
    check_layer(x, w)
    return f64(x) @ f64(w).T


@op(cases=_matmul_backward_cases, tolerance=TOLERANCE,
    args={"dy": "float[rows, d_out]", "x": "float[rows, d_in]", "w": "float[d_out, d_in]"})
def reference_matmul_backward(dy: FloatArray, x: FloatArray, w: FloatArray) -> tuple[Float64Array, Float64Array]:
    """The two gradients of y = x W^T: (dx, dW) = (dy W, dy^T x), shapes (rows, d_in) and (d_out, d_in).

    dy: the loss's gradient with respect to y; x and w: the forward's input and weights. At precision
    tf32 or bf16 the op runs as matmul_backward_tf32 or matmul_backward_bf16."""
    check_layer(x, w, dy)
    dy64 = f64(dy)
    return dy64 @ f64(w), dy64.T @ f64(x)


@op
def cpu_matmul(x: Float32Array, w: Float32Array) -> Float32Array:
    check_layer(x, w)
    return product(x, w.T)


@op
def cpu_matmul_backward(dy: Float32Array, x: Float32Array, w: Float32Array) -> tuple[Float32Array, Float32Array]:
    check_layer(x, w, dy)
    return product(dy, w), product(dy.T, x)


def rounded_reference_backward(rounding, dy, x, w):
    """matmul_backward's reference on inputs rounded by `rounding` (a tensor-core precision's)."""
    check_layer(x, w, dy)
    dy64 = f64(rounding(dy))
    return dy64 @ f64(rounding(w)), dy64.T @ f64(rounding(x))


def rounded_cpu_backward(rounding, dy, x, w):
    """matmul_backward's CPU twin on inputs rounded by `rounding`."""
    check_layer(x, w, dy)
    rounded = rounding(dy)
    return product(rounded, rounding(w)), product(np.ascontiguousarray(rounded.T), rounding(x))


@device_function
def _fetch(src, along_k, base, k0, t, vector):
    """This thread's 4 values of an operand's next slice: rows base..base+BLOCK-1 and k k0..k0+STEP-1 of
    op(src). `along_k`: src is (rows, k), else (k, rows); either way its contiguous axis is the second, so
    4 values along it are one 128-bit load when that axis is a multiple of 4 floats (`vector`): a vector
    is then wholly inside src or wholly outside (zeros). Otherwise element by element."""
    if along_k:
        row, col = base + (t >> 1), k0 + ((t & 1) << 2)  # 2 threads per row of 8 k
    else:
        row, col = k0 + (t >> 5), base + ((t & 31) << 2)  # 32 threads per k, 4 rows each
    rows, cols = src.shape
    z = np.float32(0.0)
    if vector:
        if row < rows and col < cols:
            return load_global_v4(src, row, col)
        return z, z, z, z
    v0 = src[row, col] if row < rows and col < cols else z
    v1 = src[row, col + 1] if row < rows and col + 1 < cols else z
    v2 = src[row, col + 2] if row < rows and col + 2 < cols else z
    v3 = src[row, col + 3] if row < rows and col + 3 < cols else z
    return v0, v1, v2, v3


@device_function
def _stage(tile, at, along_k, t, v0, v1, v2, v3):
    """The values _fetch gave into a k-major stage at word `at`: 4 k of one row, or 4 rows of one k."""
    if along_k:
        r = at + ((t & 1) << 2) * PITCH + (t >> 1)
        tile[r] = v0
        tile[r + PITCH] = v1
        tile[r + 2 * PITCH] = v2
        tile[r + 3 * PITCH] = v3
    else:
        store_shared_f32x4(tile, at + (t >> 5) * PITCH + ((t & 31) << 2), v0, v1, v2, v3)


@device_function
def _k_product(a_tile, b_tile, a_at, b_at, acc):
    """One k: 8 values of each operand (two LDS.128 each, HALF apart) and 64 FMA."""
    a = cuda.local.array(PER, numba.float32)
    b = cuda.local.array(PER, numba.float32)
    a[0], a[1], a[2], a[3] = load_shared_v4(a_tile, a_at)
    a[4], a[5], a[6], a[7] = load_shared_v4(a_tile, a_at + HALF)
    b[0], b[1], b[2], b[3] = load_shared_v4(b_tile, b_at)
    b[4], b[5], b[6], b[7] = load_shared_v4(b_tile, b_at + HALF)
    for i in range(PER):
        for j in range(PER):
            acc[i * PER + j] += a[i] * b[j]


@device_function
def _multiply(a_tile, b_tile, a_at, b_at, acc):
    """One staged slice, its STEP k written out (unrolled)."""
    _k_product(a_tile, b_tile, a_at, b_at, acc)
    _k_product(a_tile, b_tile, a_at + PITCH, b_at + PITCH, acc)
    _k_product(a_tile, b_tile, a_at + 2 * PITCH, b_at + 2 * PITCH, acc)
    _k_product(a_tile, b_tile, a_at + 3 * PITCH, b_at + 3 * PITCH, acc)
    _k_product(a_tile, b_tile, a_at + 4 * PITCH, b_at + 4 * PITCH, acc)
    _k_product(a_tile, b_tile, a_at + 5 * PITCH, b_at + 5 * PITCH, acc)
    _k_product(a_tile, b_tile, a_at + 6 * PITCH, b_at + 6 * PITCH, acc)
    _k_product(a_tile, b_tile, a_at + 7 * PITCH, b_at + 7 * PITCH, acc)


@device_function
def _slice(operands, tiles, s, slices, corner, k_major, vector, thread, acc):
    """Slice s from stage s % 2: the next slice's loads fly while this one is multiplied, then are stored
    into the other stage; one barrier. Pairs for a and b: operands, tiles (shared), k_major (a_k, b_k),
    vector (a_vector, b_vector); corner: (row0, col0); thread: (t, ty, tx)."""
    a, b = operands
    a_tile, b_tile = tiles
    row0, col0 = corner
    a_k, b_k = k_major
    a_vector, b_vector = vector
    t, ty, tx = thread
    more = s + 1 < slices
    z = np.float32(0.0)
    a0 = a1 = a2 = a3 = b0 = b1 = b2 = b3 = z
    if more:
        a0, a1, a2, a3 = _fetch(a, a_k, row0, (s + 1) * STEP, t, a_vector)
        b0, b1, b2, b3 = _fetch(b, b_k, col0, (s + 1) * STEP, t, b_vector)
    at = (s & 1) * TILE
    _multiply(a_tile, b_tile, at + 4 * ty, at + 4 * tx, acc)
    if more:
        _stage(a_tile, TILE - at, a_k, t, a0, a1, a2, a3)
        _stage(b_tile, TILE - at, b_k, t, b0, b1, b2, b3)
    cuda.syncthreads()


@device_function
def _tile_product(a, b, c, transpose_a, transpose_b):
    """This block's tile of c = op(a) op(b) (matmul_cuda's docstring)."""
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    t = ty * THREADS + tx
    rows, cols = c.shape[0], c.shape[1]
    inner = a.shape[0] if transpose_a else a.shape[1]
    row0 = cuda.blockIdx.y * BLOCK
    col0 = cuda.blockIdx.x * BLOCK
    a_tile = cuda.shared.array(BUFFERS, numba.float32)
    b_tile = cuda.shared.array(BUFFERS, numba.float32)
    acc = cuda.local.array(OUTPUTS, numba.float32)
    for i in range(OUTPUTS):
        acc[i] = np.float32(0.0)
    a_k, b_k = not transpose_a, transpose_b  # which operands are stored (rows, k)
    a_vector, b_vector = a.shape[1] % 4 == 0, b.shape[1] % 4 == 0
    v0, v1, v2, v3 = _fetch(a, a_k, row0, 0, t, a_vector)
    _stage(a_tile, 0, a_k, t, v0, v1, v2, v3)
    v0, v1, v2, v3 = _fetch(b, b_k, col0, 0, t, b_vector)
    _stage(b_tile, 0, b_k, t, v0, v1, v2, v3)
    cuda.syncthreads()
    slices = (inner + STEP - 1) // STEP
    if a_vector and b_vector:  # two loops, each with its own loads inlined
        for s in range(slices):
            _slice((a, b), (a_tile, b_tile), s, slices, (row0, col0), (a_k, b_k), (True, True), (t, ty, tx), acc)
    else:
        for s in range(slices):
            _slice((a, b), (a_tile, b_tile), s, slices, (row0, col0), (a_k, b_k), (a_vector, b_vector), (t, ty, tx),
                   acc)
    for i in range(PER):
        row = row0 + 4 * ty + (i & 3) + (HALF if i >= 4 else 0)
        if row < rows:
            for j in range(PER):
                col = col0 + 4 * tx + (j & 3) + (HALF if j >= 4 else 0)
                if col < cols:
                    c[row, col] = acc[i * PER + j]


@kernel((F32_2D, F32_2D, F32_2D, BOOL, BOOL), block=THREADS * THREADS, launch_bounds=(THREADS * THREADS, 2))
def matmul_cuda(a, b, c, transpose_a, transpose_b):
    """c = op(a) op(b); op transposes when asked. Register-blocked: a block of THREADS x THREADS threads
    computes a BLOCK x BLOCK tile of c; thread (tx, ty) the PER x PER outputs at rows 4 ty + i and
    HALF + 4 ty + i, columns 4 tx + j and HALF + 4 tx + j (i, j < 4), in registers. STEP-deep slices of op(a)
    and op(b) are staged k-major in two shared buffers: the global loads of slice s + 1 are issued before
    the FMAs of slice s and stored after them, one barrier per slice. Per k a thread reads its 8 + 8
    values as four LDS.128 and issues 64 FMAs.

    Shared memory: pitch BLOCK + 4 words (4 mod 32). Reads: a warp is 16 consecutive columns (tx) times 2
    rows (ty); an LDS.128 is served in phases of 8 lanes, which read one a_tile address (broadcast) or
    32 consecutive b_tile words: conflict-free. Writes: a k-contiguous operand (a, or b transposed) puts
    k = 4 (t % 2) + i, row t // 2 of a warp's lanes at bank 16 (t % 2) + 4i + row (mod 32): 32 banks; the
    other layout stores 128 consecutive words per warp (STS.128)."""
    _tile_product(a, b, c, transpose_a, transpose_b)


@kernel((F32_3D, F32_3D, F32_3D, BOOL, BOOL), block=THREADS * THREADS, launch_bounds=(THREADS * THREADS, 2))
def bmm_tiled_cuda(a, b, c, transpose_a, transpose_b):
    """c[z] = op(a[z]) op(b[z]) for z = blockIdx.z: matmul_cuda's tiles, one product a grid layer.

    Shared memory: matmul_cuda's stages and accesses (its paragraph): conflict-free."""
    z = cuda.blockIdx.z
    _tile_product(a[z], b[z], c[z], transpose_a, transpose_b)


def tiled_product(a, b, transpose_a=False, transpose_b=False):
    """op(a) op(b) of two fp32 matrices on the device, by the register-blocked kernel (also the LSTM's
    input projection)."""
    rows = a.shape[1] if transpose_a else a.shape[0]
    cols = b.shape[0] if transpose_b else b.shape[1]
    c = cuda.device_array((rows, cols), np.float32)
    grid = ((cols + BLOCK - 1) // BLOCK, (rows + BLOCK - 1) // BLOCK)
    matmul_cuda[grid, (THREADS, THREADS)](a, b, c, bool(transpose_a), bool(transpose_b))
    return c


@op
def cuda_matmul(x: BackendArray, w: BackendArray) -> BackendArray:
    check_layer(x, w)
    return tiled_product(x, w, transpose_b=True)


@op
def cuda_matmul_backward(dy: BackendArray, x: BackendArray, w: BackendArray) -> tuple[BackendArray, BackendArray]:
    check_layer(x, w, dy)
    return tiled_product(dy, w), tiled_product(dy, x, transpose_a=True)


# ---- batched -----------------------------------------------------------------------------------------

def _bmm_cases(rng):
    """Thin products (a thread an output): every transpose combination, outputs of one element and of more
    than one block of 256. Tiled products (TILED_FROM): two layers of a grid, either operand transposed
    (matmul's cases cover the tile's other layouts)."""
    shapes = [(batch, rows, inner, cols, ta, tb) for batch, rows, inner, cols in ((1, 1, 1, 1), (2, 9, 5, 17))
              for ta in (False, True) for tb in (False, True)]
    for batch, rows, inner, cols, transpose_a, transpose_b in shapes + [(2, 33, 12, 36, False, True),
                                                                        (2, 40, 9, 32, True, False)]:
        a = normal32(rng, batch, *((inner, rows) if transpose_a else (rows, inner)))
        b = normal32(rng, batch, *((cols, inner) if transpose_b else (inner, cols)))
        yield a, b, transpose_a, transpose_b


def _op(a, transpose):
    return np.swapaxes(a, 1, 2) if transpose else a


def _check_bmm(a, b, transpose_a, transpose_b):
    inner_a = a.shape[1] if transpose_a else a.shape[2]
    inner_b = b.shape[2] if transpose_b else b.shape[1]
    require(len(a.shape) == 3 and len(b.shape) == 3 and a.shape[0] == b.shape[0] and inner_a == inner_b,
            f"bmm of {tuple(a.shape)}{'^T' if transpose_a else ''} and {tuple(b.shape)}{'^T' if transpose_b else ''}: "
            f"batch or inner sizes differ")


# the inner sizes are a's axis 1 or 2 and b's axis 2 or 1 by the flags: _check_bmm compares them
@op(cases=_bmm_cases, tolerance=TOLERANCE, args={"a": "float[batch, _, _]", "b": "float[batch, _, _]",
                                                 "transpose_a": "bool", "transpose_b": "bool"})
def reference_bmm(a: FloatArray, b: FloatArray, transpose_a: bool = False, transpose_b: bool = False) -> Float64Array:
    """A batch of matrix products: c[n] = op(a[n]) op(b[n]), (batch, rows, cols), op(m) = m^T where the
    flag is set, else m.

    a, b: the batch of left and right factors, one pair per leading index; transpose_a / transpose_b:
    use a[n]^T (a is (batch, inner, rows)) / b[n]^T (b is (batch, cols, inner)). The inner sizes must agree."""
    _check_bmm(a, b, transpose_a, transpose_b)
    return np.matmul(_op(f64(a), transpose_a), _op(f64(b), transpose_b))


@op
def cpu_bmm(a: Float32Array, b: Float32Array, transpose_a: bool = False, transpose_b: bool = False) -> Float32Array:
    _check_bmm(a, b, transpose_a, transpose_b)
    return batched_product(_op(a, transpose_a), _op(b, transpose_b))


@kernel((F32_3D, F32_3D, F32_3D, BOOL, BOOL))
def bmm_cuda(a, b, c, transpose_a, transpose_b):
    i = cuda.grid(1)
    if i < c.size:
        rows, cols = c.shape[1], c.shape[2]
        n, r, col = i // (rows * cols), (i // cols) % rows, i % cols
        inner = a.shape[1] if transpose_a else a.shape[2]
        acc = np.float32(0.0)
        for k in range(inner):
            av = a[n, k, r] if transpose_a else a[n, r, k]
            bv = b[n, col, k] if transpose_b else b[n, k, col]
            acc += av * bv
        c[n, r, col] = acc


@op
def cuda_bmm(a: BackendArray, b: BackendArray, transpose_a: bool = False, transpose_b: bool = False) -> BackendArray:
    _check_bmm(a, b, transpose_a, transpose_b)
    rows = a.shape[2] if transpose_a else a.shape[1]
    cols = b.shape[1] if transpose_b else b.shape[2]
    c = cuda.device_array((a.shape[0], rows, cols), np.float32)
    if min(rows, cols) >= TILED_FROM:  # a product of blocks: matmul_cuda's tiles
        grid = ((cols + BLOCK - 1) // BLOCK, (rows + BLOCK - 1) // BLOCK, a.shape[0])
        bmm_tiled_cuda[grid, (THREADS, THREADS)](a, b, c, bool(transpose_a), bool(transpose_b))
    else:  # thin (the DNC's: one side R or 1 wide): a thread an output
        bmm_cuda[blocks(c.size)](a, b, c, bool(transpose_a), bool(transpose_b))
    return c

# the ops of this module by name, for callers: bmm(kernels, ...)
bmm = registered(reference_bmm)
matmul = registered(reference_matmul)
matmul_backward = registered(reference_matmul_backward)
