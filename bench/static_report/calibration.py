"""The static model's calibrated constants and the measurements they are fitted on.

    python -m bench.static_report.calibration      # refit on the measured rows, print the constants

Three constants, each a physical quantity the SASS cannot give (kernels/STATIC_REPORT.md):
- global_latency_cycles: cycles from a global load's issue to its value; one figure for L1 and L2
  hits and HBM under the kernels' own load (an unloaded H100 L2 hit is ~260, HBM ~500);
- hbm_bytes_per_s: the HBM bandwidth streaming kernels reach (datasheet 3.35e12);
- host_s_per_call: host time of one call of the launcher the benchmark times, the device idle meanwhile
  (numba's launch path, cudaMalloc of the outputs); gpu_profile_kernels measured 0.25-0.45 ms for the
  matmul and scan launchers, so the fit looks at most at 0.5 ms.
They are fitted on every workload whose measurement bench/results holds (the newest file of its
benchmark from a GPU), minimising the largest |log(predicted / measured)| (ties: the smaller root mean
square), on a grid whose steps are the rounding: 100 cycles, 0.1e12 B/s, 50 us. The L2 bandwidth is
limits.py's estimate (5.5e12 B/s), not fitted.
"""

import importlib.util
import json
import re
import subprocess
import time
from math import log
from pathlib import Path

MEASURED = Path(__file__).resolve().parent.parent / "results"  # the committed results, whatever the output

CONSTANTS = {"global_latency_cycles": 700, "hbm_bytes_per_s": 1.2e12, "host_s_per_call": 500e-6}
LATENCIES = range(300, 1300, 100)
BANDWIDTHS = [b / 10 * 1e12 for b in range(5, 34)]
HOSTS = [h * 50e-6 for h in range(0, 11)]
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


def errors(rows, latency, bandwidth, host):
    """log(predicted / measured) of each row: (SM seconds by latency, HBM bytes, units, measured units/s)."""
    return [log(units / (max(sm[latency], hbm / bandwidth) + host) / measured) for sm, hbm, units, measured in rows]


def fit(rows):
    """(largest |log ratio|, constants) of the best grid point; only the SM time depends on the latency."""
    best = None
    for latency in sorted(rows[0][0]):
        for bandwidth in BANDWIDTHS:
            for host in HOSTS:
                e = errors(rows, latency, bandwidth, host)
                score = (round(max(map(abs, e)), 9), sum(x * x for x in e))
                if best is None or score < best[0]:
                    best = score, {"global_latency_cycles": latency, "hbm_bytes_per_s": bandwidth,
                                   "host_s_per_call": round(host, 6)}
    return best[0][0], best[1]


def main():
    from bench.static_report.__main__ import compiled_code, measured_workloads
    from bench.static_report.model import predict

    start = time.perf_counter()
    workloads = measured_workloads()
    code = compiled_code(w for w, _ in workloads)
    rows = []
    for workload, measured in workloads:
        sm = {lat: predict(workload, code, {**CONSTANTS, "global_latency_cycles": lat})["sm_seconds"]
              for lat in LATENCIES}
        rows.append((sm, workload["bytes_per_unit"].get("hbm", 0) * workload["units"], workload["units"],
                     measured["units_per_s"]))
        print(f"{workload['name']}: measured {measured['units_per_s']:.3g} {workload['unit']}/s ({measured['file']})")
    worst, constants = fit(rows)
    print(f"fitted on {len(rows)} rows in {time.perf_counter() - start:.0f} s: {constants}; worst ratio "
          f"{2.718281828 ** worst:.2f}x (committed: {CONSTANTS})")


if __name__ == "__main__":
    main()
