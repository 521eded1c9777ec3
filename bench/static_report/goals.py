"""The float paths' goals on an H100, predicted by the calibrated static model beside the peers'
measurements in bench/results (docs/benchmarks.md says where each goal comes from):

    python -m bench.static_report.goals          # needs the dev extra's tools, no GPU

Kernel rows (matmuls, scan) take their roofline workload's prediction without the host's time per call:
the goal is the kernel's. Step rows (a MinGRU BPTT step, Table 1 cells) are traced at full size on the
simulator without running a kernel (steps.py); each distinct launch is predicted from its kernel's SASS
(model.py). A step is the sum, over the stretches between its host waits, of the longer of the
device's time and the host's (HOST_S_PER_LAUNCH a launch). Every row is also predicted at the slow and
fast corners of the constants that fit (the refit of the kept rows, error_bars.py), widened by the worst
held-out ratio: "ours_range", and "speed_over_goal_range" where the goal has a figure. Writes
bench/results/goals-sm90-<date>.json; prints the table.
"""

import json
import os
import subprocess
import sys
import time
from collections import defaultdict

import typer

from bench.report import print_table, write_result
from bench.static_report import calibration, measurements
from eggnog.runtime.cli import user_errors
from eggnog.runtime.errors import BadInput

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help=__doc__)
ROOT = measurements.MEASURED.parent.parent
H100 = "NVIDIA H100 80GB HBM3"
# numba's launch path, measured: dispatcher.launch's cumulative time per call in the cProfile of a Table 1
# CD-RGE step on an H100 (gpu_profile_table1_host, 2026-11-27): 247.88 ms over 1537 launches; cProfile
# inflates it, eggnog's own Python per op adds to it.
HOST_S_PER_LAUNCH = 161e-6
WAIT_S = 10e-6  # a host wait on an idle device
MINGRU = "1024x8:8x2048"  # 105M parameters, batch 8 x 2048
TABLE1_SIZES, TABLE1_METHODS = ("100k", "1M", "10M"), ("bptt", "cdrge96", "cdrge512")


def _measured(benchmark, row, column):
    """(value of `column`, record, file) in the newest H100 result of `benchmark` holding a row matching
    `row` (measurements.newest_row); Nones where there is none or it lacks the column."""
    found = measurements.newest_row(benchmark, row, device=H100)
    if found is None or found[1].get(column) is None:
        return None, None, None
    record, match, file = found
    return match[column], record, file


def kernel_goals():
    """(workload name, its goal row): each kernel goal against its peer's measurement."""
    def matmul(label, op, column, fraction):
        peer, _, source = _measured("matmul_throughput", {"op": op, "shape": "32768x1536x1536"}, column)
        return {"row": f"{label} matmul 32768x1536x1536", "unit": "ms", "peer": peer, "peer_source": source,
                "goal": f">= {fraction:.0%} of cuBLAS", "goal_ratio": fraction, "higher_is_better": False}

    def scan(way, fraction=0.7):
        _, record, source = _measured("scan_throughput", {"op": way, "shape": "8x4096x1536"}, "GB_per_s")
        return {"row": f"scan 8x4096x1536 {way}, kernel", "unit": "GB/s",
                "peer": (record or {}).get("copy_bandwidth_GB_per_s"), "peer_source": source,
                "goal": f">= {fraction:.0%} of copy bandwidth", "goal_ratio": fraction, "higher_is_better": True}

    return {"matmul 32768x1536x1536, TF32 (matmul_tf32_cuda)": matmul("TF32", "forward_tf32", "baseline_ms", 0.6),
            "matmul 32768x1536x1536 fp32 forward (matmul_cuda)": matmul("fp32", "forward", "baseline_ms", 0.6),
            "scan 8x4096x1536 forward: scan launch": scan("forward"),
            "scan 8x4096x1536 backward: scan launch": scan("backward")}


