"""Static performance report of every registered CUDA kernel for sm_90 (H100), without a GPU.

    python -m bench.static_report

Each signature a launcher uses is compiled to PTX by numba (kernels/checks/ptx_compile.py), assembled with
`ptxas -arch=sm_90 -O3 -v` and disassembled with `cuobjdump -sass` (the nvidia-cuda-nvcc,
-cuobjdump and -nvdisasm wheels of the dev extra; no driver needed). Per kernel: registers, spills,
local memory (stack frame), static shared memory, occupancy at the launcher's block size
(KernelSpec.block) against the stated sm_90 limits, and the instruction mix of the innermost loops
(tensor-core MMA, IDP4A, FFMA, f64, 64-bit integer halves, calls, global/shared accesses by width).
Shared-memory kernels show their "Shared memory:" paragraph (the case against bank conflicts, which
SASS cannot show) or are flagged "not argued". A roofline section estimates headline workloads from the
kernels' loop structure against the H100 SXM peaks (roofline.py), and the static model (model.py)
predicts those that list their launches from the whole kernels' SASS (workloads.py), beside the newest
measurement of each in bench/results (measurements.py; the model's constants: calibration.py). What a
kernel module gives the report (traits, that paragraph, its own workloads): kernels/STATIC_REPORT.md.

Writes bench/results/sass_report-sm90-<date>.json and .md. Without the tools: one sentence, exit 2.

    python -m bench.static_report --only egg_epoch_cuda   # those kernels, their loops' SASS, no files
"""

import os
import time
from collections import defaultdict

import typer

from bench.report import print_table, write_result
from bench.static_report import parse
from bench.static_report.calibration import model_bounds
from bench.static_report.checks import loop_total, observations, problems, shared_memory_argument
from bench.static_report.error_bars import prediction_range
from bench.static_report.limits import occupancy, stated_limits
from bench.static_report.markdown import render, summary_table
from bench.static_report.measurements import newest_measurement
from bench.static_report.model import predict
from bench.static_report.roofline import estimate, hot_loop
from bench.static_report.tools import ARCH, find_tools, tool_version
from bench.static_report.workloads import assembled, kernel_code, stale, workloads
from eggnog.runtime.cli import user_errors
from eggnog.runtime.errors import BadInput

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help=__doc__)
PREFIX = "eggnog.kernels."


def kernel_rows(tools, only=None, keep=()):
    """One analysed row per registered kernel signature (with `only`, of the kernels whose name
    contains it, each with its SASS listing), and the static model's code of the kernels in `keep`."""
    rows, code = [], defaultdict(list)
    for compiled, spec, number, ptx, log, sass in assembled(tools, only):
        resources = parse.parse_ptxas(log)
        label = spec.name.removeprefix(PREFIX) + (f" [sig {number}]" if len(spec.signatures) > 1 else "")
        dynamic = parse.uses_dynamic_shared(ptx)
        row = {"kernel": label, **compiled, "registers": resources["registers"], "barriers": resources["barriers"],
               "smem": resources["smem"], "dynamic_shared": dynamic, "stack_frame": resources["stack_frame"],
               "spill_stores": resources["spill_stores"], "spill_loads": resources["spill_loads"],
               "occupancy": occupancy(resources["registers"], resources["smem"], spec.block),
               "sass": parse.analyze_sass(sass),
               "shared_memory_argument": shared_memory_argument(spec.pyfunc) if resources["smem"] or dynamic else None}
        row["innermost_loop_mix"] = loop_total(row)
        row["problems"] = problems(row)
        if only is not None:
            row["listing"] = sass
        if spec.name in keep:
            code[spec.name].append(kernel_code(spec, number, ptx, resources, sass))
        rows.append(row)
    return rows, code


def ranged_prediction(workload, code, bounds):
    """model.predict at the constants, with "range": [low, high] units/s (error_bars.prediction_range)."""
    constants, slow, fast, factor, _ = bounds
    p = predict(workload, code, constants)
    ends = [predict(workload, code, c)["units_per_s"] for c in (slow, fast)]
    return {**p, "range": prediction_range(p["units_per_s"], *ends, factor)}


def roofline_rows(rows, code, bounds):
    out = []
    for w in workloads():
        row = estimate(w, hot_loop([r for r in rows if r["name"] == w["kernel"]]))
        if "launches" in w:
            row["prediction"] = ranged_prediction(w, code, bounds)
            measured = newest_measurement(w["measured"], w["units"]) if "measured" in w else None
            if measured:
                row["measured"] = {**measured, "kernel_changed": stale(w, measured), "predicted_over_measured": round(
                    row["prediction"]["units_per_s"] / measured["units_per_s"], 2)}
        out.append(row)
    return out


