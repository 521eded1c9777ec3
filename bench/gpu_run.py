"""One command for a GPU machine (`bash bench/gpu.sh`): the GPU test layer on the GPU (no simulator)
and every benchmark at its headline size, one after another within one time budget (10 minutes,
sized for one H100), then one JSON and one markdown summary in bench/results/ named by GPU and date.

    python bench/gpu_run.py [--budget 600] [--only eggroll,matmul] [--dry-run]

Each step has an estimated cost. A step runs only when its estimate fits in what is left of the
budget, and is stopped when the budget runs out whatever its estimate said; a step that does not
fit is skipped with the reason recorded, and the steps after it still get their chance. Every
benchmark writes its own JSON into a folder of its own (EGGNOG_BENCH_RESULTS); the files are copied
into bench/results/ and their rows go into the summary. A step stopped at the end of the budget
keeps the JSON lines it had printed (Table 1 prints one per cell). `--dry-run` prints the plan with
the estimates, assuming each step takes its estimate, and needs no GPU. Without a visible GPU the
command stops with one sentence and exit status 2. Exit status 1 when a step failed or was stopped.
"""

import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import typer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.report import REPO, RESULTS, print_table, write_result  # noqa: E402
from eggnog.runtime.cli import user_errors  # noqa: E402
from eggnog.runtime.errors import BadInput  # noqa: E402

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help=__doc__)

BUDGET_S = 600
PY = sys.executable


@dataclass(frozen=True)
class Step:
    name: str
    what: str
    argv: tuple
    estimate_s: int  # seconds on one H100 with today's kernels, start-up and kernel compilation included
    env: dict = field(default_factory=dict)
    outcome: str | None = None  # a pattern for the output line that sums the step up (pytest's last line)

    @property
    def script(self):
        """The repository file the step runs, if it runs one (a missing one skips the step)."""
        return next((a for a in self.argv[1:] if str(a).endswith(".py")), None)

    def command(self):
        return " ".join("python" if a == PY else str(a) for a in self.argv)


# Estimates are rough: the EGGROLL figure comes from the static estimate of the fused kernel (9e7
# member-tokens/s perturbed: well under a second per evaluation of 32768 x 100 bytes) plus its
# compilation, the others from compile counts and the CPU runs. A wrong one costs at most the steps
# after it, since no step runs past the budget. Ordered by what a GPU run is for: correctness, then
# the main job, then the static report, then the float kernels, then the suite with the most cells.
STEPS = (
    Step("gpu-tests", "tests/gpu on the GPU, no simulator", (PY, "-m", "pytest", "-q", "-rs", "tests/gpu"), 90,
         {"EGGNOG_REQUIRE_GPU": "1"}, outcome=r"\d+ (passed|failed|error|skipped)"),
    Step("eggroll", "EGGROLL, EGG 6x256, population 32768, 100 bytes, perturbed and plain",
         (PY, "bench/eggroll_throughput.py", "--depth", "6", "--dim", "256", "--populations", "32768",
          "--tokens", "100", "--backend", "cuda"), 90),
    Step("sass-report", "static report: registers, spills, instruction mix, roofline",
         (PY, "bench/sass_report.py"), 90),
    Step("scan", "MinGRU scan 8x4096x1536", (PY, "bench/scan_throughput.py", "--shapes", "8x4096x1536",
                                             "--backend", "cuda"), 30),
    Step("matmul", "fp32 and TF32 matmul 32768x1536x1536, cuBLAS/cuBLASLt beside it",
         (PY, "bench/matmul_throughput.py", "--shapes", "32768x1536x1536", "--backend", "cuda"), 45),
    Step("mingru-bptt", "MinGRU BPTT step, dim 1024 x depth 8 (105M parameters), batch 8 x 2048, device-resident",
         (PY, "bench/mingru_side_by_side.py", "--configs", "1024x8:8x2048", "--steps", "3", "--backend", "cuda"), 60),
    # distributed cells would put all ranks on this one GPU: they measure communication, not speed-up
    Step("table1", "Table 1, LSTM 100k-10M, in series (cells over 60 s skipped by the suite itself)",
         (PY, "bench/table1.py", "--sizes", "100k,1M,10M", "--modes", "series", "--max-cell-seconds", "60",
          "--backend", "cuda"), 150),
    Step("table1-probe-batch", "Table 1 100k CD-RGE-96 series with 32 evaluations a pass (probes as extra heads)",
         (PY, "bench/table1_cell.py", "--size", "100k", "--method", "cdrge96", "--mode", "series", "--steps", "3",
          "--probe-batch", "32", "--backend", "cuda"), 30),
)