def step_goals():
    """(kind, spec, goal row) of each traced step."""
    from bench.zorn_paper.table1_grid import A40

    rows = []
    fp32 = "the goal: twice minGRU-pytorch's fp32 step (0.282 s on an H200)"
    bf16 = "the goal: minGRU-pytorch's bf16 autocast step (0.096 s on an H200)"
    for precision, limit, peer in (("fp32", 0.14, fp32), ("tf32", 0.14, fp32), ("bf16", 0.096, bf16)):
        rows.append(("mingru", f"{MINGRU}:{precision}", {
            "row": f"MinGRU BPTT 105M, 8x2048, {precision}", "unit": "s/step", "peer": limit, "peer_source": peer,
            "goal": f"<= {limit} s/step", "goal_ratio": 1.0, "higher_is_better": False}))
    for method in TABLE1_METHODS:
        for size in TABLE1_SIZES:
            torch, _, source = _measured("table1", {"size": size, "method": method, "mode": "series"},
                                         "torch_s_per_step")
            a40 = A40[(method, "series")][TABLE1_SIZES.index(size)]
            rows.append(("table1", f"{size}:{method}", {
                "row": f"Table 1 {size} {method}", "unit": "s/step", "peer": torch, "peer_source": source,
                "a40": a40, "goal": ">= 2x the plain PyTorch loop and >= 5x the A40", "goal_ratio": 2.0,
                "higher_is_better": False}))
    return rows


def trace(kind, spec):
    """steps.py's trace of one step, in a simulator process."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "bench.static_report.steps", kind, spec], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=1800)
    if done.returncode:
        raise RuntimeError(f"tracing {kind} {spec} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def launch_seconds(launch, code, constants=None):
    """Device seconds of one traced launch (model.py) at `constants` (default: the committed ones)."""
    from bench.static_report.model import predict

    workload = {"launches": [launch], "units": 1, "bytes_per_unit": {}}
    return predict(workload, code, {**(constants or calibration.CONSTANTS), "host_s_per_call": 0.0})["seconds"]


def step_seconds(steps, code, constants=None):
    """Per traced step: its seconds, device and host seconds, launches and waits (module docstring)."""
    predicted = {}

    def seconds(launch):
        key = json.dumps(launch, sort_keys=True)
        if key not in predicted:
            predicted[key] = launch_seconds(launch, code, constants)
        return predicted[key]

    out = []
    for step in steps:
        device = [seconds(launch) for launch in step["launches"]]
        total, stretch = 0.0, [0.0, 0.0]  # the device's and the host's time since the last wait
        for index in step["sequence"] + [-1]:
            if index < 0:
                total += max(stretch) + WAIT_S
                stretch = [0.0, 0.0]
            else:
                stretch[0] += device[index]
                stretch[1] += HOST_S_PER_LAUNCH
        launches = [i for i in step["sequence"] if i >= 0]
        by_kernel = defaultdict(lambda: [0, 0.0])
        for i in launches:
            kernel = by_kernel[step["launches"][i]["kernel"].rsplit(".", 1)[-1]]
            kernel[0] += 1
            kernel[1] += device[i]
        out.append({"seconds": total, "device_seconds": _digits(sum(device[i] for i in launches)),
                    "host_seconds": _digits(HOST_S_PER_LAUNCH * len(launches)), "launches": len(launches),
                    "host_waits": step["sequence"].count(-1),
                    "kernels": [{"kernel": k, "launches": n, "seconds": _digits(t)} for k, (n, t) in
                                sorted(by_kernel.items(), key=lambda kv: -kv[1][1])]})
    return out


def verdict(row, ours):
    """ours / the goal's bound as a speed ratio (above 1: met)."""
    if row["peer"] is None:
        return None
    if row["higher_is_better"]:
        return ours / (row["peer"] * row["goal_ratio"])
    return row["peer"] / row["goal_ratio"] / ours


def speed_over_goal(row, ours):
    """verdict, and for a Table 1 row the A40's bound too (the smaller); None without a figure."""
    met = verdict(row, ours)
    if "a40" in row:
        a40 = row["a40"] / 5 / ours
        met = a40 if met is None else min(met, a40)
    return met


