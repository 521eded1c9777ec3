"""The side-by-side bench against nano-egg (bench/throughput/nano_egg_side_by_side.py) where nano-egg is absent or
does not run: it gives eggnog's figures and its perturbed/plain ratio with the reason, and writes a
well-formed result; it refuses bad options in one sentence."""

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT, assert_user_error


def side_by_side(tmp_path, *args):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", EGGNOG_BENCH_RESULTS=str(tmp_path / "results"))
    return subprocess.run([sys.executable, "-m", "bench.throughput.nano_egg_side_by_side", *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)


@pytest.mark.parametrize("nano", ["absent", "broken"])
def test_without_nano_egg_it_reports_eggnog_alone(tmp_path, nano):
    args = ["--configs", "1x8:4,1x16:8", "--tokens", "3", "--repeat", "1"]
    if nano == "broken":  # a run.py that cannot import, as where JAX is missing
        (tmp_path / "nano").mkdir()
        (tmp_path / "nano" / "run.py").write_text("raise ImportError('no module named jax here')\n")
        args += ["--nano-python", sys.executable, "--nano-egg", str(tmp_path / "nano")]
    result = side_by_side(tmp_path, *args)
    assert result.returncode == 0, result.stderr
    expected = "nano-egg is not installed" if nano == "absent" else "no module named jax here"
    assert expected in result.stdout and "speedup" not in result.stdout
    [path] = (tmp_path / "results").glob("nano_egg_side_by_side-cpu-*.json")
    record = json.loads(path.read_text())
    assert record["nano_egg"] is None and len(record["loadavg_start"]) == 3 and set(record["timed"]) == {
        "eggnog", "nano_egg"}
    assert [(r["model"], r["population"], r["tokens"]) for r in record["rows"]] == [("egg 1x8", 4, 3),
                                                                                  ("egg 1x16", 8, 3)]
    for row in record["rows"]:
        assert row["eggnog_perturbed_tokens_per_s"] > 0 and row["eggnog_plain_tokens_per_s"] > 0
        plain, perturbed = row["eggnog_seconds"]["plain"][0], row["eggnog_seconds"]["perturbed"][0]
        half = 5e-7  # the seconds are kept to 6 decimals: the ratio lies within their rounding (and its own)
        assert (plain - half) / (perturbed + half) - 5e-4 <= row["eggnog_ratio"] <= (plain + half) / (
            perturbed - half) + 5e-4
        assert row["nano_perturbed_tokens_per_s"] is None and row["speedup"] is None
        assert expected in row["nano_note"]


def test_bad_options(tmp_path):
    assert_user_error(side_by_side(tmp_path, "--configs", "1x64"), "--configs '1x64'")
    assert_user_error(side_by_side(tmp_path, "--nano-egg", str(tmp_path)), "go together")
    assert_user_error(side_by_side(tmp_path, "--nano-egg", str(tmp_path), "--nano-python", sys.executable),
                      "holds no run.py")
    assert_user_error(side_by_side(tmp_path, "--repeat", "0"), "--repeat")
    assert not (tmp_path / "results").exists()