def print_loops(row):
    """The SASS of a kernel's innermost loops, for reading what the counts came from."""
    functions = list(parse.parse_sass(row["listing"]).values())
    for loop in row["sass"]["innermost_loops"]:
        print(f"\n{row['kernel']}: loop {loop['start']:#06x}-{loop['end']:#06x}, depth {loop['depth']}, "
              f"{loop['instructions']} instructions")
        for ins in functions[loop["function"]]:
            if loop["start"] <= ins.address <= loop["end"]:
                print(f"  {ins.address:#06x}  {ins.predicate:5} {ins.opcode} {', '.join(ins.operands)}")


def prediction_line(w):
    p, m = w["prediction"], w.get("measured")
    seen = (f"measured {m['units_per_s']:.3g} on {m['device']} ({m['file']}), predicted/measured "
            f"{m['predicted_over_measured']:.2f}" + (" (the kernel changed since: not compared)" if m["kernel_changed"]
                                                     else "")) if m else "no measurement in bench/results"
    low, high = p["range"]
    return (f"model: {w['name']}: predicted {low:.3g}-{high:.3g} {w['unit']}/s (point {p['units_per_s']:.3g}, "
            f"{p['bound']}); {seen}")


def calibration_lines(bars):
    """The kept rows' in-sample, leave-one-out and leave-one-family-out predicted / measured."""
    if bars is None:
        return ["calibration: no kept rows (python -m bench.static_report.calibration --keep): predictions unbounded"]
    lines = [f"calibration: {e['name']} ({e['family']}, {e['file']}): predicted / measured {e['in_sample']} in "
             f"sample, {e['leave_one_out']} left out, {e['leave_one_family_out']} with its family left out"
             for e in bars["rows"]]
    return lines + [f"calibration: constants {bars['constants']}, plausible {bars['plausible']}; ranges widened "
                    f"by the worst held-out ratio, {bars['held_out_factor']:.2f}x"]


@app.command()
@user_errors
def main(only: str = typer.Option(None, help="Analyse only kernels whose name contains this text, print the SASS "
                                             "of their innermost loops, and write no result files.")):
    # The report compiles for a real target; the simulator (which tests switch on) cannot. Nothing
    # imported above loads numba, which reads this when the kernels are first imported.
    os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
    tools = find_tools()
    start = time.perf_counter()
    keep = {launch["kernel"] for w in workloads() for launch in w.get("launches", ())} if only is None else ()
    rows, code = kernel_rows(tools, only, keep)
    seconds = time.perf_counter() - start
    if not rows:
        raise BadInput(f"no registered kernel name contains {only!r}")
    table = summary_table(rows)
    print_table(table, list(table[0]))
    if only is not None:
        for row in rows:
            print_loops(row)
        return
    start = time.perf_counter()
    bounds = model_bounds()
    roofline = roofline_rows(rows, code, bounds)
    model_seconds = time.perf_counter() - start
    for w in roofline:
        print(f"roofline: {w['name']}: {w['units_per_s']:.3g} {w['unit']}/s ({w['bound']}-bound), "
              f"{w['fraction_of_reference']:.2%} of the {w['reference_limit']} limit")
    for line in calibration_lines(bounds[-1]):
        print(line)
    for w in roofline:
        if "prediction" in w:
            print(prediction_line(w))
    extra = {"target": f"static {ARCH} (ptxas -O3), no GPU", "tools": {n: tool_version(p) for n, p in tools.items()},
             "limits": stated_limits(), "kernels": len(rows), "compile_and_assemble_seconds": round(seconds, 1),
             "definitions": {"loops": " ".join(parse.__doc__.split("\n\n", 1)[1].split()),
                             "int64": parse.INT64_RULES, "f64": parse.F64_RULES,
                             "widths": parse.WIDTH_RULES},
             "observations": observations(rows), "roofline": roofline,
             "static_model": {"constants": bounds[0], "slow_corner": bounds[1], "fast_corner": bounds[2],
                              "held_out_factor": bounds[3], "calibration": bounds[4],
                              "seconds": round(model_seconds, 1)},
             "problems": {r["kernel"]: r["problems"] for r in rows if r["problems"]}}
    path = write_result("sass_report", "sm90", rows, extra)
    markdown = path.with_suffix(".md")
    markdown.write_text(render(path))
    print(f"{len(rows)} kernel signatures in {seconds:.0f} s; wrote {path} and {markdown}")


if __name__ == "__main__":
    app()
