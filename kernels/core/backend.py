"""Where arrays live and kernels run: decided once per process, asked by everything else.

Order of precedence: the name given to `select_backend` (a --backend flag), then the environment
variable EGGNOG_BACKEND, then "auto": `cuda` when a GPU is usable (or the simulator is on via
NUMBA_ENABLE_CUDASIM=1), otherwise `cpu`.

Setting up a backend (making a `Backend`, which every trainer is given) also caps the BLAS thread
pool of the process, once: NumPy's OpenBLAS threads keep spinning after each product and starve
numba's parallel loops of the same cores (the bare MinGRU BPTT ran about 7x faster on 2 cores with
BLAS on one thread). EGGNOG_BLAS_THREADS=N sets the cap; without it, a thread count given to BLAS
itself (OPENBLAS_NUM_THREADS, MKL_NUM_THREADS, BLIS_NUM_THREADS or OMP_NUM_THREADS) is left in
force; otherwise BLAS runs on one thread. Without threadpoolctl (an optional package) the cap is
not set and one line on stderr says how to set it by hand.
"""

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from eggnog.kernels.core.cuda_api import SIMULATED, cuda
from eggnog.kernels.core.placement import BackendArray, kernels_for
from eggnog.runtime.errors import BadInput
from eggnog.runtime.optional import optional_import

ENV_VAR = "EGGNOG_BACKEND"
CHOICES = ("auto", "cpu", "cuda")
BLAS_THREADS_VAR = "EGGNOG_BLAS_THREADS"
# read by the BLAS libraries themselves when they load: one the user set is their explicit choice
BLAS_OWN_VARS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS", "OMP_NUM_THREADS")
# the free bytes the simulator reports, so the memory refusals can be tested without a GPU
SIMULATED_FREE_VAR = "EGGNOG_SIMULATED_GPU_FREE_BYTES"


@dataclass(frozen=True)
class Backend:
    name: str  # "cpu" or "cuda"
    simulated: bool = False
    device_index: int | None = None
    device_name: str = "cpu"

    def __post_init__(self) -> None:
        limit_blas_threads()

    def to_device(self, array: Any) -> BackendArray:
        """A host array on this backend, by the one rule of `Kernels.to_device` (floats take the
        backend's float type; no copy on the CPU when the array already fits)."""
        return kernels_for(self.name).to_device(array)

    def empty(self, shape: int | tuple[int, ...], dtype: npt.DTypeLike) -> BackendArray:
        return kernels_for(self.name).empty(shape, dtype)

    def zeros(self, shape: int | tuple[int, ...], dtype: npt.DTypeLike) -> BackendArray:
        return kernels_for(self.name).zeros(shape, dtype)

    def copy(self, array: BackendArray) -> BackendArray:
        """A copy of a backend array on the same backend (device to device on a GPU)."""
        if self.name != "cuda":
            return np.array(array, copy=True)
        out = cuda.device_array_like(array)
        out.copy_to_device(array)
        return out

    def synchronize(self) -> None:
        if self.name == "cuda":
            cuda.synchronize()


def device_free_bytes(backend: Backend, environ: Mapping[str, str] = os.environ) -> int | None:
    """Free memory of a GPU backend in bytes; None on the CPU, whose arrays live in host memory. The
    simulator reports EGGNOG_SIMULATED_GPU_FREE_BYTES (None when unset: its arrays are host memory too)."""
    if backend.name != "cuda":
        return None
    if backend.simulated:
        text = environ.get(SIMULATED_FREE_VAR, "").strip()
        if text and not text.isdigit():
            raise BadInput(f"{SIMULATED_FREE_VAR}={text!r} is not a whole number of bytes")
        return int(text) if text else None
    free, _ = cuda.current_context().get_memory_info()
    return int(free)


