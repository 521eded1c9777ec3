"""Element-wise fp32 pieces of the float models (one GPU thread per output element, 1-D launches):

    add(a, b)                        a + b, any shape
    add_bias(x, bias)                x (rows, d) + bias (d,) on every row
    column_sum(x)                    sum over rows of x (rows, d) -> (d,)  (bias and norm-weight gradients)
    member_affine(x, scale, shift)   x (M, T, d) * scale[m] + shift[m]    (perturbed norm weights, biases)
    last_step(h)                     h (B, T, C)[:, -1] as a contiguous carried state
    copy_window(src, dst, src_row, src_col, dst_row, dst_col, rows, cols)
                                     a rows x cols window of src written into dst, in place
    accumulate(dst, src)             dst += src in place, any shape
    scale_rows(x, scale)             x (rows, d) * scale (rows,)[:, None]
    swap_leading(x)                  x (A, B, M) -> (B, A, M), contiguous (a probe axis moved in or out)

More in docs/internals.md (kernels/layers/elementwise.py)."""

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Float64Array, FloatArray
from eggnog.kernels.core.cpu_jit import parallel_jit
from eggnog.kernels.core.cuda_api import F32_1D, F32_2D, F32_3D, I64, blocks, cuda, f64, flat, kernel, require
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import normal32, op, registered

ROUNDED = (1e-7, 0.0)  # one fp32 rounding of the exact result
SUMMED = (1e-5, 1e-5)


# ---- add -------------------------------------------------------------------------------------------

def _add_cases(rng):
    """One element, a partial block, several blocks of 256 threads; mixed magnitudes so the add rounds."""
    for shape in ((1,), (3, 85), (2, 3, 50)):
        yield normal32(rng, *shape, scale=3.0), normal32(rng, *shape, scale=1e-3)


def _check_add(a, b):
    require(tuple(a.shape) == tuple(b.shape), f"add needs two arrays of one shape, got {tuple(a.shape)} "
                                              f"and {tuple(b.shape)}")


@op(cases=_add_cases, tolerance=ROUNDED, args={"a": "float[*shape]", "b": "float[*shape]"})
def reference_add(a: FloatArray, b: FloatArray) -> Float64Array:
    """a + b element by element, a new float32 array of their shape (float64 here).

    a, b: float arrays of one shape, any number of axes (a residual stream and a block's output, two
    bias vectors)."""
    _check_add(a, b)
    return f64(a) + f64(b)


@op
def cpu_add(a: Float32Array, b: Float32Array) -> Float32Array:
    _check_add(a, b)
    return a + b


@kernel((F32_1D, F32_1D, F32_1D))
def add_cuda(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]


@op
def cuda_add(a: BackendArray, b: BackendArray) -> BackendArray:
    _check_add(a, b)
    out = cuda.device_array(a.shape, np.float32)
    add_cuda[blocks(a.size)](flat(a), flat(b), flat(out))
    return out


# ---- add_bias ------------------------------------------------------------------------------------------

def _add_bias_cases(rng):
    for rows, cols in ((1, 1), (13, 23), (3, 300)):
        yield normal32(rng, rows, cols, scale=2.0), normal32(rng, cols)


def _check_add_bias(x, bias):
    require(len(x.shape) == 2 and tuple(bias.shape) == (x.shape[1],),
            f"add_bias takes rows (n, d) and a bias (d,), got {tuple(x.shape)} and {tuple(bias.shape)}")


@op(cases=_add_bias_cases, tolerance=ROUNDED, args={"x": "float[rows, d]", "bias": "float[d]"})
def reference_add_bias(x: FloatArray, bias: FloatArray) -> Float64Array:
    """x + bias on every row, (rows, d) float32 (float64 here): a linear layer's bias, or a vector
    parameter added to each member's noise row (float EGGROLL).

    x: rows of features; bias: one value per feature."""
    _check_add_bias(x, bias)
    return f64(x) + f64(bias)[None, :]


@op
def cpu_add_bias(x: Float32Array, bias: Float32Array) -> Float32Array:
    _check_add_bias(x, bias)
    return x + bias[None, :]


@kernel((F32_2D, F32_1D, F32_2D))
def add_bias_cuda(x, bias, out):
    i = cuda.grid(1)
    if i < out.size:
        row, col = i // x.shape[1], i % x.shape[1]
        out[row, col] = x[row, col] + bias[col]


