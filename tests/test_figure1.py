"""bench/zorn_paper/figure1.py at a tiny size: every method runs from the same start, the JSON and the PNG are
written, bad settings are refused."""

import json
import os
import subprocess
import sys

from tests.helpers import ROOT, assert_user_error


def figure1(tmp_path, *args):
    env = dict(os.environ, PYTHONPATH=ROOT, EGGNOG_BENCH_RESULTS=str(tmp_path), NUMBA_ENABLE_CUDASIM="0")
    return subprocess.run([sys.executable, "-m", "bench.zorn_paper.figure1", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=600)


def test_figure1_writes_its_series_and_figure(tmp_path):
    result = figure1(tmp_path, "--steps", "3", "--probes", "2", "--seq-length", "3", "--batch-size", "2")
    assert result.returncode == 0, result.stderr
    record = json.loads(next(tmp_path.glob("figure1-*.json")).read_text())
    assert [r["method"] for r in record["rows"]] == ["bptt", "cdrge", "fdras"]
    series = record["series"]
    assert sorted(series) == ["bptt", "cdrge", "fdras"]
    assert all(len(series[m]["loss"]) == 3 and series[m]["peak_bytes"] > 0 for m in series)
    assert series["cdrge"]["seconds"] == sorted(series["cdrge"]["seconds"])
    assert record["settings"]["hidden"] == 16 and record["theirs"]["cdrge"]["loss"][0] == 5.299
    png = next(tmp_path.glob("figure1-*.png")).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_figure1_refuses_bad_settings(tmp_path):
    assert_user_error(figure1(tmp_path, "--methods", "adjoint"), "--methods must name some of bptt, cdrge, fdras")
    assert_user_error(figure1(tmp_path, "--preset", "huge"), "unknown --preset 'huge'")
    assert_user_error(figure1(tmp_path, "--probes", "0"), "must be positive")
