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

import numpy as np

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


def note_launch(name, args):
    """A kernel launch (called by cuda_api's simulated kernels): host arrays among its arguments are
    allocated on and uploaded to the device by the launch, and copied back after it (counted there)."""
    for counts in _OPEN:
        counts.by_kernel[name.rsplit(".", 1)[-1]] += 1
    hosted = [a for a in args if isinstance(a, np.ndarray) and a.ndim > 0]
    _add(launches=1, allocations=len(hosted), allocated_bytes=sum(block_size(a.nbytes) for a in hosted),
         uploads=len(hosted), uploaded_bytes=sum(a.nbytes for a in hosted))


def _counted_call(call, allocation=False, upload=False):
    def counted(*args, **kwargs):
        array = call(*args, **kwargs)
        if array is not None:  # to_device(..., to=existing) uploads by copy_to_device, counted there
            nbytes = int(array.nbytes)
            _add(allocations=int(allocation), allocated_bytes=nbytes if allocation else 0,
                 uploads=int(upload), uploaded_bytes=nbytes if upload else 0)
        return array

    return counted


def install(cuda):
    """Count the device cache's misses and the simulated `cuda` module's mapped arrays, uploads and
    synchronisation; idempotent."""
    global _installed
    if _installed:
        return
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    BlockCache.on_miss.append(lambda size: _add(allocations=1, allocated_bytes=size))
    cuda.mapped_array = _counted_call(cuda.mapped_array, allocation=True)
    cuda.to_device = _counted_call(cuda.to_device, upload=True)
    synchronize, to_host, to_device = cuda.synchronize, FakeCUDAArray.copy_to_host, FakeCUDAArray.copy_to_device

    def counted_synchronize():
        _add(host_waits=1)
        return synchronize()

    def counted_to_host(self, *args, **kwargs):
        _add(host_waits=1)
        return to_host(self, *args, **kwargs)

    def counted_to_device(self, ary, *args, **kwargs):
        if not isinstance(ary, FakeCUDAArray):
            _add(uploads=1, uploaded_bytes=int(np.asarray(ary).nbytes))
        return to_device(self, ary, *args, **kwargs)

    cuda.synchronize = counted_synchronize
    FakeCUDAArray.copy_to_host, FakeCUDAArray.copy_to_device = counted_to_host, counted_to_device
    _installed = True
