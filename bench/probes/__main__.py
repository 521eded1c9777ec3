"""Probes: small GPU kernels timing what the static model cannot see, each converted to the unit of the
model constant it gives (bench/static_report/calibration.py reads the newest file).

    python -m bench.probes [--only l2_pattern,grid_sync] [--quick]   # on a GPU: a table and
                                                                     # bench/results/probes-<device>-<date>.json
    python -m bench.probes --list                                    # the probes and the constant of each row
    NUMBA_ENABLE_CUDASIM=1 python -m bench.probes --dry-test         # on the simulator, tiny sizes, as a test

Each probe checks its kernel's arithmetic before its timing counts. On numba's simulator timings mean
nothing: the command refuses to run there unless --dry-test says it is a test, and then marks every row
"simulated" (calibration ignores a simulator's file). Rows: bench/probes/device.py.
"""

import time

import typer

from bench.probes.catalog import PROBES, chosen
from bench.report import print_table, write_result
from eggnog.runtime.cli import cli_help, user_errors
from eggnog.runtime.errors import BadInput

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


def listing():
    """One line per row a probe writes: probe, row, unit, constant, what it times."""
    return [{"probe": p.name, "row": r.name, "unit": r.unit, "constant": r.constant or "-", "times": p.summary}
            for p in PROBES for r in p.rows]


def run_probes(probes, quick):
    """(device, rows) of the given probes on this process's GPU (or the simulator), in order."""
    from bench.probes.device import current

    device = current()
    rows = []
    for probe in probes:
        rows += probe.module().run(device, quick)
    return device, rows


@app.command(help=cli_help(__doc__))
@user_errors
def main(only: str = typer.Option("", help="Comma-separated probe names (default: all; see --list)."),
         quick: bool = typer.Option(False, help="Fewer iterations and repeats: a first look in a few seconds."),
         list_probes: bool = typer.Option(False, "--list", help="Print the probes and the constant of each row."),
         dry_test: bool = typer.Option(False, help="Run on numba's simulator (NUMBA_ENABLE_CUDASIM=1) at tiny "
                                                   "sizes, to test the probes; rows are marked simulated.")):
    if list_probes:
        print_table(listing(), ["probe", "row", "unit", "constant", "times"])
        return
    probes = chosen(only)
    from eggnog.kernels.core.cuda_api import SIMULATED

    if SIMULATED and not dry_test:
        raise BadInput("the probes time a real GPU and numba's simulator gives timings that mean nothing: "
                       "pass --dry-test to run them there as a test")
    if dry_test and not SIMULATED:
        raise BadInput("--dry-test runs the probes on numba's simulator: set NUMBA_ENABLE_CUDASIM=1 (on a GPU, "
                       "leave it out; --quick is the short run)")
    started = time.perf_counter()
    device, rows = run_probes(probes, quick)
    print_table([{**r, "constant": r["constant"] or "-"} for r in rows],
                ["probe", "value", "unit", "constant", "kernel_s", "seconds"])
    extra = {"sms": device.sms, "clock_hz": device.clock_hz, "compute_capability": list(device.cc),
             "quick": quick, "simulated": device.simulated, "total_s": round(time.perf_counter() - started, 2)}
    print(f"wrote {write_result('probes', device.name, rows, extra)}")


if __name__ == "__main__":
    app()
