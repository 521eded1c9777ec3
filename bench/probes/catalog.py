"""The probes, the rows each writes and the static-model constant a row gives (a key of
bench/static_report/calibration.py's constants, or None for a figure the model does not take). Kept free
of kernel imports: listing the probes or checking a flag compiles nothing."""

import importlib
from dataclasses import dataclass

from eggnog.runtime.errors import BadInput


@dataclass(frozen=True)
class Row:
    name: str
    unit: str
    constant: str | None


@dataclass(frozen=True)
class Probe:
    name: str
    summary: str
    rows: tuple

    def module(self):
        """The probe's module (importing it registers its kernels); it has run(device, quick) -> rows."""
        return importlib.import_module(f"bench.probes.{self.name}")


PROBES = (
    Probe("l2_pattern", "the EGG epoch's weight loads (16-byte, _mma_rows' fragment order, two blocks an SM)",
          (Row("l2_egg_pattern", "B/s", "l2_bytes_per_s"), Row("l2_egg_pattern_unique", "B/s", None))),
    Probe("dp4a_rate", "dp4a.s32.s32 issue, eight independent chains a thread, full occupancy",
          (Row("dp4a_issue", "warp instructions/clock/SM", "dp4a_per_clock_per_sm"),)),
    Probe("imma_rate", "int8 mma.sync m16n8k32 issue, four independent accumulators a warp",
          (Row("imma_issue", "warp mma/clock/SM", "imma_per_clock_per_sm"),)),
    Probe("wide_loads", "rounds of four coalesced 16-byte loads a thread from L2, two blocks of 256 an SM",
          (Row("ldg128_latency", "cycles", None), Row("ldg128_bandwidth", "B/s", None))),
    Probe("grid_sync", "grid.sync of one 512-thread block an SM, and an empty cooperative launch",
          (Row("grid_sync", "s", "grid_sync_s"), Row("cooperative_launch", "s", None))),
    Probe("copy_ring", "the TF32 matmul's three-stage cp.async ring with no products: a stage's wait",
          (Row("copy_ring_wait", "cycles", "ring_wait_cycles"),)),
    Probe("lstm_loop", "the persistent LSTM's inner loop (_four_k, six rows) alone, Table 1 10M's plan",
          (Row("lstm_loop_ipc", "warp instructions/clock/SM", "lstm_loop_ipc"),)),
)
BY_NAME = {p.name: p for p in PROBES}


def chosen(only):
    """The probes `--only` names (comma-separated; empty or None: all), in catalog order."""
    if not only:
        return list(PROBES)
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown or not names:
        raise BadInput(f"--only names no probe called {', '.join(unknown) or repr(only)} "
                       f"(the probes: {', '.join(BY_NAME)})")
    return [p for p in PROBES if p.name in names]


def row_spec(probe, row):
    """The catalog's Row called `row` of `probe` (a probe writes only the rows it lists)."""
    return next(r for r in BY_NAME[probe].rows if r.name == row)
