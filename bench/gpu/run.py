"""The runner behind `bash bench/gpu/run.sh`: a plan of steps (bench/gpu/steps.py) run one after another on
the GPU (no simulator) within one time budget, sized for GPU slots of a few minutes a command.

    python3 -m bench.gpu.run --quick [--out DIR]   # selfcheck, the riskiest GPU tests, EGGROLL: 150 s
    python3 -m bench.gpu.run [--out DIR] [--nano-egg DIR]   # the other GPU tests, the benchmarks and peers: 450 s
    python3 -m bench.gpu.run --profile [--out DIR]  # where the time goes: 300 s
    python3 -m bench.gpu.run --first-contact [--out DIR] [--nano-egg DIR]   # all of it, trimmed: 480 s
    python3 -m bench.gpu.run [--quick|--profile|--first-contact] [--budget SECONDS] [--only STEP,...] [--dry-run]

Peers run in the same run, on the same GPU: a step marked with the torch peer gets `--torch-python`
(this python3) where torch with CUDA imports, and the nano-egg step gets `--nano-python` and
`--nano-egg DIR` when --nano-egg names a checkout of nano-egg (never copied into this project). Where a
peer is missing, one line says so and its rows are skipped (a step that only compares is skipped).

Each step has an estimated cost. A step runs only when its estimate fits in what is left of the
budget, and is stopped when the budget runs out whatever its estimate said; a step that does not
fit is skipped with the reason recorded, and the steps after it still get their chance.

Everything goes into --out (default bench/results/, or EGGNOG_BENCH_RESULTS; created if missing) and
nowhere else: the JSON (and charts) each benchmark writes into a folder of its own
(EGGNOG_BENCH_RESULTS), copied; one log of everything the steps printed, gpu-<GPU>-<date>[-PLAN].log;
and the summary, gpu-<GPU>-<date>[-PLAN].json and .md (PLAN: quick, profile or first-contact; none
for full), rewritten after every step, so a run killed
from outside keeps what it had (steps not finished are "pending"). The first-contact plan keeps the
steps' files in one archive instead, gpu-<GPU>-<date>-first-contact.tar.gz, rewritten after every step
(four files in all: a lent GPU machine hands back only a few), gives its steps EGGNOG_RUN_RESULTS (the
folder of this run's results, for the refit to read), takes each step's estimate from the newest run of
the same command (bench/gpu/history.py), and ends with each goal row's predicted range against the
figure the run measured (bench/gpu/goal_ranges.py), printed and in the summary. SIGTERM or SIGINT to the runner
stops the running step (recorded as stopped, "interrupted"), skips the rest, writes the summary and
exits 1. A step stopped by the budget or a signal keeps the JSON lines it had printed (Table 1 prints
one per cell). The GPU probe before the first step counts against the budget.

`--dry-run` prints the plan, assuming each step takes its estimate, and the total; it needs no GPU
and writes nothing. Without a visible GPU the command stops with one sentence and exit status 2,
having written nothing. Exit status 1 when a step failed or was stopped.
"""

import datetime
import io
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from contextlib import redirect_stdout
from dataclasses import replace
from pathlib import Path

import typer

from bench.gpu import goal_ranges
from bench.gpu.bundle import bundle
from bench.gpu.history import HISTORY, with_history
from bench.gpu.steps import PLANS, PROBE_S, PY
from bench.report import REPO, RESULTS, commit, cpu_name, print_table
from eggnog.runtime.cli import cli_help, user_errors
from eggnog.runtime.errors import BadInput

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)

GPU_PROBE = """
import json
from eggnog.kernels.core.backend import gpu_usable
if gpu_usable():
    from eggnog.kernels.core.cuda_api import cuda
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


TORCH_CUDA_PROBE = "import torch; raise SystemExit(0 if torch.cuda.is_available() else 1)"


def torch_with_cuda():
    """Whether this python3 imports torch and torch sees a GPU."""
    try:
        return subprocess.run([PY, "-c", TORCH_CUDA_PROBE], capture_output=True, timeout=180).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def peer_arguments(nano_egg, torch_cuda):
    """Arguments each peer adds to a step's command, or the sentence why it is missing."""
    return {"torch": ("--torch-python", PY) if torch_cuda else
            "torch with CUDA is not importable by this python3: the PyTorch peer rows are skipped",
            "nano-egg": ("--nano-python", PY, "--nano-egg", str(nano_egg)) if nano_egg else
            "no --nano-egg given: nano-egg's rows are skipped"}


