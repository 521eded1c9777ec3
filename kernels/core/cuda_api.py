"""`numba.cuda` for every kernel: kernels and launchers take `cuda` from here, with the launch helpers
every family shares (array types of signatures, grid sizes, float64 views). Outside this module only
code generation and checks reach into numba.cuda's internals: the inline-PTX intrinsics (core/mma.py,
core/loads.py, core/cuda_fast_math.py: numba.cuda.extending, cgutils) and the node checks
(checks/platform_check.py: the driver; checks/ptx_compile.py: the dispatcher).

Moving to another CUDA target for numba (numba-cuda-mlir) is a change of this import and of those. `kernel` records
every CUDA kernel with the signatures its launcher uses, so the PTX check compiles them all without a
GPU; on the simulator it also records the argument types of every launch, so a test can compare them.
"""

from dataclasses import dataclass

import numba
import numpy as np

from eggnog.kernels.core import kernel_timer
from eggnog.kernels.core.numpy_compat import restore_removed_aliases
from eggnog.runtime.errors import BadInput

restore_removed_aliases()  # before numba-cuda loads its typing: numpy 2.5 removed names it overloads

from numba import config, cuda  # noqa: E402

# NUMBA_ENABLE_CUDASIM=1 (read by numba at import) runs kernels on the simulator.
SIMULATED = bool(config.ENABLE_CUDASIM)
if SIMULATED:  # allocations reuse freed blocks, refuse the shapes the real target refuses, and are counted
    from eggnog.kernels.core import device_counts
    from eggnog.kernels.core.device_pool import install_simulated
    from eggnog.kernels.core.simulator_strict import install as _strict_allocations

    install_simulated(cuda)
    _strict_allocations(cuda)
    device_counts.install(cuda)
else:  # device memory reused through numba's memory manager (before any context exists)
    from eggnog.kernels.core.device_pool import caching_manager_class

    cuda.set_memory_manager(caching_manager_class(cuda.cudadrv.driver.NumbaCUDAMemoryManager))

# Signature types: C-contiguous arrays of the launchers, and the scalar types they pass.
F32_1D, F32_2D, F32_3D, F32_4D = (numba.float32[::1], numba.float32[:, ::1], numba.float32[:, :, ::1],
                                  numba.float32[:, :, :, ::1])
F16_1D = numba.types.float16[::1]
I8_1D, I8_2D = numba.int8[::1], numba.int8[:, ::1]
I32_1D = numba.int32[::1]
I64_1D, I64_2D = numba.int64[::1], numba.int64[:, ::1]
U8_1D, U8_2D = numba.uint8[::1], numba.uint8[:, ::1]
I32, I64, F32, BOOL = numba.int32, numba.int64, numba.float32, numba.boolean

THREADS = 256  # default threads per block of element-wise kernels


@dataclass(frozen=True)
class KernelSpec:
    name: str
    pyfunc: object
    signatures: tuple
    float64_free: bool
    tensor_cores: bool  # its hot loop must issue IMMA/HMMA (checked on the SASS)
    block: int  # threads per block of its launcher (for the occupancy of the static report)
    launch_bounds: int | None = None  # the most threads per block it may be launched with, told to the compiler


KERNELS: list[KernelSpec] = []
LAUNCHES: dict[str, set] = {}  # kernel name -> argument-type tuples seen on the simulator


