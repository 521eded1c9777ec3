"""Column and row windows of (rows, cols) matrices for the DNC, on any backend, built on the
`copy_window` kernel: the DNC cuts its interface vector into heads, joins reads to inputs and stores
each step's rows of a sequence."""

from collections.abc import Sequence

from eggnog.kernels.core.placement import BackendArray, Kernels
from eggnog.kernels.layers.elementwise import copy_window


def take_columns(ops: Kernels, x: BackendArray, start: int, width: int) -> BackendArray:
    """x[:, start:start + width] as a new contiguous array."""
    out = ops.empty((x.shape[0], width), ops.dtype)
    copy_window(ops, x, out, 0, start, 0, 0, x.shape[0], width)
    return out


def concat_columns(ops: Kernels, parts: Sequence[BackendArray]) -> BackendArray:
    """The matrices of `parts` (same row count) side by side."""
    out = ops.empty((parts[0].shape[0], sum(p.shape[1] for p in parts)), ops.dtype)
    col = 0
    for part in parts:
        copy_window(ops, part, out, 0, 0, 0, col, part.shape[0], part.shape[1])
        col += part.shape[1]
    return out


def take_rows(ops: Kernels, x: BackendArray, start: int, count: int) -> BackendArray:
    """x[start:start + count] as a new contiguous array."""
    out = ops.empty((count, x.shape[1]), ops.dtype)
    copy_window(ops, x, out, start, 0, 0, 0, count, x.shape[1])
    return out


def put_rows(ops: Kernels, dst: BackendArray, start: int, src: BackendArray) -> None:
    """dst[start:start + len(src)] = src, in place."""
    copy_window(ops, src, dst, 0, 0, start, 0, src.shape[0], src.shape[1])