def with_peers(steps, peers):
    """The steps with their peers' arguments and estimates where a peer is at hand; a step that needs a
    missing peer is kept as it is (skip_reason refuses it). Also the lines saying which peers are missing."""
    out, missing = [], []
    for step in steps:
        got = peers.get(step.peer) if step.peer else None
        if isinstance(got, tuple):
            step = replace(step, argv=step.argv + got, estimate_s=step.estimate_s + step.peer_s, peer_s=0,
                           needs_peer=False)
        elif got and got not in missing:
            missing.append(got)
        out.append(step)
    return tuple(out), missing


def skip_reason(step, left, budget, repo=REPO):
    """Why `step` cannot start with `left` seconds of the budget remaining; None when it can."""
    if step.script and not step.script_in(repo):
        return f"{step.script} is not in this checkout"
    if step.needs_peer:
        return f"its peer ({step.peer}) is not at hand"
    if step.estimate_s > left:
        return f"estimated {step.estimate_s} s, only {max(0, round(left))} s of the {budget} s budget left"
    return None


def plan(steps, budget, repo=REPO, start=0):
    """What would run if every step took its estimate, the first starting at second `start`:
    (step, start second, skip reason or None)."""
    used, out = start, []
    for step in steps:
        reason = skip_reason(step, budget - used, budget, repo)
        out.append((step, used, reason))
        used += 0 if reason else step.estimate_s
    return out


class Echo:
    """What the runner prints, on stdout and, once opened, in the run's log file."""

    def __init__(self):
        self.file = None

    def open(self, path):
        self.file = open(path, "w", buffering=1, errors="replace")

    def write(self, text):
        print(text, end="", flush=True)
        if self.file:
            self.file.write(text)

    def line(self, text):
        self.write(text + "\n")

    def close(self):
        if self.file:
            self.file.close()
            self.file = None