@op
def cuda_add_bias(x: BackendArray, bias: BackendArray) -> BackendArray:
    _check_add_bias(x, bias)
    out = cuda.device_array(x.shape, np.float32)
    add_bias_cuda[blocks(x.size)](x, bias, out)
    return out


# ---- column_sum ----------------------------------------------------------------------------------------

def _column_sum_cases(rng):
    """Columns below and across a tile of 32; one row and several; rows past one chunk (partial sums of 3
    chunks, then their sum)."""
    for rows, cols in ((1, 1), (5, 255), (12, 300), (600, 40)):
        yield (normal32(rng, rows, cols, scale=5.0),)


@op(cases=_column_sum_cases, tolerance=SUMMED, args={"x": "float[rows, d]"})
def reference_column_sum(x: FloatArray) -> Float64Array:
    """The sum over the rows of x, (d,) float32 (float64 here; the twins accumulate in float64 or in
    partial sums): the gradient of a bias or of a norm's weight from its per-row gradients x."""
    return f64(x).sum(axis=0)


@op
def cpu_column_sum(x: Float32Array) -> Float32Array:
    return x.sum(axis=0, dtype=np.float64).astype(np.float32)


COLUMN_TILE, ROW_THREADS, CHUNK_ROWS = 32, 8, 256  # a block: 32 columns x 8 row threads over 256 rows


@kernel((F32_2D, F32_2D))
def column_sum_cuda(rows, partial):
    """partial[c, j]: the sum of column j over chunk c's rows. A warp reads 32 neighbouring columns of a
    row (128 bytes); its 8 row threads sum every 8th row, 4 at a time, then add up in shared memory.

    Shared memory: a warp (one ty) stores 32 consecutive words of a row, and the first warp reads them back
    a row at a time: 32 banks each."""
    shared = cuda.shared.array((ROW_THREADS, COLUMN_TILE), numba.float32)
    tx, ty, c = cuda.threadIdx.x, cuda.threadIdx.y, cuda.blockIdx.y
    j = cuda.blockIdx.x * COLUMN_TILE + tx
    n, d = rows.shape
    a0 = a1 = a2 = a3 = np.float32(0.0)
    if j < d:
        end = min(n, (c + 1) * CHUNK_ROWS)
        for i in range(c * CHUNK_ROWS + ty, end, 4 * ROW_THREADS):
            a0 += rows[i, j]
            if i + ROW_THREADS < end:
                a1 += rows[i + ROW_THREADS, j]
            if i + 2 * ROW_THREADS < end:
                a2 += rows[i + 2 * ROW_THREADS, j]
            if i + 3 * ROW_THREADS < end:
                a3 += rows[i + 3 * ROW_THREADS, j]
    shared[ty, tx] = (a0 + a1) + (a2 + a3)
    cuda.syncthreads()
    if ty == 0 and j < d:
        total = np.float32(0.0)
        for k in range(ROW_THREADS):
            total += shared[k, tx]
        partial[c, j] = total


