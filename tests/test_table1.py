"""The Table 1 suite runs its 100k BPTT cell on this machine (a timed run and a memory run) and writes
a well-formed result (JSON rows beside the authors' A40 numbers, and a PNG chart); it refuses bad
selections."""

import json
import os
import subprocess
import sys

from tests.helpers import ROOT, assert_user_error


def table1(tmp_path, *args):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", EGGNOG_BENCH_RESULTS=str(tmp_path), EGGNOG_PROGRESS="0")
    return subprocess.run([sys.executable, "-m", "bench.zorn_paper.table1", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=900)


def test_the_100k_cell_gives_a_well_formed_result(tmp_path):
    result = table1(tmp_path, "--sizes", "100k", "--methods", "bptt", "--modes", "series,seeds", "--backend", "cpu",
                    "--task", "copy")
    assert result.returncode == 0, result.stderr
    [path] = tmp_path.glob("table1-*.json")
    record = json.loads(path.read_text())
    assert {"device", "commit", "date", "rows", "a40_source"} <= set(record)
    series, seeds = record["rows"]
    assert series["size"] == "100k" and series["a40_s_per_step"] == 0.10 and series["params"] == 150_740
    assert series["s_per_step"] > 0 and series["steps_timed"] == 5 and series["eval_s"] > 0
    assert series["steps_measured"] == 1 and series["memory_own"].startswith("tracemalloc")
    [process], [own] = series["peak_process_bytes"], series["peak_own_bytes"]  # one rank
    assert process > own > 4 * 150_740  # the process holds at least the parameters it allocated
    assert seeds["skipped"] == "BPTT has no distributed form here"
    assert path.with_suffix(".png").stat().st_size > 1000


def test_bad_selections(tmp_path):
    assert_user_error(table1(tmp_path, "--sizes", "3M"), "--sizes '3M'")
    assert_user_error(table1(tmp_path, "--methods", "adam"), "--methods 'adam'")
    assert_user_error(table1(tmp_path, "--steps", "2"), "--steps >= 5")
    assert not list(tmp_path.iterdir())
