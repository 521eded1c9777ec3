"""What the registry's check of an op's arguments costs (kernels/core/signature.py), on the CPU:

1. per op: the check alone on the op's first registered case (median of many calls, microseconds);
2. per job: a short run of a main job, in this process, with every check timed: the checks' time a step
   against the median step past the first two (which compile), from the run's metrics.jsonl.

    python -m bench.throughput.op_check_cost
    python -m bench.throughput.op_check_cost --job train_es --job train_bptt --steps 20
"""

import json
import runpy
import statistics
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np
import typer

from bench.report import print_table, write_result
from eggnog.kernels.core import signature
from eggnog.kernels.core.placement import adopt
from eggnog.kernels.core.registry import all_ops
from eggnog.runtime.cli import cli_help, user_errors
from eggnog.runtime.errors import BadInput

ROOT = Path(__file__).resolve().parents[2]
JOBS = {"train_es": ["bin/train_es.py"], "train_bptt": ["bin/train_bptt.py"],
        "train_es_mingru": ["bin/train_es.py", "--model", "mingru"]}
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


def per_op_rows(calls):
    rows = []
    for name, entry in all_ops().items():
        if entry.signature is None or entry.cases is None:
            continue
        args = next(iter(entry.cases(np.random.default_rng(zlib.crc32(name.encode())))))
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            entry.signature.check("cpu", args, {}, adopt)
            times.append(time.perf_counter() - started)
        rows.append({"op": name, "arguments": len(args), "check_us": round(statistics.median(times) * 1e6, 2)})
    return rows


def job_row(name, steps, directory):
    """Run one job for `steps` steps here, timing every check; its steps' time from metrics.jsonl."""
    spent, original = [0.0, 0], signature.Signature.check

    def timed(self, *args, **kwargs):
        started = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - started
            spent[1] += 1

    script, *flags = JOBS[name]
    run_dir = Path(directory) / name
    sys.argv = [script, *flags, "--steps", str(steps), "--run-dir", str(run_dir)]
    signature.Signature.check = timed
    try:
        runpy.run_path(str(ROOT / script), run_name="__main__")
    except SystemExit as e:
        if e.code not in (0, None):
            raise RuntimeError(f"{name} stopped with status {e.code}") from None
    finally:
        signature.Signature.check = original
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    steady = statistics.median(r.get("step_s", r.get("s_per_step")) for r in records[2:])  # past the compiles
    steps = records[-1]["step"]
    return {"job": " ".join([Path(script).name, *flags]), "steps": steps, "checks": spent[1],
            "checks_per_step": round(spent[1] / steps, 1), "check_us_per_step": round(1e6 * spent[0] / steps, 1),
            "median_step_s": round(steady, 4), "check_share_pct": round(100 * spent[0] / steps / steady, 3)}


@app.command(help=cli_help(__doc__))
@user_errors
def main(job: list[str] = typer.Option(None, help=f"Jobs (default: train_es and train_bptt): {', '.join(JOBS)}."),
         steps: int = typer.Option(20, help="Steps of each job."),
         calls: int = typer.Option(2000, help="Checks timed per op.")):
    chosen = job or ["train_es", "train_bptt"]
    unknown = [j for j in chosen if j not in JOBS]
    if unknown:
        raise BadInput(f"unknown job {unknown[0]!r}: choose from {', '.join(JOBS)}")
    if steps < 4 or calls < 1:
        raise BadInput("--steps must be at least 4 and --calls at least 1")
    ops = per_op_rows(calls)
    print_table(ops, ["op", "arguments", "check_us"])
    check_us = [r["check_us"] for r in ops]
    summary = {"ops": len(ops), "median_check_us": round(statistics.median(check_us), 2), "max_check_us": max(check_us)}
    print(summary)
    with tempfile.TemporaryDirectory() as tmp:
        jobs = [job_row(name, steps, tmp) for name in chosen]
    print_table(jobs, list(jobs[0]))
    path = write_result("op_check_cost", "cpu", jobs, {"per_op": ops, "summary": summary})
    print(f"wrote {path}")


if __name__ == "__main__":
    app()