def kernel(*signatures, float64_free=True, tensor_cores=False, block=THREADS, launch_bounds=None):
    """`cuda.jit` that also records the kernel for the PTX check and the static report (`block`: the
    threads per block its launcher uses; `tensor_cores`: its hot loop is meant to run on tensor cores;
    `launch_bounds`: the most threads per block it is launched with, so ptxas keeps its registers
    within 65536 / launch_bounds; the simulator takes no bounds).

    Compilation stays lazy (no signatures are passed to `cuda.jit`), so importing a kernel module
    needs no GPU; `signatures` are the types the launchers pass. What the static report reads from
    these traits and from the kernel's module: kernels/STATIC_REPORT.md.
    """

    def wrap(fn):
        spec = KernelSpec(f"{fn.__module__}.{fn.__name__}", fn, signatures, float64_free, tensor_cores, block,
                          launch_bounds)
        KERNELS.append(spec)
        bounds = {"launch_bounds": launch_bounds} if launch_bounds and not SIMULATED else {}
        compiled = cuda.jit(cache=True, **bounds)(fn)
        compiled = _RecordingKernel(spec.name, compiled) if SIMULATED else compiled
        return kernel_timer.TimedKernel(spec.name, compiled, cuda) if kernel_timer.ENABLED else compiled

    return wrap


def device_function(fn):
    """Compile a plain Python scalar function as a CUDA device function."""
    return cuda.jit(device=True)(fn)


def allow_dynamic_shared(dispatcher, args, nbytes):
    """Let the kernel compiled for `args` take `nbytes` of dynamic shared memory: above 48 KiB the
    driver needs the per-function opt-in (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)."""
    if SIMULATED or nbytes <= 48 * 1024:
        return
    from numba.cuda.cudadrv.driver import binding, driver

    compiled = dispatcher.compile(tuple(launch_type(a) for a in args))
    function = compiled._codelibrary.get_cufunc()
    attribute = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    driver.cuKernelSetAttribute(attribute, int(nbytes), function.handle, function.device.id)


def blocks(n, threads=THREADS, max_blocks=None):
    """(grid, block) of a 1-D launch covering n elements; a grid-stride kernel may cap the grid at
    `max_blocks` and loop over the rest."""
    grid = max(1, (n + threads - 1) // threads)
    return (grid if max_blocks is None else min(grid, max_blocks)), threads


def grid2(width, height, block=(32, 8)):
    """(grid, block) of a 2-D launch: x over `width`, y over `height`."""
    return ((width + block[0] - 1) // block[0], (height + block[1] - 1) // block[1]), block


def flat(a):
    """A 1-D view of a contiguous array (host or device), for element-wise kernels."""
    return a.reshape(a.size)


def on_device(a, dtype=None):
    """`a` itself when it is already a device array, else a contiguous device copy (of `dtype` if given)."""
    return a if hasattr(a, "copy_to_host") else cuda.to_device(np.ascontiguousarray(a, dtype))


def device_zeros(shape, dtype=np.float32):
    """Zeros made on the device (a memset), not uploaded from the host; any integer shape."""
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(d) for d in shape)
    array = cuda.device_array(shape, dtype)
    if array.size:
        if SIMULATED:
            array[...] = 0  # the simulator's device array is host memory
        else:
            array.gpu_data.memset(0)
    return array


def f64(a):
    """A host array as float64: what NumPy references compute in."""
    return np.asarray(a, np.float64)


def require(condition, message):
    """Refuse arguments whose shapes do not fit: one sentence, as the user error BadInput."""
    if not condition:
        raise BadInput(message)


def launch_type(value):
    """The numba type a launch gives this argument, as the real dispatcher would see it."""
    host = getattr(value, "_ary", value)  # the simulator's device arrays wrap a NumPy array
    return numba.typeof(host)


class _RecordingKernel:
    """A simulated kernel that notes the argument types of each launch before running it (unless a
    device_counts.tracing window runs none)."""

    def __init__(self, name, compiled):
        self._name, self._compiled = name, compiled

    def __getitem__(self, launch_config):
        configured = self._compiled[launch_config]

        def launch(*args):
            LAUNCHES.setdefault(self._name, set()).add(tuple(launch_type(a) for a in args))
            device_counts.note_launch(self._name, args, launch_config)
            if device_counts.kernels_run():
                return configured(*args)

        return launch

    def __getattr__(self, attr):
        return getattr(self._compiled, attr)
