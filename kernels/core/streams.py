"""The caller's CUDA stream: inside `with kernels_on_stream(stream):` every kernel made by
`cuda_api.kernel` launches on `stream` instead of the default stream, so eggnog's ops queue behind and
ahead of a PyTorch, CuPy or JAX computation on that stream without a device-wide synchronisation.

`stream` may be a numba stream, an int handle (a `cudaStream_t` value; 0 is the default stream), or an
object naming one: `cuda_stream` (torch.cuda.Stream), `ptr` (cupy.cuda.Stream) or `__cuda_stream__`
(returns (version, handle)). Foreign handles are wrapped by numba's `cuda.external_stream`.

What follows the stream: kernel launches, and the copies that launches make of host arguments. Device
allocations and uploads inside launchers (`to_device`, `device_array`) stay on the default stream, which
orders them before work on other blocking streams; results read back with `copy_to_host` should be
read after the stream is synchronised. On the simulator every stream runs in order on the host, and a
foreign handle becomes a simulated stream that only remembers it.
"""

from contextlib import contextmanager

from eggnog.kernels.core.cuda_api import LAUNCH_STREAM, SIMULATED, cuda
from eggnog.runtime.errors import BadInput


class SimulatedExternalStream:
    """A foreign stream on the simulator (which cannot wrap one): its handle, and no-op synchronisation."""

    def __init__(self, handle):
        self.handle = handle

    def synchronize(self):
        pass

    @contextmanager
    def auto_synchronize(self):
        yield self


def stream_handle(stream: object) -> int | None:
    """The `cudaStream_t` value a foreign stream object names (an int, `cuda_stream`, `ptr` or
    `__cuda_stream__`), or None when `stream` is none of these."""
    if isinstance(stream, bool):
        return None
    if isinstance(stream, int):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        version_and_handle = stream.__cuda_stream__()
        return int(version_and_handle[1])
    for attribute in ("cuda_stream", "ptr"):
        handle = getattr(stream, attribute, None)
        if isinstance(handle, int) and not isinstance(handle, bool):
            return handle
    return None


def _is_numba_stream(stream: object) -> bool:
    if SIMULATED:
        return isinstance(stream, (cuda.stream, SimulatedExternalStream))
    return isinstance(stream, cuda.cudadrv.driver.Stream)


def as_numba_stream(stream):
    """The numba stream kernels launch on for `stream` (see the module); None for the default stream."""
    if stream is None or _is_numba_stream(stream):
        return stream
    handle = stream_handle(stream)
    if handle is None or handle < 0:
        raise BadInput(f"stream must be a numba stream, a non-negative int handle or an object with cuda_stream, "
                       f"ptr or __cuda_stream__, not a {type(stream).__name__}")
    if handle == 0:
        return None
    return SimulatedExternalStream(handle) if SIMULATED else cuda.external_stream(handle)


@contextmanager
def kernels_on_stream(stream):
    """Launch every kernel inside the block on `stream` (see the module); the previous stream (or the
    default) is restored on exit. Yields the numba stream used (None for the default stream)."""
    numba_stream = as_numba_stream(stream)
    token = LAUNCH_STREAM.set(numba_stream)
    try:
        yield numba_stream
    finally:
        LAUNCH_STREAM.reset(token)


def current_stream():
    """The numba stream kernels launch on here (None: the default stream)."""
    return LAUNCH_STREAM.get()