@op
def cuda_column_sum(x: BackendArray) -> BackendArray:
    """Partial sums of each CHUNK_ROWS rows, then of those, until one row is left (one launch up to
    CHUNK_ROWS rows, two up to 65536): every SM busy where a thread per column would leave most idle."""
    rows, cols = x.shape
    while True:
        chunks = max(1, (rows + CHUNK_ROWS - 1) // CHUNK_ROWS)  # no rows: one chunk of zeros
        out = cuda.device_array((chunks, cols), np.float32)
        column_sum_cuda[((cols + COLUMN_TILE - 1) // COLUMN_TILE, chunks), (COLUMN_TILE, ROW_THREADS)](x, out)
        if chunks <= 1:
            return out.reshape(cols)
        x, rows = out, chunks


# ---- member_affine -------------------------------------------------------------------------------------

def _member_affine_cases(rng):
    for members, steps, width in ((1, 1, 1), (3, 5, 7), (2, 3, 50)):
        yield (normal32(rng, members, steps, width, scale=2.0), normal32(rng, members, width),
               normal32(rng, members, width))


def _check_member_affine(x, scale, shift):
    require(len(x.shape) == 3 and tuple(scale.shape) == tuple(shift.shape) == (x.shape[0], x.shape[2]),
            f"member_affine takes x (members, steps, d) with scale and shift (members, d), got x "
            f"{tuple(x.shape)}, scale {tuple(scale.shape)} and shift {tuple(shift.shape)}")


@op(cases=_member_affine_cases, tolerance=SUMMED,
    args={"x": "float[members, steps, d]", "scale": "float[members, d]", "shift": "float[members, d]"})
def reference_member_affine(x: FloatArray, scale: FloatArray, shift: FloatArray) -> Float64Array:
    """x[m, t] * scale[m] + shift[m] for every member m and step t, (members, steps, d) float32 (float64
    here): each population member's own (perturbed) norm weight and bias applied to its rows.

    x: each member's steps of features; scale, shift: one row of weights and one of biases per member."""
    _check_member_affine(x, scale, shift)
    return f64(x) * f64(scale)[:, None, :] + f64(shift)[:, None, :]


@parallel_jit
def _cpu_member_affine(x, scale, shift, out):
    members, steps, d = x.shape
    for mt in numba.prange(members * steps):
        m, t = mt // steps, mt % steps
        for j in range(d):
            out[m, t, j] = x[m, t, j] * scale[m, j] + shift[m, j]


@op
def cpu_member_affine(x: Float32Array, scale: Float32Array, shift: Float32Array) -> Float32Array:
    _check_member_affine(x, scale, shift)
    out = np.empty(x.shape, x.dtype)
    _cpu_member_affine(x, scale, shift, out)
    return out


@kernel((F32_3D, F32_2D, F32_2D, F32_3D))
def member_affine_cuda(x, scale, shift, out):
    i = cuda.grid(1)
    if i < out.size:
        d, steps = x.shape[2], x.shape[1]
        m, t, j = i // (steps * d), (i // d) % steps, i % d
        out[m, t, j] = x[m, t, j] * scale[m, j] + shift[m, j]


@op
def cuda_member_affine(x: BackendArray, scale: BackendArray, shift: BackendArray) -> BackendArray:
    _check_member_affine(x, scale, shift)
    out = cuda.device_array(x.shape, np.float32)
    member_affine_cuda[blocks(x.size)](x, scale, shift, out)
    return out


# ---- last_step: the last time step of a scan output, as a contiguous carried state ------------------

def _last_step_cases(rng):
    for batch, steps, width in ((1, 1, 1), (3, 5, 7), (2, 3, 150)):
        yield (normal32(rng, batch, steps, width),)


def _check_last_step(h):
    require(len(h.shape) == 3 and h.shape[1] > 0,
            f"last_step takes a (batch, steps, channels) sequence with a step, got {tuple(h.shape)}")


@op(cases=_last_step_cases, args={"h": "float[batch, steps, channels]"})
def reference_last_step(h: FloatArray) -> Float64Array:
    """h[:, -1], the last step of a scan's output, as a contiguous (batch, channels) float32 array (float64
    here): the state a recurrent layer carries into the next window. h needs at least one step."""
    _check_last_step(h)
    return f64(h)[:, -1]


@op
def cpu_last_step(h: Float32Array) -> Float32Array:
    _check_last_step(h)
    return np.ascontiguousarray(h[:, -1])


@kernel((F32_3D, F32_2D))
def last_step_cuda(h, out):
    i = cuda.grid(1)
    if i < out.size:
        b, c = i // out.shape[1], i % out.shape[1]
        out[b, c] = h[b, h.shape[1] - 1, c]


@op
def cuda_last_step(h: BackendArray) -> BackendArray:
    _check_last_step(h)
    out = cuda.device_array((h.shape[0], h.shape[2]), np.float32)
    last_step_cuda[blocks(out.size)](h, out)
    return out


# ---- copy_window: concatenation and splitting of columns, stacking of time steps, in place ------------

def _copy_window_cases(rng):
    """An empty window, one element, and windows of several blocks at offsets in both matrices."""
    src, dst = normal32(rng, 20, 40), normal32(rng, 30, 25)
    yield src, dst, 0, 0, 0, 0, 0, 5
    yield src, dst, 19, 39, 29, 24, 1, 1
    yield src, dst, 2, 3, 5, 1, 17, 20
    yield src, dst, 0, 15, 0, 0, 20, 25


def _check_copy_window(src, dst, src_row, src_col, dst_row, dst_col, rows, cols):
    inside = all(0 <= start and start + size <= limit for start, size, limit in (
        (src_row, rows, src.shape[0]), (src_col, cols, src.shape[1]),
        (dst_row, rows, dst.shape[0]), (dst_col, cols, dst.shape[1])))
    require(rows >= 0 and cols >= 0 and inside,
            f"a {rows} x {cols} window at ({src_row}, {src_col}) of {tuple(src.shape)} to ({dst_row}, {dst_col}) "
            f"of {tuple(dst.shape)} does not fit")


def _copy_window_host(src, dst, src_row, src_col, dst_row, dst_col, rows, cols):
    _check_copy_window(src, dst, src_row, src_col, dst_row, dst_col, rows, cols)
    dst[dst_row:dst_row + rows, dst_col:dst_col + cols] = src[src_row:src_row + rows, src_col:src_col + cols]


@op(cases=_copy_window_cases, args={"src": "float[_, _]", "dst": "float[_, _]", "src_row": "int", "src_col": "int",
                                    "dst_row": "int", "dst_col": "int", "rows": "int", "cols": "int"})
def reference_copy_window(src: FloatArray, dst: FloatArray, src_row: int, src_col: int, dst_row: int, dst_col: int,
                          rows: int, cols: int) -> None:
    """dst[dst_row:dst_row + rows, dst_col:dst_col + cols] = src[src_row:src_row + rows, src_col:src_col + cols],
    in place; returns None. Joins and splits columns and stacks time steps without a host copy (the DNC).

    src, dst: two matrices of any sizes; (src_row, src_col) and (dst_row, dst_col): the window's top-left
    corner in each; rows, cols: its size (0 copies nothing). The window must lie inside both."""
    _copy_window_host(src, dst, src_row, src_col, dst_row, dst_col, rows, cols)


@op
def cpu_copy_window(src: Float32Array, dst: Float32Array, src_row: int, src_col: int, dst_row: int, dst_col: int,
                    rows: int, cols: int) -> None:
    """NumPy slicing is the fastest CPU copy."""
    _copy_window_host(src, dst, src_row, src_col, dst_row, dst_col, rows, cols)


@kernel((F32_2D, F32_2D, I64, I64, I64, I64, I64, I64))
def copy_window_cuda(src, dst, src_row, src_col, dst_row, dst_col, rows, cols):
    i = cuda.grid(1)
    if i < rows * cols:
        r, c = i // cols, i % cols
        dst[dst_row + r, dst_col + c] = src[src_row + r, src_col + c]


@op
def cuda_copy_window(src: BackendArray, dst: BackendArray, src_row: int, src_col: int, dst_row: int, dst_col: int,
                     rows: int, cols: int) -> None:
    _check_copy_window(src, dst, src_row, src_col, dst_row, dst_col, rows, cols)
    if rows * cols:
        args = (np.int64(v) for v in (src_row, src_col, dst_row, dst_col, rows, cols))
        copy_window_cuda[blocks(rows * cols)](src, dst, *args)


# ---- accumulate ---------------------------------------------------------------------------------------

def _accumulate_cases(rng):
    for shape in ((1,), (3, 85), (2, 3, 50)):
        yield normal32(rng, *shape, scale=3.0), normal32(rng, *shape)


def _check_accumulate(dst, src):
    require(tuple(dst.shape) == tuple(src.shape),
            f"accumulate needs two arrays of one shape, got {tuple(dst.shape)} and {tuple(src.shape)}")


@op(cases=_accumulate_cases, tolerance=ROUNDED, args={"dst": "float[*shape]", "src": "float[*shape]"})
def reference_accumulate(dst: FloatArray, src: FloatArray) -> None:
    """dst += src in place, element by element; returns None. Sums gradients and pre-activations
    without a new array.

    dst: the float array added to (its values change); src: a float array of dst's shape, any number of
    axes."""
    _check_accumulate(dst, src)
    dst += f64(src)


@op
def cpu_accumulate(dst: Float32Array, src: Float32Array) -> None:
    _check_accumulate(dst, src)
    dst += src


@kernel((F32_1D, F32_1D))
def accumulate_cuda(dst, src):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] += src[i]


@op
def cuda_accumulate(dst: BackendArray, src: BackendArray) -> None:
    _check_accumulate(dst, src)
    accumulate_cuda[blocks(dst.size)](flat(dst), flat(src))


# ---- scale_rows ---------------------------------------------------------------------------------------

def _scale_rows_cases(rng):
    for rows, cols in ((1, 1), (13, 23), (3, 300)):
        yield normal32(rng, rows, cols, scale=2.0), normal32(rng, rows)


def _check_scale_rows(x, scale):
    require(len(x.shape) == 2 and tuple(scale.shape) == (x.shape[0],),
            f"scale_rows takes rows (n, d) and one scale per row, got {tuple(x.shape)} and {tuple(scale.shape)}")


@op(cases=_scale_rows_cases, tolerance=ROUNDED, args={"x": "float[rows, d]", "scale": "float[rows]"})
def reference_scale_rows(x: FloatArray, scale: FloatArray) -> Float64Array:
    """x[i] * scale[i] for every row i, (rows, d) float32 (float64 here): the logits' gradient weighted
    per row (a mask over the mean), or each member's noise row scaled by its sigma.

    x: rows of values; scale: one factor per row."""
    _check_scale_rows(x, scale)
    return f64(x) * f64(scale)[:, None]


@parallel_jit
def _cpu_scale_rows(x, scale, out):
    for i in numba.prange(x.shape[0]):
        for j in range(x.shape[1]):
            out[i, j] = x[i, j] * scale[i]


@op
def cpu_scale_rows(x: Float32Array, scale: Float32Array) -> Float32Array:
    _check_scale_rows(x, scale)
    out = np.empty(x.shape, x.dtype)
    _cpu_scale_rows(x, scale, out)
    return out


@kernel((F32_2D, F32_1D, F32_2D))
def scale_rows_cuda(x, scale, out):
    i = cuda.grid(1)
    if i < out.size:
        row, col = i // x.shape[1], i % x.shape[1]
        out[row, col] = x[row, col] * scale[row]


@op
def cuda_scale_rows(x: BackendArray, scale: BackendArray) -> BackendArray:
    _check_scale_rows(x, scale)
    out = cuda.device_array(x.shape, np.float32)
    scale_rows_cuda[blocks(x.size)](x, scale, out)
    return out


# ---- swap_leading: the first two axes of a 3-D array exchanged, as a contiguous copy -------------------

def _swap_leading_cases(rng):
    for shape in ((1, 1, 1), (3, 5, 7), (4, 2, 90)):
        yield (normal32(rng, *shape),)


def _check_swap_leading(x):
    require(len(x.shape) == 3, f"swap_leading takes a 3-D array, got shape {tuple(x.shape)}")


@op(cases=_swap_leading_cases, args={"x": "float[a, b, m]"})
def reference_swap_leading(x: FloatArray) -> Float32Array:
    """x with its first two axes exchanged, (b, a, m) as a contiguous copy of x's dtype: a probe axis
    moved in or out of the rows (the probe-batched LSTM)."""
    _check_swap_leading(x)
    return np.ascontiguousarray(np.swapaxes(x, 0, 1))


@op
def cpu_swap_leading(x: Float32Array) -> Float32Array:
    _check_swap_leading(x)
    return np.ascontiguousarray(np.swapaxes(x, 0, 1))


@kernel((F32_3D, F32_3D))
def swap_leading_cuda(x, out):
    """One thread per output element, the last axis fastest: reads and writes coalesce along it."""
    i = cuda.grid(1)
    if i < out.size:
        a, m = out.shape[1], out.shape[2]
        b, j, k = i // (a * m), (i // m) % a, i % m
        out[b, j, k] = x[j, b, k]


@op
def cuda_swap_leading(x: BackendArray) -> BackendArray:
    _check_swap_leading(x)
    out = cuda.device_array((x.shape[1], x.shape[0], x.shape[2]), np.float32)
    swap_leading_cuda[blocks(out.size)](x, out)
    return out

# the ops of this module by name, for callers: accumulate(kernels, ...)
accumulate = registered(reference_accumulate)
add = registered(reference_add)
add_bias = registered(reference_add_bias)
column_sum = registered(reference_column_sum)
copy_window = registered(reference_copy_window)
last_step = registered(reference_last_step)
member_affine = registered(reference_member_affine)
scale_rows = registered(reference_scale_rows)
swap_leading = registered(reference_swap_leading)
