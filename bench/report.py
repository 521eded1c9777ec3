"""Shared by benchmarks: what machine and commit a result belongs to, a printed table, a JSON file."""

import datetime
import json
import os
import platform
import subprocess
import time
from pathlib import Path

from eggnog.runtime.errors import BadInput

REPO = Path(__file__).resolve().parent.parent
# EGGNOG_BENCH_RESULTS redirects results (tests use it to keep the repository clean)
RESULTS = Path(os.environ.get("EGGNOG_BENCH_RESULTS") or Path(__file__).resolve().parent / "results")


def cpu_name():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(*args, cwd):
    return subprocess.run(["git", *args], capture_output=True, text=True, cwd=cwd, timeout=10)


def commit(repo=REPO):
    """The project's commit (with -dirty when tracked files changed), from its own git metadata only: a
    copy of the checkout without .git inside another repository must not take that one's commit.
    EGGNOG_COMMIT, set by whoever copied the checkout, wins; "unknown" where neither says."""
    if os.environ.get("EGGNOG_COMMIT"):
        return os.environ["EGGNOG_COMMIT"]
    try:
        top = _git("rev-parse", "--show-toplevel", cwd=repo)
        if top.returncode or Path(top.stdout.strip()).resolve() != Path(repo).resolve():
            return "unknown"
        head = _git("rev-parse", "--short=12", "HEAD", cwd=repo)
        dirty = _git("status", "--porcelain", "--untracked-files=no", cwd=repo).stdout.strip()
        return head.stdout.strip() + ("-dirty" if dirty else "") if head.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def timed_runs(fn, repeat=5, warmup=1, sync=lambda: None):
    """Seconds of each of `repeat` calls after `warmup` untimed ones, the device synchronised around each."""
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return times


def median_seconds(fn, repeat=5, warmup=1, sync=lambda: None):
    times = timed_runs(fn, repeat, warmup, sync)
    return sorted(times)[len(times) // 2]


def loadavg():
    """The 1, 5 and 15 minute load averages, or None where /proc has none."""
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return None



def check_python(path, flag):
    """Refuse, in one sentence, a peer interpreter given by `flag` that cannot be run."""
    if not os.access(path, os.X_OK) or os.path.isdir(path):
        raise BadInput(f"{flag} {path} is not an executable Python")

def peer_result(command, timeout, env=None, missing="is not installed or does not run there"):
    """The last JSON line a peer's command prints, or a sentence saying why there is none: the command's
    last line on stderr when it fails (`missing` says what that means)."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"did not finish within {timeout} s"
    except OSError as e:
        return f"did not start: {e}"
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        last = [line for line in done.stderr.strip().splitlines() if line.strip()][-1:] or ["no message"]
        return f"{missing} (exit {done.returncode}: {last[0].strip()})"
    return json.loads(lines[-1])


def print_table(rows, columns):
    widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in columns]
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths)))
    for r in rows:
        print("  ".join(str(r[c]).rjust(w) for c, w in zip(columns, widths)))


def write_result(name, device, rows, extra=None):
    """bench/results/<name>-<device>-<date>.json; returns the path."""
    today = datetime.date.today().isoformat()
    record = {"benchmark": name, "device": device, "cpu": cpu_name(), "commit": commit(), "date": today,
              **(extra or {}), "rows": rows}
    RESULTS.mkdir(exist_ok=True)
    slug = "".join(ch if ch.isalnum() else "-" for ch in device).strip("-").lower()
    path = RESULTS / f"{name}-{slug}-{today}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path
