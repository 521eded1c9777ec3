"""The float paths' GPU targets, estimated from the static report (bench/static_report) for a machine
that has not measured them:

- the TF32 matmul 32768x1536x1536: its roofline rate against the H100's TF32 tensor peak (the measured
  target is at least 50% of cuBLAS TF32 on the same device);
- a Table 1 CD-RGE series step (batch 1024, 11 recurrent steps): 2 x probes LSTM forwards at the
  roofline rate of the LSTM kernel the plan picks, against the authors' A40 seconds per step (the
  target is at least 5x faster).

Both are bounds, not predictions: the roofline rate is an upper bound, and a step's estimate counts only
its LSTM forwards (no input tables, output projection, loss or update, and no launch latency, which
rules the small sizes: a 100k forward is microseconds of work), so the speed-up over the A40 is an upper
bound as well; at 10M, where the recurrence dominates, it is the telling figure. `bash bench/gpu.sh`
measures the real figures (bench/table1.py also records a CD-RGE step's peak memory beside a plain
forward's).

    python -m bench.gpu_targets [--report bench/results/sass_report-sm90-DATE.json]
"""

import json
from pathlib import Path

import typer

from bench.report import print_table, write_result
from eggnog.runtime.cli import cli_help, user_errors
from eggnog.runtime.errors import BadInput

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)

BATCH, STEPS = 1024, 11
TABLE1_SIZES = ("100k", "1M", "10M")  # the sizes the report has LSTM roofline rows for
METHODS = ("cdrge96", "cdrge512")


def newest_report():
    found = sorted(Path(__file__).resolve().parent.joinpath("results").glob("sass_report-sm90-*.json"))
    if not found:
        raise BadInput("no static report in bench/results: run python -m bench.static_report first")
    return found[-1]


def read_report(path):
    """(the report's commit, the TF32 tensor peak it assumed, its roofline rows by name)."""
    try:
        report = json.loads(Path(path).read_text())
        return (report.get("commit"), float(report["limits"]["h100_sxm_peaks"]["tf32_tensor"]),
                {r["name"]: r for r in report["roofline"]})
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BadInput(f"{path} is not a static report written by bench.static_report ({e})") from None


def row_named(rows, prefix):
    found = [r for name, r in rows.items() if name.startswith(prefix)]
    if len(found) != 1:
        raise BadInput(f"the static report has no single roofline row for {prefix!r}: regenerate it")
    return found[0]


def matmul_row(rows, tf32_peak):
    r = row_named(rows, "matmul 32768x1536x1536, TF32")
    flops = r["units_per_s"] * r["ops_per_unit"]
    return {"target": "TF32 matmul 32768x1536x1536", "estimate": f"{flops / 1e12:.0f} TFLOP/s",
            "against": f"{flops / tf32_peak:.0%} of the TF32 peak", "bound": r["bound"],
            "goal": ">= 50% of cuBLAS TF32", "tflops": round(flops / 1e12, 1)}


def table1_rows(rows):
    from bench.table1_grid import METHODS as PROBES
    from bench.table1_grid import a40_seconds

    out = []
    for size in TABLE1_SIZES:
        r = row_named(rows, f"LSTM {size} forward, batch {BATCH}, {STEPS} steps")
        forward_s = BATCH * STEPS / r["units_per_s"]
        for method in METHODS:
            step_s = 2 * PROBES[method] * forward_s
            a40 = a40_seconds(size, method, "series")
            out.append({"target": f"Table 1 {size} {method} series", "estimate": f"{step_s:.3g} s/step",
                        "against": f"A40 {a40} s/step: at most {a40 / step_s:.0f}x faster", "bound": r["bound"],
                        "goal": ">= 5x faster than the A40", "seconds_per_step": round(step_s, 4),
                        "a40_seconds_per_step": a40, "speedup_bound": round(a40 / step_s, 1)})
    return out


@app.command(help=cli_help(__doc__))
@user_errors
def main(report: str = typer.Option(None, help="A static report's JSON (default: the newest in bench/results).")):
    path = Path(report) if report else newest_report()
    commit, tf32_peak, rows = read_report(path)
    table = [matmul_row(rows, tf32_peak), *table1_rows(rows)]
    print(f"Static estimates from {path.name} (commit {commit}); bounds, not measurements.")
    print_table(table, ["target", "estimate", "against", "bound", "goal"])
    write_result("gpu_targets", "sm90", table, {"target": "static sm_90 (H100 SXM5) estimates, not measured",
                                                 "report": path.name, "report_commit": commit})


if __name__ == "__main__":
    app()
