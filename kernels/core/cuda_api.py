"""`numba.cuda` for every kernel: kernels and launchers take `cuda` from here, with the launch helpers
every family shares (array types of signatures, grid sizes, float64 views). Outside this module only
code generation and checks reach into numba.cuda's internals: the inline-PTX intrinsics (core/mma.py,
core/loads.py, core/cuda_fast_math.py: numba.cuda.extending, cgutils) and the node checks
(checks/platform_check.py: the driver; checks/ptx_compile.py: the dispatcher).

Moving to another CUDA target for numba (numba-cuda-mlir) is a change of this import and of those. `kernel` records
every CUDA kernel with the signatures its launcher uses, so the PTX check compiles them all without a
GPU; on the simulator it also records the argument types of every launch, so a test can compare them.
"""

from contextvars import ContextVar
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

# The numba stream kernels launch on (None: the default stream), set by streams.kernels_on_stream; a
# context variable, so threads and asyncio tasks each keep their own.
LAUNCH_STREAM: ContextVar = ContextVar("eggnog_launch_stream", default=None)


def with_launch_stream(launch_config):
    """`launch_config` with the stream of LAUNCH_STREAM: [grid, block] gains it as third entry, a config
    naming the default stream (0) has it replaced, a config naming another stream keeps its own."""
    stream = LAUNCH_STREAM.get()
    if stream is None:
        return launch_config
    if len(launch_config) == 2:
        return (*launch_config, stream)
    if len(launch_config) > 2 and isinstance(launch_config[2], int) and launch_config[2] == 0:
        return (*launch_config[:2], stream, *launch_config[3:])
    return launch_config


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
        if SIMULATED:
            compiled = _RecordingKernel(spec.name, compiled)
        if kernel_timer.ENABLED:
            return _StreamedTimedKernel(spec.name, compiled, cuda)
        if not SIMULATED:
            compiled.__class__ = _stream_dispatcher_class(type(compiled))  # still a CUDADispatcher
        return compiled

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
    """`a` itself when it is already a numba device array, a zero-copy view of any other GPU array (one
    with `__cuda_array_interface__`: PyTorch, CuPy, JAX), else a contiguous device copy of a host array
    (NumPy, or a CPU tensor read through DLPack) of `dtype` if given. GPU arrays keep their dtype."""
    view = device_view(a)
    if view is not None:
        return view
    host = np.from_dlpack(a) if hasattr(a, "__dlpack__") and not isinstance(a, np.ndarray) else a
    return cuda.to_device(np.ascontiguousarray(host, dtype))


def device_view(value):
    """A numba device array over the memory of `value`, without a copy: `value` itself when it is one,
    a view when it has `__cuda_array_interface__`; None for anything else. On the simulator, whose
    "device" memory is host memory, the view wraps the interface's pointer in a simulated device array."""
    if getattr(value, "__cuda_ndarray__", False):
        return value
    interface = getattr(value, "__cuda_array_interface__", None)
    if interface is None or isinstance(value, np.ndarray):
        return None
    if SIMULATED:
        return cuda.cudadrv.devicearray.FakeCUDAArray(_host_view_of_interface(interface, value))
    return cuda.as_cuda_array(value)


class _InterfaceOwner:
    """Hands a CUDA array interface to NumPy as an array interface (the fields are the same), keeping
    the object that owns the memory alive as long as the NumPy view."""

    def __init__(self, interface, owner):
        self.owner = owner
        self.__array_interface__ = {key: interface[key] for key in ("shape", "typestr", "data", "strides")
                                    if key in interface} | {"version": 3}


def _host_view_of_interface(interface, owner):
    if interface.get("mask") is not None:
        raise BadInput(f"a {type(owner).__name__} with a mask in its __cuda_array_interface__ is not supported")
    shape = tuple(interface["shape"])
    if 0 in shape:  # an empty array may carry a null pointer, which NumPy refuses
        return np.empty(shape, np.dtype(interface["typestr"]))
    return np.asarray(_InterfaceOwner(interface, owner))


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


_STREAM_DISPATCHERS: dict = {}  # numba's dispatcher class -> its subclass launching on LAUNCH_STREAM


def _stream_dispatcher_class(dispatcher_class):
    """`dispatcher_class` with launches on LAUNCH_STREAM; a subclass, so checks that look for numba's
    dispatchers (the PTX inventory) still find the kernels."""
    made = _STREAM_DISPATCHERS.get(dispatcher_class)
    if made is None:
        def __getitem__(self, launch_config):
            return dispatcher_class.__getitem__(self, with_launch_stream(launch_config))

        made = _STREAM_DISPATCHERS[dispatcher_class] = type(dispatcher_class.__name__, (dispatcher_class,),
                                              {"__getitem__": __getitem__, "__module__": __name__})
    return made


class _StreamedTimedKernel(kernel_timer.TimedKernel):
    """A timed kernel whose launches, and the events around them, go on LAUNCH_STREAM."""

    def __getitem__(self, launch_config):
        return super().__getitem__(with_launch_stream(launch_config))


class _RecordingKernel:
    """A simulated kernel that notes the argument types of each launch before running it (unless a
    device_counts.tracing window runs none); launches go on LAUNCH_STREAM (the simulator runs every
    stream in order on the host)."""

    def __init__(self, name, compiled):
        self._name, self._compiled = name, compiled

    def __getitem__(self, launch_config):
        launch_config = with_launch_stream(launch_config)
        configured = self._compiled[launch_config]

        def launch(*args):
            LAUNCHES.setdefault(self._name, set()).add(tuple(launch_type(a) for a in args))
            device_counts.note_launch(self._name, args, launch_config)
            if device_counts.kernels_run():
                return configured(*args)

        return launch

    def __getattr__(self, attr):
        return getattr(self._compiled, attr)