GPU_PROBE = """
import json
from eggnog.kernels.backend import gpu_usable
if gpu_usable():
    from eggnog.kernels.cuda_api import cuda
    device = cuda.get_current_device()
    name = device.name.decode() if isinstance(device.name, bytes) else str(device.name)
    total = cuda.current_context().get_memory_info()[1]
    print(json.dumps({"name": name, "compute_capability": "%d.%d" % device.compute_capability,
                      "memory_GiB": round(total / 2**30, 1)}))
"""


def probe_gpu(env=None):
    """The first visible GPU as a real run sees it (name, compute capability, memory), or None. Asked in
    a process of its own, so this one holds no CUDA context while the steps run."""
    env = dict(os.environ if env is None else env, NUMBA_ENABLE_CUDASIM="0")
    out = subprocess.run([PY, "-c", GPU_PROBE], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if out.returncode == 0 and lines else None


def skip_reason(step, left, budget, repo=REPO):
    """Why `step` cannot start with `left` seconds of the budget remaining; None when it can."""
    if step.script and not (Path(repo) / step.script).is_file():
        return f"{step.script} is not in this checkout"
    if step.estimate_s > left:
        return f"estimated {step.estimate_s} s, only {max(0, round(left))} s of the {budget} s budget left"
    return None


def plan(steps, budget, repo=REPO):
    """What would run if every step took its estimate: (step, start second, skip reason or None)."""
    used, out = 0, []
    for step in steps:
        reason = skip_reason(step, budget - used, budget, repo)
        out.append((step, used, reason))
        used += 0 if reason else step.estimate_s
    return out


def _pump(stream, tail, json_lines):
    """Echo a step's output as it comes; keep its last lines and the JSON objects it printed."""
    for line in stream:
        print(line, end="", flush=True)
        tail.append(line.rstrip("\n"))
        if line.startswith("{"):
            try:
                json_lines.append(json.loads(line))
            except json.JSONDecodeError:
                pass


def collect(folder, results):
    """Copy what a step wrote into `results`; the JSON files' contents by file name, and the names."""
    parsed, names = {}, []
    results.mkdir(parents=True, exist_ok=True)
    for path in sorted(Path(folder).iterdir()):
        if path.is_file():
            shutil.copy2(path, results / path.name)
            names.append(path.name)
            if path.suffix == ".json":
                parsed[path.name] = json.loads(path.read_text())
    return parsed, names


def run_step(step, limit, results, repo=REPO):
    """Run one step for at most `limit` seconds; its record (status, seconds, results, files)."""
    record = {"step": step.name, "what": step.what, "command": step.command(), "estimate_s": step.estimate_s}
    tail, json_lines = deque(maxlen=15), []
    with tempfile.TemporaryDirectory(prefix="eggnog-gpu-step-") as folder:
        env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0", "EGGNOG_PROGRESS": "0", "EGGNOG_BENCH_RESULTS": folder,
               **step.env}
        start = time.monotonic()
        # a session of its own, so stopping the step stops every process it started (mpiexec ranks)
        proc = subprocess.Popen(step.argv, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", start_new_session=True)
        reader = threading.Thread(target=_pump, args=(proc.stdout, tail, json_lines), daemon=True)
        reader.start()
        try:
            code = proc.wait(timeout=max(limit, 0.001))
            record["status"] = "ok" if code == 0 else "failed"
            record["exit_status"] = code
        except (subprocess.TimeoutExpired, KeyboardInterrupt) as stop:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            record["status"] = "stopped"
            record["reason"] = ("interrupted" if isinstance(stop, KeyboardInterrupt)
                                else f"still running when the budget ran out, after {round(limit)} s")
        reader.join(timeout=10)
        record["seconds"] = round(time.monotonic() - start, 1)
        record["results"], record["files"] = collect(folder, results)
    if step.outcome:
        record["outcome"] = next((line for line in reversed(tail) if re.search(step.outcome, line)), None)
    if record["status"] != "ok":
        record["tail"] = list(tail)
        if record["status"] == "stopped" and json_lines:
            record["printed_rows"] = json_lines
    return record


def run_all(steps, budget, results, started=None, repo=REPO):
    """Every step in order within `budget` seconds counted from `started`; one record per step."""
    started = time.monotonic() if started is None else started
    records = []
    for i, step in enumerate(steps):
        left = budget - (time.monotonic() - started)
        reason = skip_reason(step, left, budget, repo)
        if reason:
            print(f"== {step.name}: skipped ({reason})", flush=True)
            records.append({"step": step.name, "what": step.what, "command": step.command(),
                            "estimate_s": step.estimate_s, "status": "skipped", "reason": reason})
            continue
        print(f"== {step.name}: {step.command()}  (estimated {step.estimate_s} s, {round(left)} s left)", flush=True)
        records.append(run_step(step, left, results, repo))
        if records[-1].get("reason") == "interrupted":
            records += [{"step": s.name, "what": s.what, "command": s.command(), "estimate_s": s.estimate_s,
                         "status": "skipped", "reason": "interrupted"} for s in steps[i + 1:]]
            break
    return records


def _cell(value):
    if value is None:
        return "-"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(rows, limit=40):
    """A markdown table of the scalar columns of `rows` (at most `limit` rows)."""
    columns = []
    for row in rows:
        columns += [k for k, v in row.items() if k not in columns and not isinstance(v, (list, dict))]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in rows[:limit]]
    if len(rows) > limit:
        lines.append(f"\n({len(rows) - limit} more rows in the JSON)")
    return lines


