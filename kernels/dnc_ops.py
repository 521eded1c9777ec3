"""The DNC's operations under common names, one namespace per backend: `ops_for(backend)` returns
float_ops.ops_for(backend) ("numpy" float64 references, "cpu" twins or "cuda" kernels) with these
added:

    layernorm, layernorm_backward          kernels/layernorm.py
    softmax_rows, softmax_rows_backward    kernels/softmax_rows.py
    bmm                                    kernels/batched_matmul.py
    lstm_cell, lstm_cell_backward          kernels/dnc_cell.py (the controller's cell, torch gate order)
    memory_write, memory_write_backward    kernels/dnc_memory.py
    activation, activation_backward,       kernels/dnc_elementwise.py (SIGMOID, TANH are there)
    copy_window, accumulate
    scale_rows                             kernels/lstm_cell.py (x * s[:, None])

plus the conveniences `empty`, `zeros`, `take_columns`, `concat_columns`, `take_rows` and
`put_rows` built on copy_window.
"""

import numpy as np

from eggnog.kernels import batched_matmul, dnc_cell, dnc_elementwise, dnc_memory, float_ops, lstm_cell, norms, softmax_rows
from eggnog.kernels.cuda_api import cuda

_PREFIX = {"numpy": "reference_", "cpu": "cpu_", "cuda": "cuda_"}
_OPS = ((norms, ("layernorm", "layernorm_backward")),
        (softmax_rows, ("softmax_rows", "softmax_rows_backward")),
        (batched_matmul, ("bmm",)),
        (dnc_cell, ("lstm_cell", "lstm_cell_backward")),
        (dnc_memory, ("memory_write", "memory_write_backward")),
        (dnc_elementwise, ("activation", "activation_backward", "copy_window", "accumulate")),
        (lstm_cell, ("scale_rows",)))


def ops_for(backend):
    """float_ops.ops_for(backend) plus the DNC kernels and window helpers."""
    ops = float_ops.ops_for(backend)
    prefix = _PREFIX[backend]
    for module, names in _OPS:
        for name in names:
            setattr(ops, name, getattr(module, prefix + name))
    dtype = ops.dtype

    if backend == "cuda":
        def empty(shape):
            return cuda.device_array(shape, np.float32)

        def zeros(shape):
            return cuda.to_device(np.zeros(shape, np.float32))
    else:
        def empty(shape):
            return np.empty(shape, dtype)

        def zeros(shape):
            return np.zeros(shape, dtype)

    def take_columns(x, start, width):
        out = empty((x.shape[0], width))
        ops.copy_window(x, out, 0, start, 0, 0, x.shape[0], width)
        return out

    def concat_columns(parts):
        out = empty((parts[0].shape[0], sum(p.shape[1] for p in parts)))
        col = 0
        for part in parts:
            ops.copy_window(part, out, 0, 0, 0, col, part.shape[0], part.shape[1])
            col += part.shape[1]
        return out

    def take_rows(x, start, count):
        out = empty((count, x.shape[1]))
        ops.copy_window(x, out, start, 0, 0, 0, count, x.shape[1])
        return out

    def put_rows(dst, start, src):
        ops.copy_window(src, dst, 0, 0, start, 0, src.shape[0], src.shape[1])

    ops.empty, ops.zeros = empty, zeros
    ops.take_columns, ops.concat_columns, ops.take_rows, ops.put_rows = take_columns, concat_columns, take_rows, put_rows
    return ops
