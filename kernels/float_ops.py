"""The fp32 operations of the MinGRU LM under common names, one namespace per backend:
"numpy" (float64 references, for checks), "cpu" (the CPU twins) or "cuda" (the kernels).

Arrays stay where the backend keeps them (device arrays for "cuda"); `to_device` / `to_host`
move them. Shapes: matrices (rows, features); the scan takes (batch, T, channels).
"""

from types import SimpleNamespace

import numpy as np

from eggnog.kernels import float_elementwise, float_layers, float_matmul, lowrank, norms, scan
from eggnog.kernels.backend import to_host

_PREFIX = {"numpy": "reference_", "cpu": "cpu_", "cuda": "cuda_"}
_LAYER_OPS = ("gelu", "gelu_backward", "cross_entropy",
              "embedding", "embedding_backward")
_ELEMENTWISE_OPS = ("add", "add_bias", "column_sum", "member_affine", "last_step")
_LOWRANK_OPS = ("project", "project_rows", "expand")


def _host_array(dtype):
    return lambda a: np.ascontiguousarray(a, dtype)


def ops_for(backend):
    prefix = _PREFIX[backend]
    ops = {name: getattr(float_layers, prefix + name) for name in _LAYER_OPS}
    ops.update({name: getattr(norms, prefix + name) for name in ("rmsnorm", "rmsnorm_backward")})
    ops.update({name: getattr(float_elementwise, prefix + name) for name in _ELEMENTWISE_OPS})
    ops.update({"lowrank_" + name: getattr(lowrank, prefix + name) for name in _LOWRANK_OPS})
    ops["matmul"] = getattr(float_matmul, prefix + "forward")
    ops["matmul_backward"] = getattr(float_matmul, prefix + "backward")
    ops["scan_forward"] = getattr(scan, prefix + "forward")
    ops["scan_backward"] = getattr(scan, prefix + "backward")
    ops["scan_step"] = getattr(scan, prefix + "step")
    if backend == "cuda":
        from eggnog.kernels.cuda_api import cuda

        ops["to_device"] = lambda a: cuda.to_device(np.ascontiguousarray(a))
        ops["dtype"] = np.float32
    else:
        dtype = np.float64 if backend == "numpy" else np.float32
        ops["to_device"] = lambda a: np.ascontiguousarray(a) if a.dtype.kind == "u" else np.ascontiguousarray(a, dtype)
        ops["dtype"] = dtype
    ops["to_host"] = to_host
    return SimpleNamespace(name=backend, **ops)
