"""Where ops run and arrays live, as every op's first argument: a `Kernels` is a backend ("numpy":
float64 references, "cpu": the CPU twins, "cuda": the kernels) and a float precision; its
`to_device` is the one way arrays reach it, `to_host` the way back."""

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from eggnog.kernels.core.cuda_api import cuda, device_zeros

BACKENDS = ("numpy", "cpu", "cuda")
# what the type hints call a backend array: a NumPy array on "numpy" and "cpu", a numba device array (or
# anything with __cuda_array_interface__) on "cuda"
BackendArray = Any


def to_host(array: BackendArray) -> np.ndarray:
    """A NumPy array from a host array, a numba device array or any `__cuda_array_interface__`."""
    if hasattr(array, "copy_to_host"):
        return array.copy_to_host()
    if hasattr(array, "__cuda_array_interface__") and not isinstance(array, np.ndarray):
        return cuda.as_cuda_array(array).copy_to_host()
    return np.asarray(array)


# --precision of the float trainers: which ops serve `matmul` and `matmul_backward`. fp32 is exact fp32;
# tf32 and bf16 run the products and their gradients on TF32 or bf16 tensor cores, all accumulated in
# fp32 (the accuracy of each: kernels/layers/matmul_tf32.py, matmul_bf16.py).
PRECISIONS = {"fp32": {}, "tf32": {"matmul": "matmul_tf32", "matmul_backward": "matmul_backward_tf32"},
              "bf16": {"matmul": "matmul_bf16", "matmul_backward": "matmul_backward_bf16"}}


@dataclass(frozen=True)
class Kernels:
    """Where ops run ("numpy": float64 references, "cpu": the twins, "cuda": the kernels) and at what
    float precision (PRECISIONS): what every op takes first. Arrays reach it through `to_device`, the
    one way in: float arrays take its float type (float64 on numpy, float32 elsewhere), integer
    arrays keep theirs; device arrays stay where they are."""

    name: str
    precision: str = "fp32"

    @property
    def dtype(self):
        return np.float64 if self.name == "numpy" else np.float32

    def to_device(self, a) -> BackendArray:
        if hasattr(a, "copy_to_host"):
            return a
        a = np.asarray(a)
        host = np.ascontiguousarray(a, self.dtype) if a.dtype.kind == "f" else np.ascontiguousarray(a)
        return cuda.to_device(host) if self.name == "cuda" else host

    @staticmethod
    def to_host(a) -> np.ndarray:
        return to_host(a)

    def empty(self, shape, dtype=None) -> BackendArray:
        dtype = self.dtype if dtype is None else dtype
        if self.name == "cuda":
            return cuda.device_array(shape, dtype)
        return np.empty(shape, dtype)

    def zeros(self, shape, dtype=None) -> BackendArray:
        dtype = self.dtype if dtype is None else dtype
        if self.name == "cuda":
            return device_zeros(shape, dtype)
        return np.zeros(shape, dtype)


@functools.cache
def kernels_for(backend: str, precision: str = "fp32") -> Kernels:
    """The `Kernels` of one backend and precision (checked once, then shared)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown kernel backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    return Kernels(backend, precision)