def summary_markdown(record):
    gpu = record["gpu"]
    lines = [f"# GPU run: {gpu['name']}, {record['date']}", "",
             f"Compute capability {gpu['compute_capability']}, {gpu['memory_GiB']} GiB; CPU {record['cpu']}; "
             f"commit {record['commit']}. Budget {record['budget_s']} s, used {record['elapsed_s']} s.", "",
             "| step | status | seconds | estimate | what | note |", "|---|---|---|---|---|---|"]
    for r in record["rows"]:
        note = r.get("reason") or r.get("outcome") or ("exit status %s" % r["exit_status"] if r["status"] == "failed" else "")
        lines.append(f"| {r['step']} | {r['status']} | {_cell(r.get('seconds'))} | {r['estimate_s']} | "
                     f"{_cell(r['what'])} | {_cell(note)} |")
    for r in record["rows"]:
        if r["status"] == "skipped":
            continue
        lines += ["", f"## {r['step']}", "", f"`{r['command']}`"]
        for name, result in r.get("results", {}).items():
            for key, value in result.items():
                if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                    lines += ["", f"{name}, {key}:", ""] + markdown_table(value)
        if r.get("printed_rows"):
            lines += ["", "Rows printed before it was stopped:", ""] + markdown_table(r["printed_rows"])
        if r.get("tail"):
            lines += ["", "Last lines of its output:", "", "```"] + r["tail"] + ["```"]
    return "\n".join(lines) + "\n"


def write_summary(gpu, records, budget, elapsed):
    """bench/results/gpu-<GPU model>-<date>.json and .md; returns the JSON path."""
    model = re.sub(r"^NVIDIA\s+", "", gpu["name"])
    path = write_result("gpu", model, records, {"gpu": gpu, "budget_s": budget, "elapsed_s": round(elapsed, 1)})
    path.with_suffix(".md").write_text(summary_markdown(json.loads(path.read_text())))
    return path


def chosen_steps(only):
    if not only:
        return STEPS
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in {s.name for s in STEPS}]
    if unknown or not names:
        raise BadInput(f"--only {only!r}: choose from {', '.join(s.name for s in STEPS)}")
    return tuple(s for s in STEPS if s.name in names)


@app.command()
@user_errors
def main(budget: int = typer.Option(BUDGET_S, help="Seconds for the whole run."),
         only: str = typer.Option(None, help="Comma-separated steps to run (default: all)."),
         dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and its estimates; run nothing.")):
    started = time.monotonic()
    if budget < 1:
        raise BadInput(f"--budget must be at least 1 second, not {budget}")
    steps = chosen_steps(only)
    if dry_run:
        rows = [{"step": s.name, "starts_at_s": at, "estimate_s": s.estimate_s,
                 "plan": f"skip: {reason}" if reason else "run", "command": s.command()}
                for s, at, reason in plan(steps, budget)]
        print_table(rows, ["step", "starts_at_s", "estimate_s", "plan", "command"])
        print(f"budget {budget} s; would write {RESULTS.name}/gpu-<GPU model>-{datetime.date.today()}.json and .md")
        return
    gpu = probe_gpu()
    if gpu is None:
        raise BadInput("no GPU is visible (numba finds no usable CUDA device), so there is nothing to run this on; "
                       "--dry-run shows the plan without one")
    print(f"GPU: {gpu['name']} (compute capability {gpu['compute_capability']}, {gpu['memory_GiB']} GiB); "
          f"budget {budget} s", flush=True)
    records = run_all(steps, budget, RESULTS, started)
    path = write_summary(gpu, records, budget, time.monotonic() - started)
    print_table([{k: _cell(r.get(k)) for k in ("step", "status", "seconds", "estimate_s", "reason")} for r in records],
                ["step", "status", "seconds", "estimate_s", "reason"])
    print(f"wrote {path} and {path.with_suffix('.md').name}")
    if any(r["status"] in ("failed", "stopped") for r in records):
        raise SystemExit(1)


if __name__ == "__main__":
    app()