class Interruption:
    """SIGTERM or SIGINT to the runner (an outer `timeout`, Ctrl-C): the running step's process group is
    killed and no later step starts. The handler only flags and kills, so nothing is half-written."""

    def __init__(self):
        self.signal, self.running, self._previous = None, None, {}

    def install(self):
        for signum in (signal.SIGTERM, signal.SIGINT):
            self._previous[signum] = signal.signal(signum, self._handle)

    def restore(self):
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def _handle(self, signum, frame):
        self.signal = signal.Signals(signum).name
        self.stop_running()

    def started(self, proc):
        self.running = proc
        if self.signal:  # the signal came between the flag check and the start
            self.stop_running()

    def finished(self):
        self.running = None

    def stop_running(self):
        """Kill the running step's whole process group (the budget ran out, or a signal came)."""
        if self.running is not None:
            try:
                os.killpg(self.running.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _pump(stream, tail, json_lines, echo):
    """Echo a step's output as it comes; keep its last lines and the JSON objects it printed."""
    for line in stream:
        echo.write(line if line.endswith("\n") else line + "\n")
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


def _record(step, **fields):
    return {"step": step.name, "what": step.what, "command": step.command(), "estimate_s": step.estimate_s, **fields}


def with_checkout(pythonpath):
    """PYTHONPATH with this checkout first: a step's script finds eggnog on a node where it is not
    installed (an image's packages and the checkout on PYTHONPATH are all it needs)."""
    return os.pathsep.join([str(REPO)] + [p for p in (pythonpath or "").split(os.pathsep) if p])


def run_step(step, limit, results, repo=REPO, echo=None, interruption=None):
    """Run one step for at most `limit` seconds; its record (status, seconds, results, files)."""
    echo, interruption = echo or Echo(), interruption or Interruption()
    record = _record(step)
    tail, json_lines = deque(maxlen=15), []
    with tempfile.TemporaryDirectory(prefix="eggnog-gpu-step-") as folder:
        env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0", "EGGNOG_PROGRESS": "0", "EGGNOG_BENCH_RESULTS": folder,
               "PYTHONPATH": with_checkout(os.environ.get("PYTHONPATH")), **step.env}
        start = time.monotonic()
        # a session of its own, so stopping the step stops every process it started (mpiexec ranks)
        proc = subprocess.Popen(step.argv, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", start_new_session=True)
        interruption.started(proc)
        reader = threading.Thread(target=_pump, args=(proc.stdout, tail, json_lines, echo), daemon=True)
        reader.start()
        try:
            code = proc.wait(timeout=max(limit, 0.001))
            if interruption.signal and code != 0:
                record.update(status="stopped", reason=f"interrupted: {interruption.signal} to the runner")
            else:
                record.update(status="ok" if code == 0 else "failed", exit_status=code)
        except subprocess.TimeoutExpired:
            interruption.stop_running()
            proc.wait()
            record.update(status="stopped", reason=f"still running when the budget ran out, after {round(limit)} s")
        finally:
            interruption.finished()
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


def pending(steps):
    """Records of steps not reached yet, for a summary written while the run goes on."""
    return [_record(s, status="pending") for s in steps]


def run_all(steps, budget, results, started=None, repo=REPO, echo=None, interruption=None, after_each=None):
    """Every step in order within `budget` seconds counted from `started`; one record per step.
    `after_each(records)` is called after every step (the summary is rewritten there)."""
    started = time.monotonic() if started is None else started
    echo, interruption = echo or Echo(), interruption or Interruption()
    records = []
    for step in steps:
        left = budget - (time.monotonic() - started)
        if interruption.signal:
            reason = f"interrupted: {interruption.signal} to the runner before it started"
        else:
            reason = skip_reason(step, left, budget, repo)
        if reason:
            echo.line(f"== {step.name}: skipped ({reason})")
            records.append(_record(step, status="skipped", reason=reason))
        else:
            echo.line(f"== {step.name}: {step.command()}  (estimated {step.estimate_s} s, {round(left)} s left)")
            records.append(run_step(step, left, results, repo, echo, interruption))
        if after_each:
            after_each(records)
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


def note(record):
    """What the summary says beside a step's status: why it was skipped or stopped, or how it ended."""
    failed = f"exit status {record['exit_status']}" if record["status"] == "failed" else ""
    return record.get("reason") or record.get("outcome") or failed


def goals_markdown(goals):
    """The summary's section of goal rows: predicted range against measured."""
    if not goals:
        return []
    return ["", "## Goal rows: predicted range against measured", "", *markdown_table(goals, limit=len(goals))]


def summary_markdown(record):
    gpu = record["gpu"]
    lines = [f"# GPU run ({record['plan']}): {gpu['name']}, {record['date']}", "",
             f"Compute capability {gpu['compute_capability']}, {gpu['memory_GiB']} GiB; CPU {record['cpu']}; "
             f"commit {record['commit']}. Budget {record['budget_s']} s, used {record['elapsed_s']} s. "
             f"Full output: {record['log']}.", *[line for note in record.get("notes", []) for line in ("", note)], "",
             "| step | status | seconds | estimate | what | note |", "|---|---|---|---|---|---|"]
    for r in record["rows"]:
        lines.append(f"| {r['step']} | {r['status']} | {_cell(r.get('seconds'))} | {r['estimate_s']} | "
                     f"{_cell(r['what'])} | {_cell(note(r))} |")
    for r in record["rows"]:
        if r["status"] in ("skipped", "pending"):
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
    lines += goals_markdown(record.get("goals"))
    return "\n".join(lines) + "\n"


def run_name(gpu_name, date, plan_name="full"):
    """gpu-<GPU model>-<date>[-quick|-profile]: what the summary and the log are called (each plan run on
    the same day keeps its own)."""
    model = re.sub(r"^NVIDIA\s+", "", gpu_name)
    slug = "".join(ch if ch.isalnum() else "-" for ch in model).strip("-").lower()
    return f"gpu-{slug}-{date}" + ("" if plan_name == "full" else f"-{plan_name}")


def write_summary(out, gpu, records, budget, elapsed, plan_name="full", date=None, machine=None, notes=(),
                  goals=None):
    """<out>/<run_name>.json and .md (replaced whole, so a reader never sees half a file); returns
    the JSON path. `machine` (cpu, commit) is asked once per run by run_plan; `notes`: the peers not at
    hand, one line each; `goals`: the goal rows' predicted ranges against this run's figures."""
    date = date or datetime.date.today().isoformat()
    name = run_name(gpu["name"], date, plan_name)
    machine = machine or {"cpu": cpu_name(), "commit": commit()}
    record = {"benchmark": "gpu" if plan_name == "full" else f"gpu-{plan_name}",
              "device": re.sub(r"^NVIDIA\s+", "", gpu["name"]), **machine, "date": date, "plan": plan_name, "gpu": gpu,
              "budget_s": budget,
              "elapsed_s": round(elapsed, 1), "log": name + ".log", "notes": list(notes), "rows": records}
    if goals is not None:
        record["goals"] = goals
    path = Path(out) / (name + ".json")
    texts = {path: json.dumps(record, indent=1) + "\n", path.with_suffix(".md"): summary_markdown(record)}
    for target, text in texts.items():
        partial = target.with_name(target.name + ".partial")
        partial.write_text(text)
        partial.replace(target)
    return path


# plans run in one pass: the steps' files archived, estimates from the last runs, the goal rows at the end
BUNDLED = ("first-contact",)


def compare_goals(results, echo, history=HISTORY):
    """Each goal row's predicted range against this run's figure, echoed; the rows, also written into
    `results` as goal_ranges.json."""
    try:
        rows, lines, source = goal_ranges.report(results, [results, history])
    except (KeyError, TypeError, ValueError, OSError) as e:  # a goals file of another shape: the run goes on
        rows, lines, source = [], [f"goal rows not compared: the goals file could not be read ({e!r})"], None
    for text in lines:
        echo.line(text)
    if rows:
        (Path(results) / "goal_ranges.json").write_text(json.dumps({"predictions": source, "rows": rows}, indent=1))
    return rows


def run_plan(gpu, steps, budget, out, plan_name="full", started=None, repo=REPO, notes=(), history=HISTORY):
    """Run `steps` on `gpu` into `out` with the log, the summaries and the signal handling; the exit
    status (1 when a step failed or was stopped). A bundled plan's steps write into a folder of their own,
    archived into `out` after every step, and the run ends with the goal rows (`history`: the committed
    results, whose goals file has the predictions)."""
    started = time.monotonic() if started is None else started
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    date = datetime.date.today().isoformat()
    machine = {"cpu": cpu_name(), "commit": commit()}
    echo, interruption = Echo(), Interruption()
    name = run_name(gpu["name"], date, plan_name)
    bundled = plan_name in BUNDLED
    results = Path(tempfile.mkdtemp(prefix="eggnog-gpu-run-")) if bundled else out
    if bundled:
        steps = tuple(replace(s, env={**s.env, "EGGNOG_RUN_RESULTS": str(results)}) for s in steps)
    echo.open(out / (name + ".log"))
    interruption.install()
    goals = None
    try:
        echo.line(f"GPU: {gpu['name']} (compute capability {gpu['compute_capability']}, {gpu['memory_GiB']} GiB); "
                  f"{plan_name} plan, budget {budget} s, results in {out}")
        for line in notes:  # the peers that are not at hand
            echo.line(line)

        def summarise(records):
            write_summary(out, gpu, records + pending(steps[len(records):]), budget, time.monotonic() - started,
                          plan_name, date, machine, notes, goals)
            if bundled:
                bundle(results, out / (name + ".tar.gz"))

        summarise([])
        records = run_all(steps, budget, results, started, repo, echo, interruption, after_each=summarise)
        if bundled:
            goals = compare_goals(results, echo, history)
        summarise(records)
        columns = ["step", "status", "seconds", "estimate_s"]
        table = io.StringIO()
        with redirect_stdout(table):  # into the log as well
            print_table([{**{k: _cell(r.get(k)) for k in columns}, "note": _cell(note(r))} for r in records],
                        columns + ["note"])
        echo.write(table.getvalue())
        echo.line(f"wrote {out / name}.json, .md and .log" + (" and the steps' files in .tar.gz" if bundled else ""))
    finally:
        interruption.restore()
        echo.close()
        if bundled:
            shutil.rmtree(results, ignore_errors=True)
    failed = any(r["status"] in ("failed", "stopped") for r in records)
    return 1 if failed or interruption.signal else 0


def chosen_steps(only, steps):
    if not only:
        return steps
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in {s.name for s in steps}]
    if unknown or not names:
        raise BadInput(f"--only {only!r}: choose from {', '.join(s.name for s in steps)}")
    return tuple(s for s in steps if s.name in names)


