"""Reading a static report the report wrote (bench/results/sass_report-sm90-<date>.json), for the
benchmarks that take its rates as figures (bench/scale/coordinator.py)."""

import json
from pathlib import Path

from bench.static_report.calibration import MEASURED
from eggnog.runtime.errors import BadInput


def newest_report():
    found = sorted(MEASURED.glob("sass_report-sm90-*.json"))
    if not found:
        raise BadInput("no static report in bench/results: run python -m bench.static_report first")
    return found[-1]


def read_report(path):
    """(the report's commit, its roofline rows by name)."""
    try:
        report = json.loads(Path(path).read_text())
        return report.get("commit"), {r["name"]: r for r in report["roofline"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BadInput(f"{path} is not a static report written by bench.static_report ({e})") from None


def row_named(rows, prefix):
    found = [r for name, r in rows.items() if name.startswith(prefix)]
    if len(found) != 1:
        raise BadInput(f"the static report has no single roofline row for {prefix!r}: regenerate it")
    return found[0]
