"""Estimates of a GPU plan's steps from the seconds the newest run of the same command took.

Every GPU run leaves its summary, bench/results/gpu-<GPU>-<date>[-PLAN][-N].json, with each step's
command and `seconds`. A step's estimate is the seconds of the newest finished ("ok") row with the same
command (the nano-egg checkout's path left out of the comparison), rounded up; a step no run has
measured keeps its stated estimate and says why (Step.basis). Newest: the latest date, then the larger
-N of runs of one date.
"""

import json
import math
import re
from dataclasses import replace
from pathlib import Path

from bench.report import REPO

HISTORY = REPO / "bench" / "results"  # the committed results, wherever a run writes its own
SUMMARY = re.compile(r"^gpu-.+-(\d{4}-\d{2}-\d{2})(?:-[a-z-]+?)?(?:-(\d+))?\.json$")


# The modules the plans ran before bench/ was split into sub-packages (bench.<old>), as older summaries name them.
MOVED = {"eggroll_throughput": "throughput.eggroll", "scan_throughput": "throughput.scan",
         "matmul_throughput": "throughput.matmul", "nano_egg_side_by_side": "throughput.nano_egg_side_by_side",
         "mingru_side_by_side": "throughput.mingru_side_by_side", "table1": "zorn_paper.table1",
         "table1_cell": "zorn_paper.table1_cell", "gpu_profile": "gpu.profile", "tune": "gpu.tune"}
OLD_MODULE = re.compile(r"(?<=-m bench\.)(" + "|".join(MOVED) + r")(?=\s|$)")


def same_command(command):
    """A recorded command with the nano-egg checkout's path replaced and a module's old name given its new
    one: runs from other folders, and from before the move, compare equal."""
    command = OLD_MODULE.sub(lambda m: MOVED[m.group(1)], command)
    return re.sub(r"(--nano-egg )\S+", r"\1NANO", command)


def measured_seconds(results=HISTORY):
    """{command: (seconds, summary file name)} of every step that finished in a GPU run's summary, the
    newest run's where several ran the same command."""
    runs = []
    for path in Path(results).glob("gpu-*.json"):
        name = SUMMARY.match(path.name)
        if name is None:
            continue
        try:
            record = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if not isinstance(record, dict) or "plan" not in record or not isinstance(record.get("rows"), list):
            continue  # a benchmark's JSON named gpu-..., not a run's summary
        runs.append(((name.group(1), int(name.group(2) or 1), path.name), record))
    found = {}
    for (_, _, file), record in sorted(runs, key=lambda run: run[0]):  # oldest first: the newest wins
        for row in record["rows"]:
            if row.get("status") == "ok" and isinstance(row.get("seconds"), (int, float)):
                found[same_command(str(row.get("command")))] = (row["seconds"], file)
    return found


def with_history(steps, results=HISTORY):
    """The steps with estimate_s replaced by the measured seconds of their command where a run has them,
    and each step's basis: "measured N s in FILE", or its stated model."""
    seconds = measured_seconds(results)
    out = []
    for step in steps:
        found = seconds.get(same_command(step.command()))
        if found:
            out.append(replace(step, estimate_s=max(1, math.ceil(found[0])),
                               basis=f"measured {found[0]} s in {found[1]}"))
        else:
            out.append(replace(step, basis=step.basis or "stated in bench/gpu/steps.py (no run measured it)"))
    return tuple(out)