def packed_to_device(to_device: Callable[[np.ndarray], BackendArray], *arrays: npt.ArrayLike) -> list[BackendArray]:
    """Several host arrays put on the backend by one upload (`to_device`, a backend's or ops' method):
    each at an 8-byte aligned offset of one byte buffer, returned as views of their dtypes and shapes."""
    hosts = [np.ascontiguousarray(a) for a in arrays]
    offsets = np.cumsum([0] + [-(-a.nbytes // 8) * 8 for a in hosts])
    packed = np.zeros(int(offsets[-1]), np.uint8)
    for a, start in zip(hosts, offsets):
        packed[start:start + a.nbytes] = a.reshape(-1).view(np.uint8)
    device = to_device(packed)
    return [device[start:start + a.nbytes].view(a.dtype).reshape(a.shape) for a, start in zip(hosts, offsets)]


def blas_thread_limit(environ: Mapping[str, str] = os.environ) -> int | None:
    """The BLAS thread count this process should use, or None to leave the one BLAS chose itself."""
    text = environ.get(BLAS_THREADS_VAR, "").strip()
    if text:
        if not text.isdigit() or int(text) < 1:
            raise BadInput(f"{BLAS_THREADS_VAR}={text!r} is not a positive whole number of threads")
        return int(text)
    if any(environ.get(name, "").strip() for name in BLAS_OWN_VARS):
        return None
    return 1


_blas_limited = False


def limit_blas_threads(environ: Mapping[str, str] = os.environ) -> None:
    """Cap the BLAS libraries loaded in this process (NumPy's among them) at `blas_thread_limit`;
    the first call decides, later calls do nothing."""
    global _blas_limited
    if _blas_limited:
        return
    limit = blas_thread_limit(environ)
    if limit is not None:
        threadpoolctl = optional_import(
            "threadpoolctl", f"BLAS threads are not capped and may spin against numba's; cap them by hand "
            f"with OPENBLAS_NUM_THREADS={limit} (or MKL_NUM_THREADS / OMP_NUM_THREADS) set before Python starts")
        if threadpoolctl is not None:  # the cap stays in force: the returned handle is not restored
            threadpoolctl.threadpool_limits(limits=limit, user_api="blas")
    _blas_limited = True


def gpu_usable() -> bool:
    try:
        return bool(cuda.is_available())
    except Exception:  # a broken driver install reports through many exception types
        return False


def resolve_name(requested: str | None = None, environ: Mapping[str, str] = os.environ) -> str:
    name = (requested or environ.get(ENV_VAR) or "auto").strip().lower()
    if name not in CHOICES:
        raise BadInput(f"unknown backend {name!r}: choose one of {', '.join(CHOICES)}")
    if name == "auto":
        return "cuda" if gpu_usable() else "cpu"
    if name == "cuda" and not gpu_usable():
        raise BadInput("backend 'cuda' was requested but no usable GPU was found "
                       "(check the driver and that numba-cuda[cu12] or [cu13] is installed)")
    return name


_selected: Backend | None = None


def select_backend(requested: str | None = None, local_rank: int = 0) -> Backend:
    """Choose the backend of this process and bind its GPU: local rank r uses GPU r mod count."""
    global _selected
    name = resolve_name(requested)
    if _selected is not None:
        if _selected.name != name:
            raise BadInput(f"backend already set to {_selected.name!r} in this process; cannot switch to {name!r}")
        return _selected
    if name == "cpu":
        _selected = Backend("cpu")
    elif SIMULATED:
        _selected = Backend("cuda", simulated=True, device_index=0, device_name="CUDA simulator")
    else:
        index = local_rank % len(cuda.gpus)
        cuda.select_device(index)
        device = cuda.get_current_device()
        _selected = Backend("cuda", device_index=index, device_name=_text(device.name))
    return _selected


def current_backend() -> Backend:
    """The process backend; chosen automatically on first use if `select_backend` was not called."""
    return _selected or select_backend()


def _text(name: str | bytes) -> str:
    return name.decode() if isinstance(name, bytes) else str(name)
