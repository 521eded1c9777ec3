"""Per-kernel device time, for profiling: with EGGNOG_KERNEL_TIMES=1 in the environment when the kernel
modules are imported, every kernel recorded by `cuda_api.kernel` is launched between two CUDA events on
its own stream, and `collect()` sums the elapsed times by kernel. Off by default: an event pair per
launch costs a few microseconds of host time, and the list of events grows until collected.
"""

import os
from typing import Any

ENABLED = os.environ.get("EGGNOG_KERNEL_TIMES") == "1"
_PENDING: list[tuple[str, Any, Any]] = []  # (kernel name, start event, end event), in launch order


class TimedKernel:
    """A kernel whose launches are bracketed by events; everything else goes to the kernel itself."""

    def __init__(self, name, compiled, cuda):
        self._name, self._compiled, self._cuda = name, compiled, cuda

    def __getitem__(self, launch_config):
        configured = self._compiled[launch_config]
        stream = launch_config[2] if len(launch_config) > 2 else 0

        def launch(*args):
            start, end = self._cuda.event(), self._cuda.event()
            start.record(stream)
            out = configured(*args)
            end.record(stream)
            _PENDING.append((self._name, start, end))
            return out

        return launch

    def __getattr__(self, attr):
        return getattr(self._compiled, attr)


def reset(cuda):
    """Forget the launches so far (after a warm-up), once the device has finished them."""
    cuda.synchronize()
    _PENDING.clear()


def collect(cuda):
    """[{kernel, launches, ms}] of the launches since the last reset or collect, most time first (the
    kernel named without its package); the launches are forgotten."""
    cuda.synchronize()
    totals: dict[str, tuple[int, float]] = {}
    for name, start, end in _PENDING:
        launches, ms = totals.get(name, (0, 0.0))
        totals[name] = (launches + 1, ms + start.elapsed_time(end))
    _PENDING.clear()
    rows = [{"kernel": ".".join(name.split(".")[-2:]), "launches": n, "ms": round(ms, 4)}
            for name, (n, ms) in totals.items()]
    return sorted(rows, key=lambda r: -r["ms"])
