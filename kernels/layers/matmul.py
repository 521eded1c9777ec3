"""fp32 matrix products:

    matmul(x, w)                 y = x W^T          (rows, out) = (rows, in) (out, in)^T   a linear layer
    matmul_backward(dy, x, w)    dx = dy W,  dW = dy^T x                                 its two gradients
    bmm(a, b, transpose_a, transpose_b)
                                 c[n] = op(a[n]) op(b[n]) over a leading batch axis, op(m) = m or m^T

The linear layer's three products share one kernel, C = op(A) op(B), register-blocked (a thread
computes 8 x 8 outputs of a 128 x 128 block tile; matmul_cuda's docstring has the layout). `bmm` is
one thread per output element: the DNC's batched products are thin (one side R or 1 wide). The CPU
twins use NumPy's BLAS on fp32, large products split over the cores (cpu_products); references compute
in float64. Twins agree to 1e-5 relative + 1e-5 absolute.
"""

import numba
import numpy as np

from eggnog.kernels.core.cpu_products import batched_product, product
from eggnog.kernels.core.cuda_api import BOOL, F32_2D, F32_3D, blocks, cuda, f64, kernel, require
from eggnog.kernels.core.registry import normal32, op

THREADS = 16  # a block is THREADS x THREADS threads
PER = 8  # each thread computes PER x PER outputs
BLOCK = THREADS * PER  # a block's output tile is BLOCK x BLOCK
STEP = 8  # inner-axis depth of one shared-memory stage
PITCH = BLOCK + 4
LOADS = STEP * BLOCK // (THREADS * THREADS)  # elements of each operand a thread stages per step
TOLERANCE = (1e-5, 1e-5)


def _layer_shapes():
    """(rows, in, out): one element, sizes that fill no tile or stage evenly, and (the last) more than one
    block tile of rows."""
    return ((1, 1, 1), (17, 33, 15), (130, 9, 5))


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


@op(cases=_matmul_cases, tolerance=TOLERANCE)
def reference_matmul(x, w):
    check_layer(x, w)
    return f64(x) @ f64(w).T


@op(cases=_matmul_backward_cases, tolerance=TOLERANCE)
def reference_matmul_backward(dy, x, w):
    check_layer(x, w, dy)
    dy64 = f64(dy)
    return dy64 @ f64(w), dy64.T @ f64(x)


@op
def cpu_matmul(x, w):
    check_layer(x, w)
    return product(x, w.T)


@op
def cpu_matmul_backward(dy, x, w):
    check_layer(x, w, dy)
    return product(dy, w), product(dy.T, x)


