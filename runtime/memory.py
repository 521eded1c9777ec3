"""Peak memory of a training process, two ways (as the zero-order RNN paper's Table 1 needs):

- device: bytes in use on the device by this process's context, sampled at `sample()` calls
  (CUDA: total - free of the current context, which includes the context itself; CPU: the
  process's peak resident set size);
- own: the peak of the arrays this process allocated itself (CPU: tracemalloc, which sees every
  NumPy allocation; CUDA: not tracked, reported as None).
"""

import resource
import sys
import tracemalloc


class MemoryMeter:
    def __init__(self, backend_name):
        self.cuda = backend_name == "cuda"
        self.peak_device = 0
        if not self.cuda and not tracemalloc.is_tracing():
            tracemalloc.start()
        self.reset()

    def reset(self):
        """Start a new measurement window (peaks from here on)."""
        self.peak_device = 0
        if not self.cuda:
            tracemalloc.reset_peak()
        self.sample()

    def sample(self):
        if self.cuda:
            from eggnog.kernels.cuda_api import cuda

            free, total = cuda.current_context().get_memory_info()
            self.peak_device = max(self.peak_device, total - free)
        else:
            # ru_maxrss is KiB on Linux, bytes on macOS; it is a process-lifetime peak.
            scale = 1 if sys.platform == "darwin" else 1024
            self.peak_device = max(self.peak_device, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale)

    @property
    def peak_own(self):
        return None if self.cuda else tracemalloc.get_traced_memory()[1]

    def stop(self):
        if not self.cuda and tracemalloc.is_tracing():
            tracemalloc.stop()
