"""Peak memory of this process over a window that `reset()` opens, as two figures:

- process: all the memory the process holds. On the CPU (and the CUDA simulator), the peak resident
  set size: VmHWM of /proc/self/status, reset by writing "5" to /proc/self/clear_refs (Linux); None
  where that reset is refused, because the only portable figure, ru_maxrss, is a lifetime peak. On a
  GPU, the device memory NVML reports for this process id (context, arrays, numba's pending frees):
  the largest value seen by `sample()`; None without pynvml or when NVML lists no process with this
  id (a container with its own process ids).
- own: the arrays the process allocated itself. On the CPU only with `trace_host=True`, through
  tracemalloc: NumPy and Python allocations, not arrays made inside compiled (njit) code.
  tracemalloc slows every allocation, so it belongs in a run that is not timed. On a GPU, the exact
  peak of the device bytes held by arrays, as the caching memory manager (kernels/core/device_pool.py)
  hands them out (its cached free blocks are not counted: they are in the process figure).

`sources()` names the measure behind each figure, for results to record.
"""

import os
import re
import tracemalloc

from eggnog.runtime.optional import optional_import


def _reset_resident_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _resident_peak():
    with open("/proc/self/status") as f:
        return int(re.search(r"^VmHWM:\s+(\d+) kB", f.read(), re.M).group(1)) * 1024


def _nvml():
    """pynvml, initialised; None when it is not installed (said once on stderr) or NVML does not start."""
    pynvml = optional_import(
        "pynvml", "the process's device memory is not measured (peak_process_bytes is null); device "
        "memory is read from numba's context instead, as the bytes of the arrays numba allocated (the "
        "nvidia-ml-py package provides pynvml)")
    if pynvml is None:
        return None
    try:
        pynvml.nvmlInit()
        return pynvml
    except Exception:  # an NVMLError of a driver without NVML
        return None


def _nvml_process_bytes(nvml):
    """Device bytes NVML attributes to this process over all GPUs; None when it lists none."""
    try:
        used = [p.usedGpuMemory for i in range(nvml.nvmlDeviceGetCount())
                for p in nvml.nvmlDeviceGetComputeRunningProcesses(nvml.nvmlDeviceGetHandleByIndex(i))
                if p.pid == os.getpid() and p.usedGpuMemory is not None]
    except nvml.NVMLError:  # e.g. not supported under MIG or in some containers
        return None
    return sum(used) if used else None


class MemoryMeter:
    def __init__(self, backend, trace_host=False):
        """`backend`: a kernels.backend.Backend."""
        self.gpu = backend.name == "cuda" and not backend.simulated
        self.trace_host = trace_host and not self.gpu
        if self.trace_host and not tracemalloc.is_tracing():
            tracemalloc.start()
        self._manager = self._nvml = None
        if self.gpu:
            from eggnog.kernels.core.cuda_api import cuda

            self._manager = cuda.current_context().memory_manager
            self._nvml = _nvml()
        self.nvml = self._nvml is not None
        self.reset()

    def reset(self):
        """Start a new measurement window (peaks from here on)."""
        self.peak_process = self.peak_own = None
        if self.gpu:
            self._manager.peak = self._manager.live
        else:
            self._resettable = _reset_resident_peak()
            if self.trace_host:
                tracemalloc.reset_peak()
        self.sample()

    def sample(self):
        """Take the current figures into the peaks (on a GPU the process figure exists only as sampled here)."""
        if not self.gpu:
            return
        process = _nvml_process_bytes(self._nvml) if self._nvml else None
        if process is not None:
            self.peak_process = max(self.peak_process or 0, process)
        self.peak_own = max(self.peak_own or 0, self._manager.peak)

    def peaks(self):
        """{"peak_process_bytes": int or None, "peak_own_bytes": int or None} of the window so far."""
        if self.gpu:
            self.sample()
            return {"peak_process_bytes": self.peak_process, "peak_own_bytes": self.peak_own}
        return {"peak_process_bytes": _resident_peak() if self._resettable else None,
                "peak_own_bytes": tracemalloc.get_traced_memory()[1] if self.trace_host else None}

    def sources(self):
        """What each figure measures, in words."""
        if self.gpu:
            return {"process": "NVML per-process device memory, largest sampled" if self.nvml else None,
                    "own": "device arrays, exact peak"}
        return {"process": "resident set high-water mark (VmHWM after clear_refs)" if self._resettable else None,
                "own": "tracemalloc (NumPy and Python allocations)" if self.trace_host else None}

    def stop(self):
        if self.trace_host and tracemalloc.is_tracing():
            tracemalloc.stop()
        if self._nvml:
            self._nvml.nvmlShutdown()
            self._nvml = None