@kernel((F32_2D, F32_2D, F32_2D, BOOL, BOOL), block=THREADS * THREADS)
def matmul_cuda(a, b, c, transpose_a, transpose_b):
    """c = op(a) op(b); op transposes when asked. Register-blocked: a block of THREADS x THREADS threads
    computes a BLOCK x BLOCK tile of c, each thread PER x PER outputs (rows ty + THREADS i, columns
    tx + THREADS j) in registers. Each STEP-deep slice of op(a) and op(b) is staged k-major in shared
    memory; a thread then reads PER values of each per k and issues PER * PER FMAs: 64 FMAs to 16 loads.

    Shared memory: pitch BLOCK + 4 words (4 mod 32). Reads: a warp is 16 consecutive columns (tx) times
    2 rows (ty) of threads, so an a_tile read has 2 addresses (broadcast) and a b_tile read 16 consecutive
    words: conflict-free. Writes: the untransposed loads put k = t % STEP, row = t // STEP of a warp at
    word 4k + row (mod 32), 32 distinct banks; the transposed loads write 32 consecutive words."""
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    t = ty * THREADS + tx
    rows, cols = c.shape[0], c.shape[1]
    inner = a.shape[0] if transpose_a else a.shape[1]
    row0 = cuda.blockIdx.y * BLOCK
    col0 = cuda.blockIdx.x * BLOCK
    a_tile = cuda.shared.array((STEP, PITCH), numba.float32)
    b_tile = cuda.shared.array((STEP, PITCH), numba.float32)
    acc = cuda.local.array((PER, PER), numba.float32)
    a_reg = cuda.local.array(PER, numba.float32)
    b_reg = cuda.local.array(PER, numba.float32)
    for i in range(PER):
        for j in range(PER):
            acc[i, j] = np.float32(0.0)
    uty, utx = np.uint64(ty), np.uint64(tx)
    for k0 in range(0, inner, STEP):
        for s in range(LOADS):
            # unsigned slot: // and % by the powers of two below are shifts and masks
            slot = np.uint64(t + s * THREADS * THREADS)
            # the contiguous axis of each source varies fastest over threads: coalesced global loads
            if transpose_a:
                k, r = np.int64(slot // BLOCK), np.int64(slot % BLOCK)
            else:
                k, r = np.int64(slot % STEP), np.int64(slot // STEP)
            if row0 + r < rows and k0 + k < inner:
                a_tile[k, r] = a[k0 + k, row0 + r] if transpose_a else a[row0 + r, k0 + k]
            else:
                a_tile[k, r] = np.float32(0.0)
            if transpose_b:
                k, r = np.int64(slot % STEP), np.int64(slot // STEP)
            else:
                k, r = np.int64(slot // BLOCK), np.int64(slot % BLOCK)
            if col0 + r < cols and k0 + k < inner:
                b_tile[k, r] = b[col0 + r, k0 + k] if transpose_b else b[k0 + k, col0 + r]
            else:
                b_tile[k, r] = np.float32(0.0)
        cuda.syncthreads()
        for k in range(STEP):
            uk = np.uint64(k)  # unsigned indices: no negative-index wraparound code in the hot loop
            for i in range(PER):
                a_reg[i] = a_tile[uk, uty + np.uint64(THREADS * i)]
                b_reg[i] = b_tile[uk, utx + np.uint64(THREADS * i)]
            for i in range(PER):
                for j in range(PER):
                    acc[i, j] += a_reg[i] * b_reg[j]
        cuda.syncthreads()
    for i in range(PER):
        row = row0 + ty + THREADS * i
        if row < rows:
            for j in range(PER):
                col = col0 + tx + THREADS * j
                if col < cols:
                    c[row, col] = acc[i, j]


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
def cuda_matmul(x, w):
    check_layer(x, w)
    return tiled_product(x, w, transpose_b=True)


@op
def cuda_matmul_backward(dy, x, w):
    check_layer(x, w, dy)
    return tiled_product(dy, w), tiled_product(dy, x, transpose_a=True)


# ---- batched -----------------------------------------------------------------------------------------

def _bmm_cases(rng):
    """Every transpose combination; outputs of one element, and of more than one block of 256."""
    for batch, rows, inner, cols in ((1, 1, 1, 1), (2, 9, 5, 17)):
        for transpose_a in (False, True):
            for transpose_b in (False, True):
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


@op(cases=_bmm_cases, tolerance=TOLERANCE)
def reference_bmm(a, b, transpose_a=False, transpose_b=False):
    _check_bmm(a, b, transpose_a, transpose_b)
    return np.matmul(_op(f64(a), transpose_a), _op(f64(b), transpose_b))


@op
def cpu_bmm(a, b, transpose_a=False, transpose_b=False):
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
def cuda_bmm(a, b, transpose_a=False, transpose_b=False):
    _check_bmm(a, b, transpose_a, transpose_b)
    rows = a.shape[2] if transpose_a else a.shape[1]
    cols = b.shape[1] if transpose_b else b.shape[2]
    c = cuda.device_array((a.shape[0], rows, cols), np.float32)
    bmm_cuda[blocks(c.size)](a, b, c, bool(transpose_a), bool(transpose_b))
    return c
