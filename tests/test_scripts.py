"""The bin/ scripts as a user runs them: real output on success; one sentence and exit status 2,
with nothing written, on bad input."""

import os

import h5py
import numpy as np
import pytest

from tests.corpus_helpers import make_docs
from tests.helpers import assert_user_error, run_script


def test_prepare_data_writes_and_reports(tmp_path):
    make_docs(tmp_path / "src", count=5, binary=False)
    result = run_script("prepare_data.py", tmp_path / "src", "--out", tmp_path / "c.h5", "--val-fraction", "0.2")
    assert result.returncode == 0, result.stderr
    assert "wrote" in result.stdout and "unigram bpb" in result.stdout
    assert {"train", "val"} <= set(h5py.File(tmp_path / "c.h5", "r").keys())


def bad_cases(tmp):
    make_docs(tmp / "src", count=2)
    (tmp / "empty_dir").mkdir()
    (tmp / "empty_file").write_bytes(b"")
    (tmp / "exists.bin").write_bytes(b"old")
    return {
        "missing source": ([tmp / "missing", "--out", tmp / "o.bin"], "does not exist"),
        "empty input": ([tmp / "empty_file", "--out", tmp / "o.bin"], "contain no bytes"),
        "directory with no files": ([tmp / "empty_dir", "--out", tmp / "o.bin"], "contains no files"),
        "glob without match": ([str(tmp / "*.none"), "--out", tmp / "o.bin"], "no file matches"),
        "unknown suffix": ([tmp / "src", "--out", tmp / "o.parquet"], "unknown corpus suffix '.parquet'"),
        "existing output": ([tmp / "src", "--out", tmp / "exists.bin"], "already exists; pass --force"),
        "bad fraction": ([tmp / "src", "--out", tmp / "o.bin", "--val-fraction", "1.5"], "--val-fraction"),
        "missing out dir": ([tmp / "src", "--out", tmp / "no" / "o.zarr"], "does not exist"),
    }


@pytest.mark.parametrize("case", ["missing source", "empty input", "directory with no files", "glob without match",
                                  "unknown suffix", "existing output", "bad fraction", "missing out dir"])
def test_prepare_data_bad_input(tmp_path, case):
    args, message = bad_cases(tmp_path)[case]
    before = sorted(os.listdir(tmp_path))
    assert_user_error(run_script("prepare_data.py", *args), message)
    assert sorted(os.listdir(tmp_path)) == before
    assert (tmp_path / "exists.bin").read_bytes() == b"old"


def test_selfcheck_runs_everything_on_the_simulator(tmp_path):
    with h5py.File(tmp_path / "c.h5", "w") as f:
        f.create_dataset("train", data=np.frombuffer(b"hello eggnog " * 100, dtype=np.uint8))
    result = run_script("selfcheck.py", "--data", tmp_path / "c.h5", "--elements", "2000", "--backend", "cuda",
                        env={"NUMBA_ENABLE_CUDASIM": "1"})
    assert result.returncode == 0, result.stderr
    assert "backend: cuda (CUDA simulator)" in result.stdout
    assert result.stdout.count(" ok ") == 4
    assert "sample:" in result.stdout and "eggnog" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "all OK"


@pytest.mark.parametrize("script", ["train_es.py", "train_bptt.py", "train_rge.py", "train_gossip.py", "generate.py",
                                    "evaluate.py", "plot.py", "prepare_data.py", "print_arch.py", "selfcheck.py"])
def test_help_at_80_columns_keeps_every_flag_name_and_default(script):
    result = run_script(script, "--help", env={"COLUMNS": "80", "TERM": "dumb"})
    assert result.returncode == 0, result.stderr
    assert "…" not in result.stdout and "Usage:" in result.stdout
    lines = result.stdout.splitlines()
    assert len(lines[2].strip()) > 20  # the script's description comes first
    assert not [line for line in lines if line.rstrip().endswith(" .")]  # a default that vanished


def test_selfcheck_bad_backend_and_data(tmp_path):
    assert_user_error(run_script("selfcheck.py", "--backend", "tpu", "--data", tmp_path / "x.bin"),
                      "unknown backend 'tpu'")
    assert_user_error(run_script("selfcheck.py", "--backend", "cpu", "--data", tmp_path / "x.bin"),
                      "does not exist")
