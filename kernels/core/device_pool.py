"""Device memory reused instead of allocated: a cache of freed blocks, by size, that every device
allocation draws from first. A training step asks for the same shapes each time, so after its first
step it allocates nothing: a cudaMalloc (or its simulated twin) happens only on a miss.

- On a GPU, `CachingMemoryManager` is numba's memory manager (an EMM plugin, installed by cuda_api
  before any context exists): an array's memory goes back to the cache when numba would free it, that
  is when the array and every view of it are gone. Reuse is stream-ordered: eggnog launches on one
  stream, so work queued on a block finishes before the work that reuses it. An allocation that runs
  out of memory empties the cache and tries again. `live` and `peak` are the bytes handed out.
- On numba's simulator, `install_simulated` makes `device_array`, `device_array_like` and `to_device`
  draw from the same kind of cache, so the counts of a simulated step (kernels/core/device_counts.py)
  are the GPU's.

Blocks are rounded up to 256 bytes (the alignment cudaMalloc gives) and reused only at their size.
"""

import math
import weakref
from collections import defaultdict

import numpy as np

GRANULE = 256


def block_size(nbytes):
    return max(GRANULE, -(-int(nbytes) // GRANULE) * GRANULE)


class BlockCache:
    """Free blocks by size. `take` returns a free block of the size or a new one from `allocate`
    (a miss, which every `on_miss` listener hears of); `give` returns one."""

    on_miss: list = []  # listeners (size) of every cache's misses: the simulator's device counts

    def __init__(self, allocate):
        self._allocate, self._free = allocate, defaultdict(list)
        self.misses = self.hits = 0

    def take(self, size):
        free = self._free[size]
        if free:
            self.hits += 1
            return free.pop()
        self.misses += 1
        for listener in BlockCache.on_miss:
            listener(size)
        return self._allocate(size)

    def give(self, size, block):
        self._free[size].append(block)

    @property
    def cached_bytes(self):
        return sum(size * len(blocks) for size, blocks in self._free.items())

    def clear(self):
        self._free.clear()


# ---- the GPU: numba's memory manager over a cache ----------------------------------------------------

def caching_manager_class(base):
    """A subclass of numba's memory manager `base` whose device allocations come from a BlockCache."""
    from numba.cuda.cudadrv import driver

    class CachingMemoryManager(base):  # type: ignore[misc, valid-type]  # numba's class, given at run time
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.cache = BlockCache(self._allocate_block)
            self._leases = {}
            self.live = self.peak = 0

        def _allocate_block(self, size):
            try:
                return super().memalloc(size)
            except driver.CudaAPIError as error:
                if error.code != driver.binding.CUresult.CUDA_ERROR_OUT_OF_MEMORY:
                    raise
            self.cache.clear()  # once more, with the cached blocks freed
            return super().memalloc(size)

        def memalloc(self, size):
            rounded = block_size(size)
            block = self.cache.take(rounded)

            def back():
                self._leases.pop(key, None)
                self.live -= rounded
                self.cache.give(rounded, block)

            # freed (back to the cache) when its last owner, the array or a view of it, is gone
            lease = driver.AutoFreePointer(weakref.proxy(self.context), block.device_pointer, size, finalizer=back)
            key = id(lease)
            self._leases[key] = lease
            self.live += rounded
            self.peak = max(self.peak, self.live)
            return lease.own()

        def reset(self):
            self.cache.clear()
            self._leases.clear()
            super().reset()

    return CachingMemoryManager


# ---- the simulator: the same cache under numba's simulated allocators -----------------------------

class _Lease:
    """Host storage seen as one array; alive while any view of that array is (NumPy keeps an exporter
    of __array_interface__ as the base of the arrays made from it), returned to the cache after."""

    def __init__(self, storage, shape, dtype):
        self.storage = storage
        self.__array_interface__ = {"shape": shape, "typestr": np.dtype(dtype).str, "version": 3,
                                    "data": (storage.ctypes.data, False)}


SIMULATED_CACHE = BlockCache(lambda size: np.empty(size, np.uint8))
ZERO_FILLED = False  # set by device_counts.tracing(run=False)


def _missed(nbytes):
    """An allocation the cache does not serve, heard by its listeners as a miss."""
    for listener in BlockCache.on_miss:
        listener(block_size(nbytes))


def _pooled(shape, dtype):
    """A C-contiguous host array from SIMULATED_CACHE, or None (a miss) where the cache does not serve it."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes == 0 or dtype.hasobject or dtype.char in "Mm":
        _missed(nbytes)
        return None
    size = block_size(nbytes)
    storage = SIMULATED_CACHE.take(size)
    if ZERO_FILLED:  # kernels are not run: what they would have written reads as zeros, never as NaN
        storage[:nbytes] = 0
    lease = _Lease(storage, shape, dtype)
    weakref.finalize(lease, SIMULATED_CACHE.give, size, storage)
    return np.asarray(lease)


def install_simulated(cuda):
    """Route the simulated `cuda` module's device allocations through SIMULATED_CACHE; idempotent."""
    if getattr(cuda.device_array, "pooled", False):
        return
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    device_array, device_array_like, to_device = cuda.device_array, cuda.device_array_like, cuda.to_device

    def pooled_device_array(shape, dtype=np.float64, strides=None, order="C", stream=0):
        if strides is not None or order != "C":
            _missed(np.dtype(dtype).itemsize * math.prod((shape,) if isinstance(shape, int) else shape))
            host = None
        else:
            host = _pooled(shape, dtype)
        if host is None:
            return device_array(shape, dtype=dtype, strides=strides, order=order, stream=stream)
        return FakeCUDAArray(host, stream=stream)

    def pooled_device_array_like(ary, stream=0):
        if not ary.flags["C_CONTIGUOUS"]:
            _missed(ary.nbytes)
            return device_array_like(ary, stream=stream)
        return pooled_device_array(ary.shape, ary.dtype, stream=stream)

    def pooled_to_device(ary, stream=0, copy=True, to=None):
        host = np.asarray(ary)
        if to is not None:
            return to_device(ary, stream=stream, copy=copy, to=to)
        if not host.flags["C_CONTIGUOUS"]:
            _missed(host.nbytes)
            return to_device(ary, stream=stream, copy=copy)
        pooled = _pooled(host.shape, host.dtype)
        if pooled is None:
            return to_device(ary, stream=stream, copy=copy)
        pooled[...] = host
        return FakeCUDAArray(pooled, stream=stream)

    for fn in (pooled_device_array, pooled_device_array_like, pooled_to_device):
        fn.pooled = True  # type: ignore[union-attr]  # a mark install() reads
    cuda.device_array, cuda.device_array_like, cuda.to_device = (pooled_device_array, pooled_device_array_like,
                                                                 pooled_to_device)