def print_plan(steps, budget, out, plan_name, notes=()):
    """The dry run: the plan, the total of its estimates and what it would write."""
    rows = [("gpu-probe", 0, PROBE_S, "run", "python3 -c <which GPU numba sees>")]
    decided = plan(steps, budget, start=PROBE_S)
    rows += [(s.name, at, s.estimate_s, f"skip: {reason}" if reason else "run", s.command())
             for s, at, reason in decided]
    rows.insert(0, ("step", "starts_at_s", "estimate_s", "plan", "command"))
    widths = [max(len(str(r[i])) for r in rows) for i in range(4)]
    for r in rows:  # the command last and unpadded: a pytest step's is long
        print(f"{r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]:<{widths[3]}}  {r[4]}")
    if any(s.basis for s in steps):
        print(f"estimates (the GPU probe's {PROBE_S} s: stated):")
        for s in steps:
            print(f"  {s.name}: {s.estimate_s} s, {s.basis}")
    total = PROBE_S + sum(s.estimate_s for s, _, reason in decided if not reason)
    skipped = "; skipped steps not counted" if any(reason for _, _, reason in decided) else ""
    print(f"total of the estimates: {total} s of the {budget} s budget (the GPU probe's {PROBE_S} s included{skipped})")
    for line in notes:
        print(line)
    name = f"gpu-<GPU model>-{datetime.date.today().isoformat()}" + ("" if plan_name == "full" else f"-{plan_name}")
    files = "the steps' result files in .tar.gz" if plan_name in BUNDLED else "each step's result files"
    print(f"would write into {out}: {name}.json, .md and .log, and {files}")


