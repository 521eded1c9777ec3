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
They are fitted on the kept rows (keep.py: each measured workload's SM seconds over the latency x L2 grid,
walked from the kernels as measured), minimising the largest |log(predicted / measured)| (ties: the
smaller root mean square), on a grid whose steps are the rounding: 100 cycles, 0.1e12 B/s, 50 us, and the
L2 values of keep.L2_GRID. The newest GPU probes file in bench/results (rows {"probe", "value", "unit",
"constant", "seconds"}) fixes each constant a row names to the measured value (a value between the kept
grid's points is interpolated in latency and 1/L2); constants the model does not use yet are reported.
"""

import importlib.util
import json
import os
import re
import subprocess
import time
from pathlib import Path

import numpy as np

from eggnog.runtime.cli import user_errors
from eggnog.runtime.errors import BadInput

MEASURED = Path(__file__).resolve().parent.parent / "results"  # the committed results, whatever the output
RUN_RESULTS = "EGGNOG_RUN_RESULTS"  # set by bench/gpu_run.py: the folder of the running plan's results

CONSTANTS = {"global_latency_cycles": 700, "hbm_bytes_per_s": 1.2e12, "host_s_per_call": 500e-6,
             "l2_bytes_per_s": 4e12}
LATENCIES = range(300, 1300, 100)
BANDWIDTHS = [b / 10 * 1e12 for b in range(5, 34)]
HOSTS = [h * 50e-6 for h in range(0, 11)]
L2S = (3e12, 4e12, 5.5e12, 7e12)  # B/s, L2 to all SMs: around the 5.5e12 estimate
# constants a probe may measure that the model does not use yet, and what it assumes instead
NOT_MODELLED = {
    "dp4a_per_clock_per_sm": "IDP4A on the IMAD pipe, 2 clocks a warp instruction per scheduler (timing.py)",
    "imma_per_clock_per_sm": "IMMA at the dense int8 tensor peak (limits.py)",
    "grid_sync_s": "grid.sync as the instructions of the cudadevrt call it makes (about one)",
    "ring_wait_cycles": "an asynchronous copy's bytes only, not its wait",
    "lstm_loop_ipc": "the persistent LSTM loop at the issue rate the walk gives it",
}
NAME = re.compile(r"-(\d{4}-\d{2}-\d{2})(?:-(\d+))?\.json$")


def newest_row(benchmark, match, results=MEASURED, device=None):
    """(record, row, file) of the newest GPU result of `benchmark` (files of one date ordered by their -2,
    -3 suffix; `device`: from that GPU only) holding a row whose columns match `match`, or None."""
    found = []
    for path in results.glob(f"{benchmark}-*.json"):
        name = NAME.search(path.name)
        if name is None:
            continue
        record = json.loads(path.read_text())
        if record.get("benchmark") != benchmark or "cpu" in (str(record.get("device")).lower(),
                                                             str(record.get("backend")).lower()):
            continue
        if device is not None and record.get("device") != device:
            continue
        for row in record.get("rows", []):
            if all(row.get(k) == v for k, v in match.items()):
                found.append(((name.group(1), int(name.group(2) or 1)), record, row, path.name))
    if not found:
        return None
    _, record, row, file = max(found, key=lambda f: f[0])
    return record, row, file


def newest_measurement(spec, units, results=MEASURED):
    """{"units_per_s", "device", "date", "file"} of the newest GPU run of the benchmark `spec` names
    holding the row it describes (newest_row), or None. spec: {"benchmark", "row": {column: value}, and
    "rate": column of units per second, or "ms_per_run": column of ms per run of `units`}."""
    found = newest_row(spec["benchmark"], spec["row"], results)
    if found is None:
        return None
    record, row, file = found
    rate = row[spec["rate"]] if "rate" in spec else units / (row[spec["ms_per_run"]] / 1e3)
    return {"units_per_s": rate, "device": record["device"], "date": record["date"], "file": file,
            "commit": record.get("commit", "unknown")}


def changed_since(commit, kernels):
    """Whether the source of any of the registered `kernels` (their modules) differs between `commit` and
    the working tree: then a measurement taken at `commit` measured other code, and neither calibrates
    nor checks the model. False when git cannot tell (no repository, an unknown commit)."""
    root = MEASURED.parent.parent
    files = {Path(importlib.util.find_spec(k.rsplit(".", 1)[0]).origin).resolve() for k in kernels}
    if not all(f.is_relative_to(root) for f in files):  # an installed copy, not this repository's
        return False
    paths = sorted(str(f.relative_to(root)) for f in files)
    try:
        done = subprocess.run(["git", "diff", "--quiet", commit, "--", *paths], cwd=root, capture_output=True)
    except OSError:
        return False
    return done.returncode == 1



def newest_probes(results=MEASURED):
    """({constant: value}, file) of the newest GPU probes file (bench.probes; not the simulator's): the
    rows that name a constant; ({}, None) when there is none."""
    found = []
    for path in results.glob("probes-*.json"):
        name = NAME.search(path.name)
        record = json.loads(path.read_text()) if name else {}
        device = str(record.get("device", "")).lower()
        simulated = any(r.get("simulated") for r in record.get("rows", []))  # timings that mean nothing
        if (record.get("benchmark") == "probes" and device and not simulated
                and not any(w in device for w in ("cpu", "sim"))):
            found.append(((name.group(1), int(name.group(2) or 1)), record, path.name))
    if not found:
        return {}, None
    _, record, file = max(found, key=lambda f: f[0])
    return {r["constant"]: float(r["value"]) for r in record.get("rows", []) if r.get("constant")}, file


def grid(probed=None):
    """The values each fitted constant may take: its grid, or the one value a probe measured."""
    values = {"global_latency_cycles": list(LATENCIES), "l2_bytes_per_s": list(L2S),
              "hbm_bytes_per_s": BANDWIDTHS, "host_s_per_call": HOSTS}
    return {k: [probed[k]] if probed and k in probed else v for k, v in values.items()}


FITTED = ("global_latency_cycles", "l2_bytes_per_s", "hbm_bytes_per_s", "host_s_per_call")  # the grid's axes


def row_arrays(rows):
    """A kept row (keep.py) as the fit takes it: its SM-seconds table over (LATENCIES, L2S), HBM bytes,
    units and measured units/s."""
    out = []
    for r in rows:
        table = np.array([[r["sm_seconds"][f"{l2:.3g}"][str(lat)] for l2 in L2S] for lat in LATENCIES])
        out.append((table, r["hbm_bytes"], r["units"], r["measured"]["units_per_s"]))
    return out


def sm_seconds(table, latencies, l2s):
    """A row's SM seconds at any latencies and L2 bandwidths, interpolated linearly in latency and in
    1/L2 (the L2 pipe's cycles) between the kept grid's points, held at its edges."""
    inverse = 1 / np.asarray(L2S)
    order = np.argsort(inverse)
    by_latency = np.array([np.interp(latencies, list(LATENCIES), table[:, j]) for j in range(len(L2S))])
    return np.array([[np.interp(1 / l2, inverse[order], by_latency[order, i]) for l2 in l2s]
                     for i in range(len(latencies))])


def log_errors(rows, values):
    """log(predicted / measured), shape (rows, *axes of FITTED), at every point of `values` (grid())."""
    lat, l2, hbm, host = (np.asarray(values[k], float) for k in FITTED)
    out = []
    for table, hbm_bytes, units, measured in rows:
        sm = sm_seconds(table, lat, l2)[:, :, None, None]
        seconds = np.maximum(sm, hbm_bytes / hbm[None, None, :, None]) + host[None, None, None, :]
        out.append(np.log(units / seconds / measured))
    return np.array(out)


def scores(rows, values):
    """(largest |log ratio|, sum of squares) at every grid point."""
    e = log_errors(rows, values)
    return np.abs(e).max(axis=0), (e * e).sum(axis=0)


def fit(rows, values=None):
    """(largest |log ratio|, constants) of the best grid point of `values` (default: grid())."""
    values = values or grid()
    worst, squares = scores(rows, values)
    best = np.lexsort((squares.ravel(), np.round(worst, 9).ravel()))[0]
    index = np.unravel_index(best, worst.shape)
    constants = {k: values[k][i] for k, i in zip(FITTED, index)}
    constants["host_s_per_call"] = round(constants["host_s_per_call"], 6)
    return float(worst[index]), constants


def errors(rows, constants):
    """log(predicted / measured) of each row at one set of constants."""
    return [float(x) for x in log_errors(rows, {k: [constants[k]] for k in FITTED}).ravel()]


def refit(kept=None, results=MEASURED):
    """error_bars.summary of the kept rows (keep.py) with the newest probes' constants."""
    from bench.static_report import error_bars, keep

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
    from bench.static_report import keep

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
