"""The CPU side-by-side benches against PyTorch peers (bench/mingru_side_by_side.py against
minGRU-pytorch, bench/table1_side_by_side.py against a plain PyTorch CD-RGE loop) where the peer is
absent or broken, and their refusals of bad flags."""

import json

import pytest

from tests.helpers import assert_user_error, run_bench


def bench(module, tmp_path, *args):
    return run_bench(module, tmp_path, *args)


@pytest.mark.parametrize("peer", ["absent", "broken"])
def test_mingru_bench_reports_eggnog_alone_without_its_peer(tmp_path, peer):
    args = ["--configs", "16x1:2x8,8x2:1x4", "--steps", "1", "--warmup", "0"]
    if peer == "broken":  # a Python without minGRU-pytorch
        fake = tmp_path / "python"
        fake.write_text("#!/bin/sh\necho 'No module named minGRU_pytorch' >&2\nexit 1\n")
        fake.chmod(0o755)
        args += ["--torch-python", str(fake)]
    result = bench("mingru_side_by_side", tmp_path, *args)
    assert result.returncode == 0, result.stderr
    assert ("no --torch-python given" if peer == "absent" else "No module named minGRU_pytorch") in result.stdout
    [path] = (tmp_path / "results").glob("mingru_side_by_side-cpu-*.json")
    rows = json.loads(path.read_text())["rows"]
    assert [(r["model"], r["batch"], r["seq"]) for r in rows] == [("16x1", 2, 8), ("8x2", 1, 4)]
    assert all(r["eggnog_s_per_step"] > 0 and r["speedup"] is None for r in rows)


@pytest.mark.parametrize("script, args, message", [
    ("mingru_side_by_side", ["--configs", "64x2"], "dim x depth : batch x seq"),
    ("mingru_side_by_side", ["--configs", "64x0:8x8"], "dim x depth : batch x seq"),
    ("mingru_side_by_side", ["--steps", "0"], "--steps must be positive"),
    ("mingru_side_by_side", ["--torch-python", "/nonexistent/python"], "is not an executable Python"),
    ("table1_side_by_side", ["--sizes", "5M"], "choose from 100k"),
    ("table1_side_by_side", ["--probes", "7"], "96 or 512"),
    ("table1_side_by_side", ["--torch-python", "/nonexistent/python"], "is not an executable Python"),
    ("es_modes", ["--ranks", "1"], "--ranks must be at least 2"),
    ("es_modes", ["--steps", "3", "--warmup", "3"], "more than --warmup"),
])
def test_bad_flags_exit_2_with_one_sentence(tmp_path, script, args, message):
    result = bench(script, tmp_path, *args)
    assert_user_error(result, message)
    assert not (tmp_path / "results").exists()