def speed_range(row, ours_range):
    """speed_over_goal at the ends of a predicted range, lowest first (None without a figure)."""
    ends = [speed_over_goal(row, x) for x in ours_range]
    return None if None in ends else sorted(_digits(x) for x in ends)


def _digits(x):
    return None if x is None else float(f"{x:.3g}")


@app.command()
@user_errors
def main():
    from bench.static_report.error_bars import prediction_range
    from bench.static_report.model import predict
    from bench.static_report.tools import find_tools
    from bench.static_report.workloads import compiled_code, workloads

    os.environ["NUMBA_ENABLE_CUDASIM"] = "0"  # as in __main__: compiled for the real target
    tools = find_tools()
    start = time.perf_counter()
    goals = kernel_goals()
    chosen = [w for w in workloads() if w["name"] in goals]
    if len(chosen) != len(goals):
        raise BadInput(f"the report has no workload named {sorted(set(goals) - {w['name'] for w in chosen})}")
    steps = step_goals()
    traces = [trace(kind, spec) for kind, spec, _ in steps]
    launched = [{"launches": [{"kernel": launch["kernel"]} for t in traces for launch in t["launches"]]}]
    code = defaultdict(list, compiled_code(chosen + launched, tools))
    constants, slow, fast, factor, _ = calibration.model_bounds()
    rows = []
    for w in chosen:
        row = goals[w["name"]]

        def ours_at(c, w=w, row=row):
            p = predict(w, code, c)
            kernel_s = max(p["sm_seconds"], p["hbm_seconds"])
            return (kernel_s * 1e3 if row["unit"] == "ms" else w["bytes_per_unit"]["hbm"] * w["units"] / kernel_s / 1e9,
                    p["seconds"])

        (ours, with_host), ends = ours_at(constants), [ours_at(c)[0] for c in (slow, fast)]
        ours_range = prediction_range(ours, *ends, factor)
        rows.append({**row, "ours": _digits(ours), "ours_range": ours_range,
                     "ours_with_host_per_call": _digits(with_host * 1e3) if row["unit"] == "ms" else None,
                     "speed_over_goal": _digits(verdict(row, ours)),
                     "speed_over_goal_range": speed_range(row, ours_range)})
    timed_at = [step_seconds(traces, code, c) for c in (constants, slow, fast)]
    for (_, _, row), timed, slow_s, fast_s in zip(steps, *timed_at):
        met = speed_over_goal(row, timed["seconds"])
        if "a40" in row:
            row = {**row, "speed_over_a40": _digits(row["a40"] / timed["seconds"])}
        ours_range = prediction_range(timed["seconds"], slow_s["seconds"], fast_s["seconds"], factor)
        rows.append({**row, "ours": _digits(timed.pop("seconds")), "ours_range": ours_range, **timed,
                     "speed_over_goal": _digits(met), "speed_over_goal_range": speed_range(row, ours_range)})
    for r in rows:
        r["met"] = None if r["speed_over_goal"] is None else r["speed_over_goal"] >= 1
    table = [{"row": r["row"], "predicted": f"{r['ours_range'][0]:.3g}-{r['ours_range'][1]:.3g} ({r['ours']:.3g})",
              "unit": r["unit"], "peer": _digits(r["peer"]), "goal": r["goal"],
              "speed_over_goal": r["speed_over_goal"], "speed_over_goal_range": r["speed_over_goal_range"],
              "met": r["met"]} for r in rows]
    print_table(table, list(table[0]))
    path = write_result("goals", "sm90", rows, {
        "target": "static sm_90 (ptxas -O3), no GPU: predictions, not measurements",
        "constants": constants, "slow_corner": slow, "fast_corner": fast, "held_out_factor": factor,
        "host_s_per_launch": HOST_S_PER_LAUNCH, "wait_s": WAIT_S,
        "seconds": round(time.perf_counter() - start, 1)})
    print(f"wrote {path}")


if __name__ == "__main__":
    app()
