"""The DNC's erase/add memory write (fp32), forward and backward:

    memory_write(mem, p, s, e, a)                   -> mem'     mem' = mem * (1 - w^T e) + w^T a, w = p * s
    memory_write_backward(dout, mem, p, s, e, a)    -> dmem, dp, ds, de, da

with mem (B, M, W), softmax weights p (B, M), write strength s (B,), erase e and add a (B, W). The
forward runs one thread per memory row; the backward two passes, per memory row (dmem and dw, the
gradient of w), then per column (de, da summed over rows; one more thread per batch row turns dw into
dp and ds). The per-thread bodies are written once for the twin and the kernels. The reference is
float64; its backward matches central finite differences (tests/test_dnc.py).
"""

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Float64Array, FloatArray
from eggnog.kernels.core.cpu_jit import parallel_jit
from eggnog.kernels.core.cuda_api import F32_1D, F32_2D, F32_3D, blocks, cuda, device_function, f64, kernel
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import op, registered

THREADS = 128
TOLERANCE = (1e-6, 1e-6)


def _cases(rng, backward):
    """(B, M, W): tiny; 150 memory rows (two blocks of the row pass); 142 columns (two blocks of the
    column pass)."""
    for batch, rows, width in ((2, 5, 3), (3, 50, 4), (2, 3, 70)):
        mem = rng.normal(size=(batch, rows, width)).astype(np.float32)
        logits = rng.normal(size=(batch, rows))
        p = (np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)).astype(np.float32)
        s = rng.uniform(0.1, 1.0, batch).astype(np.float32)
        e = rng.uniform(0.0, 1.0, (batch, width)).astype(np.float32)
        a = np.tanh(rng.normal(size=(batch, width))).astype(np.float32)
        if backward:
            yield rng.normal(size=mem.shape).astype(np.float32), mem, p, s, e, a
        else:
            yield mem, p, s, e, a


def _forward_cases(rng):
    yield from _cases(rng, False)


def _backward_cases(rng):
    yield from _cases(rng, True)


MEMORY = "float[batch, rows, width]"
WRITE = {"mem": MEMORY, "p": "float[batch, rows]", "s": "float[batch]", "e": "float[batch, width]",
         "a": "float[batch, width]"}


@op(cases=_forward_cases, tolerance=TOLERANCE, args=WRITE)
def reference_memory_write(mem: FloatArray, p: FloatArray, s: FloatArray, e: FloatArray, a: FloatArray) -> Float64Array:
    """mem' (batch, rows, width): the memory after the write head's erase and add,
    mem' = mem * (1 - w^T e) + w^T a with the write weights w = p * s.

    mem: the memory before the write. p: the write head's weights over the memory rows (content_address's
    softmax). s: the write strength (dnc_interface's, in (0, 1)). e: the erase vector (in (0, 1)), a: the
    add vector (dnc_interface's)."""
    mem, w, e, a = f64(mem), f64(p) * f64(s)[:, None], f64(e), f64(a)
    return mem * (1.0 - w[:, :, None] * e[:, None, :]) + w[:, :, None] * a[:, None, :]


@op(cases=_backward_cases, tolerance=TOLERANCE, args={"dout": MEMORY, **WRITE})
def reference_memory_write_backward(dout: FloatArray, mem: FloatArray, p: FloatArray, s: FloatArray, e: FloatArray,
                                    a: FloatArray) -> tuple[Float64Array, Float64Array, Float64Array, Float64Array,
                                                            Float64Array]:
    """(dmem, dp, ds, de, da), each of its argument's shape: memory_write's gradients, for
    mem' = mem * (1 - w^T e) + w^T a with w = p * s.

    dout: the loss's gradient with respect to the written memory mem'. mem, p, s, e, a: memory_write's
    arguments."""
    dout, mem, p, s, e, a = (f64(v) for v in (dout, mem, p, s, e, a))
    w = p * s[:, None]
    dmem = dout * (1.0 - w[:, :, None] * e[:, None, :])
    dw = (dout * (a[:, None, :] - mem * e[:, None, :])).sum(axis=2)
    de = -(dout * mem * w[:, :, None]).sum(axis=1)
    da = (dout * w[:, :, None]).sum(axis=1)
    return dmem, dw * s[:, None], (dw * p).sum(axis=1), de, da


def build(jit):
    """Per-thread bodies of the three passes, written once for the CPU twins (njit, looped by
    prange) and the GPU (device functions)."""

    @jit
    def write_row(mem, p, s, e, a, out, k):
        """Row k = (b, m) of mem' = mem (1 - w e) + w a."""
        rows, width = mem.shape[1], mem.shape[2]
        b, m = k // rows, k % rows
        w = p[b, m] * s[b]
        for j in range(width):
            out[b, m, j] = mem[b, m, j] * (np.float32(1.0) - w * e[b, j]) + w * a[b, j]

    @jit
    def backward_row(dout, mem, p, s, e, a, dmem, dw, k):
        """dmem of row k = (b, m), and dw[b, m] = sum_j dout (a - mem e)."""
        rows, width = mem.shape[1], mem.shape[2]
        b, m = k // rows, k % rows
        w = p[b, m] * s[b]
        acc = np.float32(0.0)
        for j in range(width):
            g = dout[b, m, j]
            dmem[b, m, j] = g * (np.float32(1.0) - w * e[b, j])
            acc += g * (a[b, j] - mem[b, m, j] * e[b, j])
        dw[b, m] = acc

    @jit
    def backward_column(dout, mem, p, s, dw, dp, ds, de, da, k):
        """k = (b, j < W): de and da summed over rows; j == W: dp and ds from dw."""
        rows, width = mem.shape[1], mem.shape[2]
        b, j = k // (width + 1), k % (width + 1)
        if j == width:
            acc = np.float32(0.0)
            for m in range(rows):
                acc += dw[b, m] * p[b, m]
                dp[b, m] = dw[b, m] * s[b]
            ds[b] = acc
        else:
            acc_e = np.float32(0.0)
            acc_a = np.float32(0.0)
            for m in range(rows):
                g = dout[b, m, j] * (p[b, m] * s[b])
                acc_e -= g * mem[b, m, j]
                acc_a += g
            de[b, j] = acc_e
            da[b, j] = acc_a

    return write_row, backward_row, backward_column


