"""Where ops run and arrays live, as every op's first argument: a `Kernels` is a backend ("numpy":
float64 references, "cpu": the CPU twins, "cuda": the kernels) and a float precision; its
`to_device` is the one way arrays reach it, `to_host` the way back. `adopt` is how an op takes an
array from another library (PyTorch, CuPy, JAX) without copying it."""

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from eggnog.kernels.core.cuda_api import cuda, device_view, device_zeros
from eggnog.runtime.errors import BadInput

BACKENDS = ("numpy", "cpu", "cuda")
# what the type hints call a backend array: a NumPy array on "numpy" and "cpu", a numba device array (or
# anything with __cuda_array_interface__) on "cuda"
BackendArray = Any
DLPACK_CPU = 1  # the device type __dlpack_device__ reports for host memory (kDLCPU)
_PLAIN_VALUES = (list, tuple, int, float, complex, bool, np.generic)  # read by np.asarray, nothing to share


def _on_gpu(value: object) -> bool:
    """Whether `value` is GPU memory: a numba device array, a `__cuda_array_interface__` or a DLPack
    object on a device other than the CPU."""
    if isinstance(value, np.ndarray):
        return False
    if getattr(value, "__cuda_ndarray__", False) or hasattr(value, "__cuda_array_interface__"):
        return True
    return hasattr(value, "__dlpack_device__") and value.__dlpack_device__()[0] != DLPACK_CPU


def _host_view(value: Any, backend: str) -> np.ndarray:
    """`value` as a NumPy array sharing its memory where NumPy can (DLPack, the array interface)."""
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "__dlpack__"):
        try:
            return np.from_dlpack(value)
        except (BufferError, RuntimeError, TypeError, ValueError) as err:
            raise BadInput(f"a {type(value).__name__} given to the {backend} backend could not be read through "
                           f"DLPack ({str(err).strip().rstrip('.')})") from err
    if hasattr(value, "__array__") or hasattr(value, "__array_interface__") or isinstance(value, _PLAIN_VALUES):
        return np.asarray(value)
    raise BadInput(f"the {backend} backend takes arrays (NumPy, or objects with __dlpack__, __array__ or "
                   f"__cuda_array_interface__), not a {type(value).__name__}")


def adopt(value: Any, backend: str) -> BackendArray:
    """The array an implementation on `backend` takes for `value`, without a copy where possible; dtype
    and shape are not checked here (the op registry checks them next).

    "cuda": a numba device array is itself; any other `__cuda_array_interface__` (PyTorch, CuPy, JAX GPU
    arrays) becomes a numba view of the same memory; a host array (NumPy, a CPU tensor read through
    DLPack) stays on the host, for the launcher to upload. A GPU array with DLPack but no CUDA array
    interface is refused: numba-cuda 0.30 has no public way to view one.
    "numpy" and "cpu": a NumPy array is itself; a DLPack object on the CPU (PyTorch CPU tensors, JAX CPU
    arrays) is read with `np.from_dlpack`, `__array__` / `__array_interface__` with `np.asarray`, both
    sharing memory where they can; a GPU array is refused.
    Anything else is refused by BadInput in one sentence."""
    if backend not in BACKENDS:
        raise BadInput(f"unknown kernel backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    if backend == "cuda":
        view = device_view(value)
        if view is not None:
            return view
        if _on_gpu(value):
            raise BadInput(f"a {type(value).__name__} on the GPU with DLPack but no __cuda_array_interface__ cannot "
                           f"be viewed by numba-cuda; pass it through a library that exports the interface "
                           f"(PyTorch, CuPy) or as a numba device array")
        return _host_view(value, backend)
    if _on_gpu(value):
        raise BadInput(f"a {type(value).__name__} given to the {backend} backend is on the GPU; the {backend} "
                       f"backend takes host arrays")
    return _host_view(value, backend)


def is_c_contiguous(array: Any) -> bool:
    """Whether `array` (a NumPy array, a numba device array, a simulated one, or any object with
    `__cuda_array_interface__` or `__array_interface__`) is laid out in C order without gaps. Device
    arrays must be: the kernels index them as dense row-major buffers."""
    if isinstance(array, np.ndarray):
        return bool(array.flags.c_contiguous)
    if callable(getattr(array, "is_c_contiguous", None)):
        return bool(array.is_c_contiguous())
    interface = getattr(array, "__cuda_array_interface__", None) or getattr(array, "__array_interface__", None)
    if interface is None:
        raise BadInput(f"cannot tell the memory layout of a {type(array).__name__}: it is not an array")
    strides = interface.get("strides")
    if strides is None:
        return True
    shape, itemsize = interface["shape"], np.dtype(interface["typestr"]).itemsize
    expected = itemsize
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size > 1 and stride != expected:  # NumPy's rule: a dimension of size 1 may have any stride
            return False
        expected *= size
    return True


def to_host(array: BackendArray) -> np.ndarray:
    """A NumPy array from a host array (NumPy, or a CPU tensor by DLPack: no copy), a numba device array
    or any `__cuda_array_interface__` (a copy to the host), on the simulator as on a GPU."""
    if _on_gpu(array):
        return adopt(array, "cuda").copy_to_host()  # a device array, or refused in one sentence
    return _host_view(array, "cpu")


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
    arrays keep theirs; device arrays stay where they are (`adopt` says what is taken)."""

    name: str
    precision: str = "fp32"

    @property
    def dtype(self) -> type[np.float32] | type[np.float64]:
        return np.float64 if self.name == "numpy" else np.float32

    def to_device(self, a: Any) -> BackendArray:
        """`a` on this backend by the rules of `adopt`: a GPU array is taken as it is on "cuda" (no
        upload, its dtype kept) and refused elsewhere; a host array is made contiguous (floats in this
        backend's float type, without a copy when it already fits) and uploaded on "cuda"."""
        a = adopt(a, self.name)
        if not isinstance(a, np.ndarray):
            return a
        host = np.ascontiguousarray(a, self.dtype) if a.dtype.kind == "f" else np.ascontiguousarray(a)
        return cuda.to_device(host) if self.name == "cuda" else host

    @staticmethod
    def to_host(a: BackendArray) -> np.ndarray:
        return to_host(a)

    def empty(self, shape: int | tuple[int, ...], dtype: npt.DTypeLike | None = None) -> BackendArray:
        dtype = self.dtype if dtype is None else dtype
        if self.name == "cuda":
            return cuda.device_array(shape, dtype)
        return np.empty(shape, dtype)

    def zeros(self, shape: int | tuple[int, ...], dtype: npt.DTypeLike | None = None) -> BackendArray:
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
