"""The static model's calibrated constants, the measurements they are fitted on, and the fit.

    python -m bench.static_report.calibration --refit            # fit on the kept rows, print constants and errors
    python -m bench.static_report.calibration --keep [--at C]    # walk measured kernels into the kept rows (keep.py)

Four constants, each a physical quantity the SASS cannot give (kernels/STATIC_REPORT.md):
- global_latency_cycles: cycles from a global load's issue to its value; one figure for L1 and L2
  hits and HBM under the kernels' own load (an unloaded H100 L2 hit is ~260, HBM ~500);
- hbm_bytes_per_s: the HBM bandwidth streaming kernels reach (datasheet 3.35e12);
- host_s_per_call: host time of one call of the launcher the benchmark times, the device idle meanwhile
  (numba's launch path, cudaMalloc of the outputs); gpu_profile_kernels measured 0.25-0.45 ms for the
  matmul and scan launchers, so the fit looks at most at 0.5 ms;
- l2_bytes_per_s: the bandwidth from L2 to all SMs (limits.py's 5.5e12 is an estimate). The rows measured
  so far were latency-bound, so they barely constrain it: its plausible range is its whole grid until a
  probe (bench/probes) or an L2-bound measurement narrows it.
They are fitted (fitting.py) on the kept rows (keep.py: each measured workload's SM seconds over the latency x
L2 grid, walked from the kernels as measured), minimising the largest |log(predicted / measured)| (ties: the
smaller root mean square), on a grid whose steps are the rounding: 100 cycles, 0.1e12 B/s, 50 us, and the
L2 values of keep.L2_GRID. The newest GPU probes file in bench/results (rows {"probe", "value", "unit",
"constant", "seconds"}; measurements.py finds it) fixes each constant a row names to the measured value (a
value between the kept grid's points is interpolated in latency and 1/L2); constants the model does not use
yet are reported.
"""

import os
import time
from pathlib import Path

from bench.static_report import error_bars, keep
from bench.static_report.fitting import CONSTANTS, FITTED, L2S, LATENCIES, errors, fit, grid, row_arrays, sm_seconds
from bench.static_report.measurements import MEASURED, changed_since, newest_measurement, newest_probes
from eggnog.runtime.cli import user_errors
from eggnog.runtime.errors import BadInput

# The fit and the measurements live in modules of their own (keep.py and error_bars.py need them, and this one
# needs those two, so they cannot live here); their names stay reachable here, where the model's callers look.
__all__ = ["CONSTANTS", "FITTED", "L2S", "LATENCIES", "MEASURED", "NOT_MODELLED", "RUN_RESULTS", "changed_since",
           "errors", "fit", "grid", "main", "model_bounds", "newest_measurement", "newest_probes", "print_refit",
           "refit", "row_arrays", "sm_seconds"]
RUN_RESULTS = "EGGNOG_RUN_RESULTS"  # set by bench/gpu/run.py: the folder of the running plan's results

# constants a probe may measure that the model does not use yet, and what it assumes instead
NOT_MODELLED = {
    "dp4a_per_clock_per_sm": "IDP4A on the IMAD pipe, 2 clocks a warp instruction per scheduler (timing.py)",
    "imma_per_clock_per_sm": "IMMA at the dense int8 tensor peak (limits.py)",
    "grid_sync_s": "grid.sync as the instructions of the cudadevrt call it makes (about one)",
    "ring_wait_cycles": "an asynchronous copy's bytes only, not its wait",
    "lstm_loop_ipc": "the persistent LSTM loop at the issue rate the walk gives it",
}


def refit(kept=None, results=MEASURED):
    """error_bars.summary of the kept rows (keep.py) with the newest probes' constants."""
    kept = keep.kept_rows() if kept is None else kept
    if not kept:
        raise BadInput("no kept calibration rows: run python -m bench.static_report.calibration --keep first")
    run = os.environ.get(RUN_RESULTS)  # the first-contact plan's own folder: its probes come first
    probed, file = newest_probes(Path(run)) if run and Path(run).is_dir() else ({}, None)
    if file is None:
        probed, file = newest_probes(results)
    out = error_bars.summary(kept, {k: v for k, v in probed.items() if k in FITTED})
    out["probes_file"] = file
    out["probed_not_modelled"] = {k: {"value": v, "model_assumes": NOT_MODELLED[k]} for k, v in probed.items()
                                  if k in NOT_MODELLED}
    return out


def model_bounds():
    """(constants, their slow and fast corners, the held-out factor, the calibration summary): the refit of
    the kept rows, or the committed constants unbounded where nothing is kept."""
    try:
        bars = refit()
    except BadInput:  # nothing kept: the committed constants, no error bars to give
        return CONSTANTS, CONSTANTS, CONSTANTS, 1.0, None
    constants = {**CONSTANTS, **bars["constants"]}
    slow, fast = error_bars.corners(bars["plausible"], constants)
    return constants, slow, fast, bars["held_out_factor"], bars


def print_refit(out):
    from bench.report import print_table

    print_table([{"row": e["name"], "family": e["family"], "in-sample": e["in_sample"],
                  "leave-one-out": e["leave_one_out"], "leave-one-family-out": e["leave_one_family_out"]}
                 for e in out["rows"]], ["row", "family", "in-sample", "leave-one-out", "leave-one-family-out"])
    print(f"fitted on {len(out['rows'])} kept rows: {out['constants']}; worst in-sample ratio "
          f"{out['worst_in_sample']:.2f} (predicted / measured; committed: {CONSTANTS})")
    print("plausible (within the slack of the best fit): " + ", ".join(
        f"{k} {lo:.3g}-{hi:.3g}" for k, (lo, hi) in out["plausible"].items()))
    print(f"held-out factor a prediction's range is widened by: {out['held_out_factor']:.2f}")
    for k, v in out["probed"].items():
        print(f"probed ({out['probes_file']}): {k} = {v:.4g}, held there")
    for k, v in out["probed_not_modelled"].items():
        print(f"probed ({out['probes_file']}): {k} = {v['value']:.4g}; the model does not use it yet "
              f"(it assumes {v['model_assumes']})")


@user_errors
def main(argv=None):
    import argparse

    from bench.report import write_result

    parser = argparse.ArgumentParser(prog="python -m bench.static_report.calibration", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true", help="walk the measured kernels into the kept rows")
    parser.add_argument("--at", help="with --keep: the commit whose kernels are the ones measured")
    parser.add_argument("--refit", action="store_true", help="fit on the kept rows and print the held-out errors")
    args = parser.parse_args(argv)
    if args.at and not args.keep:
        parser.error("--at goes with --keep")
    start = time.perf_counter()
    if args.keep:
        for row in keep.keep(args.at):
            print(f"kept {row['name']}: measured {row['measured']['units_per_s']:.3g} {row['unit']}/s "
                  f"({row['measured']['file']}), walked at {row['walked_at'][:12]}")
    if args.refit or not args.keep:
        out = refit()
        print_refit(out)
        path = write_result("calibration", "sm90", out.pop("rows"), {**out, "seconds": round(
            time.perf_counter() - start, 1)})
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
