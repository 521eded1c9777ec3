"""bench/zorn_paper/table2.py at a tiny size: cells train and validate, a cell over the time budget is skipped with
its reason, the JSON and the PNG are written, bad settings are refused."""

import json
import os
import subprocess
import sys

from tests.helpers import ROOT, assert_user_error


def table2(tmp_path, *args):
    env = dict(os.environ, PYTHONPATH=ROOT, EGGNOG_BENCH_RESULTS=str(tmp_path), NUMBA_ENABLE_CUDASIM="0")
    return subprocess.run([sys.executable, "-m", "bench.zorn_paper.table2", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=600)


def test_table2_trains_validates_and_writes(tmp_path):
    result = table2(tmp_path, "--steps", "12", "--sizes", "h32", "--tasks", "copy,sort")
    assert result.returncode == 0, result.stderr
    record = json.loads(next(tmp_path.glob("table2-*.json")).read_text())
    assert [(r["task"], r["method"]) for r in record["rows"]] == [("copy", "cdrge"), ("copy", "bptt"),
                                                                  ("sort", "cdrge"), ("sort", "bptt")]
    assert record["settings"]["val_lengths"] == [5, 54] and record["settings"]["probes"] == 96
    for cell in record["cells"]:
        assert len(cell["loss"]) == 12 and cell["val_loss"] > 0 and 0 <= cell["val_accuracy"] <= 1
        assert cell["fit_loss"] > 0 and 0 <= cell["fit_accuracy"] <= 1
    bptt = record["cells"][1]["loss"]
    assert bptt[-1] < bptt[0]  # Adam at 0.01 learns something in 12 steps
    png = next(tmp_path.glob("table2-*.png")).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_a_cell_over_the_budget_is_skipped_and_says_why(tmp_path):
    result = table2(tmp_path, "--steps", "100000", "--sizes", "h32", "--tasks", "copy", "--methods", "cdrge",
                    "--budget", "5")
    assert result.returncode == 0, result.stderr
    row = json.loads(next(tmp_path.glob("table2-*.json")).read_text())["rows"][0]
    assert row["note"].startswith("estimated ") and "over the budget of 5 s" in row["note"]
    assert row["val loss"] == "-"


def test_table2_refuses_bad_settings(tmp_path):
    assert_user_error(table2(tmp_path, "--preset", "huge"), "unknown --preset 'huge'")
    assert_user_error(table2(tmp_path, "--tasks", "add"), "--tasks must name some of sort, copy, reverse")
    assert_user_error(table2(tmp_path, "--sizes", "tiny"), "--sizes must name some of h32, h64")
    assert_user_error(table2(tmp_path, "--steps", "0"), "must be positive")
