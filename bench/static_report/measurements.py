"""The GPU measurements in bench/results the static model is checked and fitted on: the newest row of a
benchmark, a workload's newest measurement, whether its kernels changed since, and the newest probes."""

import importlib.util
import json
import re
import subprocess
from pathlib import Path

MEASURED = Path(__file__).resolve().parent.parent / "results"  # the committed results, whatever the output
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


def newest_probes(results=MEASURED):
    """({constant: value}, file) of the newest GPU probes file (bench.probes; not the simulator's): the
    rows that name a constant; ({}, None) when there is none."""
    found = []
    for path in results.glob("probes-*.json"):
        name = NAME.search(path.name)
        record = json.loads(path.read_text()) if name else {}
        device = str(record.get("device", "")).lower()
        simulated = any(r.get("simulated") for r in record.get("rows", []))  # timings that mean nothing
        if (record.get("benchmark") == "probes" and device and not simulated
                and not any(w in device for w in ("cpu", "sim"))):
            found.append(((name.group(1), int(name.group(2) or 1)), record, path.name))
    if not found:
        return {}, None
    _, record, file = max(found, key=lambda f: f[0])
    return {r["constant"]: float(r["value"]) for r in record.get("rows", []) if r.get("constant")}, file
