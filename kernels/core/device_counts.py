"""What a stretch of host code asks of the device, counted on numba's simulator: kernel launches (by
kernel), device allocations, uploads from the host and host waits. The host path of a training step
(launches, allocations, transfers, synchronisations) is what these count, so the counts under the
simulator are the GPU's; the time each costs is not counted.

    with counting() as counts:
        trainer.step(...)
    counts.launches, counts.allocations, counts.uploads, counts.host_waits, counts.by_kernel

More in docs/internals.md (kernels/core/device_counts.py)."""

from collections import Counter
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from eggnog.kernels.core import device_pool
from eggnog.kernels.core.device_pool import BlockCache, block_size


@dataclass
class DeviceCounts:
    launches: int = 0
    allocations: int = 0
    allocated_bytes: int = 0
    uploads: int = 0
    uploaded_bytes: int = 0
    host_waits: int = 0
    by_kernel: Counter = field(default_factory=Counter)

    def as_dict(self):
        return {**asdict(self), "by_kernel": dict(self.by_kernel)}


_OPEN: list[DeviceCounts] = []  # the windows counting now (nested windows all count)
_installed = False


@contextmanager
def counting():
    """A window whose launches, allocations, uploads and host waits land in the DeviceCounts it yields."""
    if not _installed:
        raise RuntimeError("device counts exist on the CUDA simulator only (NUMBA_ENABLE_CUDASIM=1)")
    counts = DeviceCounts()
    _OPEN.append(counts)
    try:
        yield counts
    finally:
        _OPEN.remove(counts)


def _add(**amounts):
    for counts in _OPEN:
        for name, amount in amounts.items():
            setattr(counts, name, getattr(counts, name) + amount)


_TRACES: list[list[dict[str, Any]]] = []  # the tracing windows open now
_NOT_RUN: list[list[dict[str, Any]]] = []  # tracing windows that run no kernel


@contextmanager
def tracing(run=True):
    """A window whose kernel launches are listed, as the static model takes them (bench/static_report/
    model.py): {"kernel", "grid", "block", "shared", "args"}, an array argument as its shape and dtype, a
    scalar as its value; each host wait as {"wait": true} where it came. With run=False no kernel runs,
    so that a step can be traced at sizes the simulator could never run (what the kernels would have
    written reads as zeros: new device memory is zero-filled meanwhile, so a loss read back is finite)."""
    if not _installed:
        raise RuntimeError("launches are traced on the CUDA simulator only (NUMBA_ENABLE_CUDASIM=1)")
    launches: list[dict[str, Any]] = []
    _TRACES.append(launches)
    if not run:
        _NOT_RUN.append(launches)
    device_pool.ZERO_FILLED = bool(_NOT_RUN)
    try:
        yield launches
    finally:
        _TRACES.remove(launches)
        if not run:
            _NOT_RUN.remove(launches)
        device_pool.ZERO_FILLED = bool(_NOT_RUN)


def kernels_run():
    return not _NOT_RUN


def _traced_argument(a):
    if hasattr(a, "shape") and hasattr(a, "dtype") and np.ndim(a) > 0:
        return {"shape": [int(d) for d in a.shape], "dtype": str(a.dtype)}
    if isinstance(a, (bool, np.bool_)):
        return bool(a)
    if isinstance(a, (int, np.integer)):
        return int(a)
    if isinstance(a, (float, np.floating)):
        return float(a)
    raise TypeError(f"a launch argument of type {type(a).__name__} cannot be traced")


def _dims(d):
    return [int(v) for v in d] if isinstance(d, (tuple, list)) else int(d)


def note_launch(name, args, config):
    """A kernel launch (called by cuda_api's simulated kernels, with its [grid, block, stream, shared]):
    host arrays among its arguments are allocated on and uploaded to the device by the launch, and
    copied back after it (counted there)."""
    if _TRACES:
        grid, block, *rest = config
        launch = {"kernel": name, "grid": _dims(grid), "block": _dims(block),
                  "shared": int(rest[1]) if len(rest) > 1 else 0, "args": [_traced_argument(a) for a in args]}
        for launches in _TRACES:
            launches.append(launch)
    for counts in _OPEN:
        counts.by_kernel[name.rsplit(".", 1)[-1]] += 1
    hosted = [a for a in args if isinstance(a, np.ndarray) and a.ndim > 0]
    _add(launches=1, allocations=len(hosted), allocated_bytes=sum(block_size(a.nbytes) for a in hosted),
         uploads=len(hosted), uploaded_bytes=sum(a.nbytes for a in hosted))


def _waited():
    """A host wait: counted, and marked in the traces ({"wait": true} between launches)."""
    _add(host_waits=1)
    for launches in _TRACES:
        launches.append({"wait": True})


def _on_device(ary):
    """Whether `ary` is device memory: a copy from it stays on the device and is no upload."""
    return hasattr(ary, "copy_to_host") or hasattr(ary, "__cuda_array_interface__")


def _counted_call(call, allocation=False, upload=False):
    def counted(*args, **kwargs):
        array = call(*args, **kwargs)
        if array is not None:  # to_device(..., to=existing) uploads by copy_to_device, counted there
            nbytes = int(array.nbytes)
            uploaded = upload and not _on_device(args[0] if args else kwargs.get("ary"))
            _add(allocations=int(allocation), allocated_bytes=nbytes if allocation else 0,
                 uploads=int(uploaded), uploaded_bytes=nbytes if uploaded else 0)
        return array

    return counted


def _device_to_device_kept(to_device):
    """The simulator's to_device(ary, to=existing) hands copy_to_device a host copy of ary, which would count
    as an upload: a device array is given to copy_to_device as it is."""

    def to_device_kept(ary, stream=0, copy=True, to=None):
        if to is not None and _on_device(ary):
            to.copy_to_device(ary, stream=stream)
            return None  # what the simulator's to_device(..., to=existing) returns
        return to_device(ary, stream=stream, copy=copy, to=to)

    return to_device_kept


def install(cuda):
    """Count the device cache's misses and the simulated `cuda` module's mapped arrays, uploads and
    synchronisation; idempotent."""
    global _installed
    if _installed:
        return
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    BlockCache.on_miss.append(lambda size: _add(allocations=1, allocated_bytes=size))
    cuda.mapped_array = _counted_call(cuda.mapped_array, allocation=True)
    cuda.to_device = _counted_call(_device_to_device_kept(cuda.to_device), upload=True)
    synchronize, to_host, to_device = cuda.synchronize, FakeCUDAArray.copy_to_host, FakeCUDAArray.copy_to_device

    def counted_synchronize():
        _waited()
        return synchronize()

    def counted_to_host(self, *args, **kwargs):
        _waited()
        return to_host(self, *args, **kwargs)

    def counted_to_device(self, ary, *args, **kwargs):
        if not _on_device(ary):
            _add(uploads=1, uploaded_bytes=int(np.asarray(ary).nbytes))
        return to_device(self, ary, *args, **kwargs)

    cuda.synchronize = counted_synchronize
    FakeCUDAArray.copy_to_host, FakeCUDAArray.copy_to_device = counted_to_host, counted_to_device
    _installed = True
