"""Each goal row of the static model (bench/static_report/goals.py) beside what a GPU run measured: the
predicted range against the measured figure, and whether the figure falls inside it.

The predictions are the newest goals-*.json of the folders given (a run's own folder first: a refit that
rewrote the goals wins over the committed bench/results). A row's range is its `ours_range` or `range`
([low, high]), or `low` and `high`, or, where the report has none yet, its point prediction `ours` (said so). The
measured figure is the newest row of the run's own results that the goal row names (MEASURED below):
e.g. "Table 1 10M cdrge96" is table1's row of size 10M, method cdrge96, in series, its s_per_step. The
kernel rows' figures are the benchmarks' (a call, launch included), the predictions the kernels' alone.
"""

import json
import re
from pathlib import Path

NAME = re.compile(r"-(\d{4}-\d{2}-\d{2})(?:-(\d+))?\.json$")

# goal row (a pattern) -> (benchmark, the row's columns, the measured column); the groups fill the columns
MEASURED = (
    (re.compile(r"^(fp32|TF32) matmul (\d+x\d+x\d+)$"), "matmul_throughput",
     lambda m: {"op": "forward" if m[1] == "fp32" else "forward_tf32", "shape": m[2]}, "ours_ms"),
    (re.compile(r"^scan (\d+x\d+x\d+) (forward|backward), kernel$"), "scan_throughput",
     lambda m: {"op": m[2], "shape": m[1]}, "GB_per_s"),
    (re.compile(r"^MinGRU BPTT 105M, (\d+)x(\d+), fp32$"), "mingru_side_by_side",
     lambda m: {"model": "1024x8", "batch": int(m[1]), "seq": int(m[2])}, "eggnog_s_per_step"),
    (re.compile(r"^Table 1 (\S+) (\S+)$"), "table1",
     lambda m: {"size": m[1], "method": m[2], "mode": "series"}, "s_per_step"),
)


def _dated(path):
    name = NAME.search(path.name)
    return (name.group(1), int(name.group(2) or 1), path.name) if name else None


def _records(folder, prefix):
    """(date key, record, file name) of every JSON result in `folder` whose name starts with `prefix`."""
    out = []
    for path in Path(folder).glob(f"{prefix}*.json"):
        key = _dated(path)
        if key is None:
            continue
        try:
            record = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(record, dict) and isinstance(record.get("rows"), list):
            out.append((key, record, path.name))
    return out


def newest_goals(folders):
    """(record, file name) of the newest goals-*.json in the first of `folders` holding one, or None."""
    for folder in folders:
        found = [(key, record, name) for key, record, name in _records(folder, "goals-")
                 if record.get("benchmark") == "goals"]
        if found:
            _, record, name = max(found, key=lambda f: f[0])
            return record, name
    return None


def predicted_range(row):
    """(low, high, whether it is a range) of a goal row's prediction; None where it has none."""
    for key in ("ours_range", "range"):
        given = row.get(key)
        if isinstance(given, (list, tuple)) and len(given) == 2 and None not in given:
            return float(min(given)), float(max(given)), True
    if row.get("low") is not None and row.get("high") is not None:
        return float(row["low"]), float(row["high"]), True
    if isinstance(row.get("ours"), (int, float)):
        return float(row["ours"]), float(row["ours"]), False
    return None


def measured(goal_row, folder):
    """(figure, file name) the run in `folder` measured for the goal row named `goal_row`, or None."""
    for pattern, benchmark, columns_of, column in MEASURED:
        match = pattern.match(goal_row)
        if match is None:
            continue
        columns = columns_of(match)
        found = [(key, row[column], name) for key, record, name in _records(folder, benchmark + "-")
                 if record.get("benchmark") == benchmark
                 for row in record["rows"] if all(row.get(k) == v for k, v in columns.items())
                 and isinstance(row.get(column), (int, float))]
        if found:
            _, value, name = max(found, key=lambda f: f[0])
            return float(value), name
    return None


def compare(goals, folder):
    """One row per goal row of the `goals` record: its predicted range, the figure measured in `folder`
    and where that figure falls ("inside", "below", "above" the range, or "not measured")."""
    out = []
    for row in goals["rows"]:
        predicted, got = predicted_range(row), measured(row["row"], folder)
        low, high, is_range = predicted or (None, None, False)
        if got is None or predicted is None:
            where = "not measured" if got is None else "no prediction"
        else:
            where = "below" if got[0] < low else "above" if got[0] > high else "inside"
        out.append({"row": row["row"], "unit": row.get("unit"), "low": low, "high": high, "range": is_range,
                    "measured": got[0] if got else None, "source": got[1] if got else None, "where": where})
    return out


def _figure(x):
    return "-" if x is None else f"{x:.3g}"


def line(row):
    """`row: predicted LOW-HIGH UNIT, measured X (FILE): inside`, one line per goal row."""
    if row["low"] is None:
        predicted = "no prediction"
    elif row["range"]:
        predicted = f"predicted {_figure(row['low'])}-{_figure(row['high'])} {row['unit']}"
    else:
        predicted = f"predicted {_figure(row['low'])} {row['unit']} (a point: the report gives no range)"
    got = (f"measured {_figure(row['measured'])} {row['unit']} ({row['source']})" if row["source"]
           else "not measured in this run")
    return f"{row['row']}: {predicted}, {got}" + (f": {row['where']}" if row["source"] and row["low"] is not None
                                                   else "")


def report(folder, predictions):
    """(rows, lines, source) for the run whose results are in `folder`, the predictions taken from the
    newest goals file of `predictions` (a list of folders, the first that has one); rows empty and one
    line saying so where no folder has a goals file."""
    found = newest_goals(predictions)
    if found is None:
        return [], ["no goals-*.json (python -m bench.static_report.goals) to compare this run with"], None
    goals, source = found
    rows = compare(goals, folder)
    head = f"goal rows, predicted for {goals.get('device', 'its target')} ({source}) against measured in this run:"
    return rows, [head] + [line(r) for r in rows], source