@app.command(help=cli_help(__doc__))
@user_errors
def main(quick: bool = typer.Option(False, "--quick", help="The quick plan: selfcheck, the riskiest GPU tests, "
                                    "EGGROLL at the headline size (default budget 150 s)."),
         profile: bool = typer.Option(False, "--profile", help="The profile plan: where the time goes, per kernel "
                                      "and on the host, with Nsight Compute where ncu is on PATH (300 s)."),
         first_contact: bool = typer.Option(False, "--first-contact", help="The first-contact plan: selfcheck, the "
                                            "riskiest GPU tests, probes, tuner, benchmarks beside the peers, "
                                            "profile, refit, goal rows predicted against measured (480 s)."),
         budget: int = typer.Option(None, help="Seconds for the whole run (default: the plan's)."),
         only: str = typer.Option(None, help="Comma-separated steps of the plan to run (default: all)."),
         out: Path = typer.Option(None, help="Folder for every file the run writes (default bench/results/)."),
         nano_egg: Path = typer.Option(None, "--nano-egg", help="A checkout of nano-egg (holding run.py): its JAX "
                                       "runs beside eggnog's EGGROLL step on this GPU."),
         dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and its estimates; run nothing.")):
    started = time.monotonic()
    chosen = [flag for flag, on in (("--quick", quick), ("--profile", profile), ("--first-contact", first_contact))
              if on]
    if len(chosen) > 1:
        raise BadInput(f"{' and '.join(chosen)} are {len(chosen)} plans: choose one")
    plan_name = chosen[0][2:] if chosen else "full"
    steps, default_budget = PLANS[plan_name]
    budget = default_budget if budget is None else budget
    if budget < 1:
        raise BadInput(f"--budget must be at least 1 second, not {budget}")
    if nano_egg is not None and not (nano_egg / "run.py").is_file():
        raise BadInput(f"--nano-egg {nano_egg} holds no run.py (a checkout of nano-egg is expected)")
    steps = chosen_steps(only, steps)
    out = RESULTS if out is None else out
    if out.exists() and not out.is_dir():
        raise BadInput(f"--out {str(out)!r} is a file, not a folder")
    if dry_run:  # as if torch with CUDA were there: the plan a GPU node with the image's torch runs
        steps, notes = with_peers(steps, peer_arguments(nano_egg and nano_egg.resolve(), True))
        print_plan(with_history(steps) if plan_name in BUNDLED else steps, budget, out, plan_name, notes)
        return
    gpu = probe_gpu()
    if gpu is None:
        raise BadInput("no GPU is visible (numba finds no usable CUDA device), so there is nothing to run this on; "
                       "--dry-run shows the plan without one")
    steps, notes = with_peers(steps, peer_arguments(nano_egg and nano_egg.resolve(), torch_with_cuda()))
    steps = with_history(steps) if plan_name in BUNDLED else steps
    raise SystemExit(run_plan(gpu, steps, budget, out, plan_name, started, notes=notes))


if __name__ == "__main__":
    app()
