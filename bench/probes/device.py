"""What every probe shares: the GPU it runs on (SM count, clock, compute capability), its timed launches
(CUDA events around each, the median taken), the check of its kernel's arithmetic and the row it writes.

A row: {"probe", "value", "unit", "constant", "seconds", "kernel_s", "basis"} and "simulated": true on
numba's simulator. `seconds` is the probe's wall time on this machine (compiling, checking and timing),
`kernel_s` the median device time of the launch the value comes from, `basis` how it was converted.
"""

import time
from dataclasses import dataclass

import numpy as np

from bench.probes.catalog import row_spec

REPEAT, QUICK_REPEAT = 5, 3  # timed launches a figure is the median of (after one untimed launch)


@dataclass(frozen=True)
class Device:
    name: str
    sms: int
    clock_hz: float  # the SM clock numba reports (its maximum), as the static model's ISSUE_CLOCK_HZ
    cc: tuple
    simulated: bool

    def cycles(self, seconds):
        return seconds * self.clock_hz


def current():
    """The GPU this process uses (BadInput when there is none); on the simulator one nominal SM at 1 GHz,
    which only makes the conversions run: simulated timings mean nothing."""
    from eggnog.kernels.core.backend import select_backend
    from eggnog.kernels.core.cuda_api import cuda

    backend = select_backend("cuda")
    if backend.simulated:
        return Device(backend.device_name, 1, 1.0e9, (9, 0), True)
    gpu = cuda.get_current_device()
    return Device(backend.device_name, int(gpu.MULTIPROCESSOR_COUNT), clock_hz(gpu), tuple(gpu.compute_capability),
                  False)


def clock_hz(gpu):
    """The SM clock the driver reports (kHz there); where it reports none, the static model's H100 clock."""
    try:
        return float(gpu.CLOCK_RATE) * 1e3
    except Exception:  # a driver without the attribute answers through several exception types
        from bench.static_report.limits import ISSUE_CLOCK_HZ

        return ISSUE_CLOCK_HZ


def kernel_seconds(device, launch, quick):
    """Median device seconds of launch() over the timed repeats, each between two events on the default
    stream, after one untimed launch (compiled by then). The simulator has no event timing: its wall time."""
    from eggnog.kernels.core.cuda_api import cuda

    launch()
    cuda.synchronize()
    times = []
    for _ in range(1 if device.simulated else (QUICK_REPEAT if quick else REPEAT)):
        if device.simulated:
            start = time.perf_counter()
            launch()
            times.append(time.perf_counter() - start)
            continue
        start, end = cuda.event(), cuda.event()
        start.record()
        launch()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return sorted(times)[len(times) // 2]


class WrongResult(RuntimeError):
    """A probe's kernel computed something other than its check expects: its timing would time a broken
    kernel, so no row is written."""


def require_equal(probe, got, expected):
    got, expected = np.asarray(got), np.asarray(expected)
    if got.shape != expected.shape or not np.array_equal(got, expected):
        wrong = np.flatnonzero(got.ravel() != expected.ravel()) if got.shape == expected.shape else [0]
        first = int(wrong[0])
        raise WrongResult(f"probe {probe}: its kernel computed {len(wrong)} wrong values of {expected.size} "
                          f"(first at flat index {first}: {got.ravel()[first] if got.size else None} instead of "
                          f"{expected.ravel()[first]})")


def wrap32(values):
    """int64 values (or Python ints) to int32 by their low 32 bits, as the kernels' int32 sums wrap."""
    return (np.asarray(values, np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def row(device, probe, name, value, kernel_s, started, basis):
    """The output row `name` of `probe` (unit and constant from the catalog)."""
    spec = row_spec(probe, name)
    out = {"probe": name, "value": float(f"{value:.4g}"), "unit": spec.unit, "constant": spec.constant,
           "seconds": round(time.perf_counter() - started, 3), "kernel_s": float(f"{kernel_s:.4g}"), "basis": basis}
    if device.simulated:
        out["simulated"] = True
    return out