_cpu_write_row, _cpu_backward_row, _cpu_backward_column = build(numba.njit)
_gpu_write_row, _gpu_backward_row, _gpu_backward_column = build(device_function)


@parallel_jit
def _cpu_memory_write(mem, p, s, e, a, out):
    for k in numba.prange(mem.shape[0] * mem.shape[1]):
        _cpu_write_row(mem, p, s, e, a, out, k)


@parallel_jit
def _cpu_memory_write_rows(dout, mem, p, s, e, a, dmem, dw):
    for k in numba.prange(mem.shape[0] * mem.shape[1]):
        _cpu_backward_row(dout, mem, p, s, e, a, dmem, dw, k)


@parallel_jit
def _cpu_memory_write_columns(dout, mem, p, s, dw, dp, ds, de, da):
    for k in numba.prange(mem.shape[0] * (mem.shape[2] + 1)):
        _cpu_backward_column(dout, mem, p, s, dw, dp, ds, de, da, k)


@op
def cpu_memory_write(mem: Float32Array, p: Float32Array, s: Float32Array, e: Float32Array,
                     a: Float32Array) -> Float32Array:
    out = np.empty_like(mem)
    _cpu_memory_write(mem, p, s, e, a, out)
    return out


@op
def cpu_memory_write_backward(dout: Float32Array, mem: Float32Array, p: Float32Array, s: Float32Array, e: Float32Array,
                              a: Float32Array) -> tuple[Float32Array, Float32Array, Float32Array, Float32Array,
                                                      Float32Array]:
    dmem, dw, dp = np.empty_like(mem), np.empty_like(p), np.empty_like(p)
    ds, de, da = np.empty_like(s), np.empty_like(e), np.empty_like(a)
    _cpu_memory_write_rows(dout, mem, p, s, e, a, dmem, dw)
    _cpu_memory_write_columns(dout, mem, p, s, dw, dp, ds, de, da)
    return dmem, dp, ds, de, da


@kernel((F32_3D, F32_2D, F32_1D, F32_2D, F32_2D, F32_3D), block=THREADS)
def memory_write_cuda(mem, p, s, e, a, out):
    k = cuda.grid(1)
    if k < mem.shape[0] * mem.shape[1]:
        _gpu_write_row(mem, p, s, e, a, out, k)


@kernel((F32_3D, F32_3D, F32_2D, F32_1D, F32_2D, F32_2D, F32_3D, F32_2D), block=THREADS)
def memory_write_rows_cuda(dout, mem, p, s, e, a, dmem, dw):
    k = cuda.grid(1)
    if k < mem.shape[0] * mem.shape[1]:
        _gpu_backward_row(dout, mem, p, s, e, a, dmem, dw, k)


@kernel((F32_3D, F32_3D, F32_2D, F32_1D, F32_2D, F32_2D, F32_1D, F32_2D, F32_2D), block=THREADS)
def memory_write_columns_cuda(dout, mem, p, s, dw, dp, ds, de, da):
    k = cuda.grid(1)
    if k < mem.shape[0] * (mem.shape[2] + 1):
        _gpu_backward_column(dout, mem, p, s, dw, dp, ds, de, da, k)


@op
def cuda_memory_write(mem: BackendArray, p: BackendArray, s: BackendArray, e: BackendArray,
                      a: BackendArray) -> BackendArray:
    out = cuda.device_array(mem.shape, np.float32)
    memory_write_cuda[blocks(mem.shape[0] * mem.shape[1], THREADS)](mem, p, s, e, a, out)
    return out


@op
def cuda_memory_write_backward(dout: BackendArray, mem: BackendArray, p: BackendArray, s: BackendArray, e: BackendArray,
                               a: BackendArray) -> tuple[BackendArray, BackendArray, BackendArray, BackendArray,
                                                         BackendArray]:
    n, rows, width = mem.shape
    dmem, dw, dp = (cuda.device_array(mem.shape, np.float32), cuda.device_array(p.shape, np.float32),
                    cuda.device_array(p.shape, np.float32))
    ds, de, da = (cuda.device_array(n, np.float32), cuda.device_array(e.shape, np.float32),
                  cuda.device_array(a.shape, np.float32))
    memory_write_rows_cuda[blocks(n * rows, THREADS)](dout, mem, p, s, e, a, dmem, dw)
    memory_write_columns_cuda[blocks(n * (width + 1), THREADS)](dout, mem, p, s, dw, dp, ds, de, da)
    return dmem, dp, ds, de, da

# the ops of this module by name, for callers: memory_write(kernels, ...)
memory_write = registered(reference_memory_write)
memory_write_backward = registered(reference_memory_write_backward)
