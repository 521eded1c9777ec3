"""What calibration keeps of each measured workload, so that a measurement stays usable after its kernel
changes: the static model's SM seconds of the workload's launches over the grid of the constants the walk
depends on (global load latency x L2 bandwidth), walked from the kernels as they were measured, with the
workload's HBM bytes and units, its family and the measurement itself.

    python -m bench.static_report.calibration --keep              # the working tree's current measured rows
    python -m bench.static_report.calibration --keep --at 053b29d  # the kernels of a commit (a git worktree)

With `--at`, the kernels (eggnog.*) are imported from a worktree of that commit and the model
(bench/static_report) is the working tree's; whoever runs it vouches that the commit's kernels are the
ones measured (053b29d: the measured kernels of f04d3a251652 with the launches the model reads added).
Without it, the working tree's workloads whose kernels have not changed since their measurement. Rows
are merged into calibration_rows.json by workload and measurement file (a newer walk replaces an older).
"""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.static_report.fitting import CONSTANTS, L2S, LATENCIES
from bench.static_report.measurements import MEASURED
from eggnog.runtime.errors import BadInput

KEPT = Path(__file__).with_name("calibration_rows.json")
L2_GRID = L2S
ROOT = MEASURED.parent.parent


def family(workload):
    """The kernel module of the workload's first launch (eggnog.kernels.<family>.<module>): rows of one
    family share code, so holding a family out tests the model on code it was not fitted on."""
    return workload["launches"][0]["kernel"].removeprefix("eggnog.kernels.").rsplit(".", 1)[0]


def _git(*args, cwd=ROOT):
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def walked_rows(current_only):
    """Kept rows of this process's kernels: every workload with launches whose measurement bench/results
    holds (with `current_only`, not those whose kernels changed since it)."""
    from bench.static_report.model import predict
    from bench.static_report.workloads import compiled_code, measured_workloads

    chosen = measured_workloads(current_only)
    if not chosen:
        return []
    code = compiled_code(w for w, _ in chosen)
    rows = []
    for w, measured in chosen:
        grid = {f"{l2:.3g}": {str(lat): predict(w, code, {**CONSTANTS, "global_latency_cycles": lat,
                                                          "l2_bytes_per_s": l2})["sm_seconds"]
                              for lat in LATENCIES} for l2 in L2_GRID}
        rows.append({"name": w["name"], "family": family(w), "unit": w["unit"], "units": w["units"],
                     "hbm_bytes": w["bytes_per_unit"].get("hbm", 0) * w["units"], "measured": measured,
                     "kernels": sorted({launch["kernel"] for launch in w["launches"]}), "sm_seconds": grid})
        print(f"walked {w['name']}", file=sys.stderr)
    return rows


class _TreeFinder:
    """Imports eggnog from another checkout, eggnog.<folder> from its top-level folders (as installed)."""

    def __init__(self, tree):
        self.tree = tree

    def find_spec(self, fullname, path=None, target=None):
        parts = fullname.split(".")
        if parts[0] != "eggnog" or len(parts) > 2:
            return None
        folder = self.tree / parts[-1]
        if not (folder / "__init__.py").exists():
            return None
        return importlib.util.spec_from_file_location(fullname, folder / "__init__.py",
                                                      submodule_search_locations=[str(folder)])


def walk_at(commit):
    """Kept rows of the kernels at `commit`, walked in a process importing them from a worktree."""
    full = _git("rev-parse", "--verify", f"{commit}^{{commit}}")
    if full is None:
        raise BadInput(f"--at {commit!r} names no commit git knows")
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), full], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", PYTHONPATH=str(ROOT))
            done = subprocess.run([sys.executable, "-m", "bench.static_report.keep", str(tree)], cwd=ROOT, env=env,
                                  capture_output=True, text=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)
    if done.returncode:
        raise RuntimeError(f"walking the kernels of {commit} failed: {done.stderr[-3000:]}")
    return [{**row, "walked_at": full} for row in json.loads(done.stdout)]


def keep(at=None, path=KEPT):
    """Walk (at `at`, or the working tree's current rows) and merge the rows into `path`; returns them."""
    if at is None:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
        head = _git("rev-parse", "HEAD") or "unknown"
        rows = [{**row, "walked_at": head} for row in walked_rows(current_only=True)]
    else:
        rows = walk_at(at)
    model = _git("log", "-1", "--format=%H", "--", "bench/static_report") or "unknown"
    rows = [{**row, "model_commit": model} for row in rows]
    old = json.loads(path.read_text())["rows"] if path.exists() else []
    fresh = {(r["name"], r["measured"]["file"]) for r in rows}
    merged = [r for r in old if (r["name"], r["measured"]["file"]) not in fresh] + rows
    path.write_text(json.dumps({"l2_grid": list(L2_GRID), "latencies": list(LATENCIES),
                                "rows": merged}, indent=1) + "\n")
    return rows


def kept_rows(path=KEPT):
    """The kept rows (an empty list when nothing is kept)."""
    return json.loads(path.read_text())["rows"] if path.exists() else []


if __name__ == "__main__":  # the worktree's process of walk_at: python -m bench.static_report.keep TREE
    sys.meta_path.insert(0, _TreeFinder(Path(sys.argv[1])))
    for name in [m for m in sys.modules if m == "eggnog" or m.startswith("eggnog.")]:
        del sys.modules[name]  # imported with the model: from here on, the other checkout's
    json.dump(walked_rows(current_only=False), sys.stdout)
