"""The MinGRU scripts as a user runs them: train_bptt.py and train_es.py --model mingru write a run
directory that generate.py samples from; print_arch.py solves gruboros sizes; bad input gets one
sentence and exit status 2 with nothing written."""

import json

import numpy as np
import pytest

from eggnog.runtime.checkpoint import save_checkpoint
from eggnog.runtime.rundir import read_jsonl
from tests.es_helpers import tiny_corpus
from tests.helpers import assert_user_error, run_script

TINY_MODEL = ["--dim", "16", "--depth", "1", "--val-rows", "4", "--val-tokens", "32", "--validate-every", "3"]


def test_train_bptt_then_generate(tmp_path):
    data = tiny_corpus(tmp_path)
    result = run_script("train_bptt.py", "--data", data, "--run-dir", tmp_path / "run", "--steps", "6",
                        "--chunk-size", "8", "--context-chunks", "2", "--batch-size", "2", *TINY_MODEL)
    assert result.returncode == 0, result.stderr
    assert "11,520 float32 parameters" in result.stdout and "done: 6 steps" in result.stdout
    records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == list(range(1, 7)) and "val_bpb" in records[-1]
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["dim"] == 16 and config["optimizer"] == "sf-adamw"
    sample = run_script("generate.py", tmp_path / "run", "--prompt", "def ", "--length", "20", "--seed", "1")
    assert sample.returncode == 0, sample.stderr
    assert sample.stdout.startswith("def ") and len(sample.stdout.strip()) >= 20


def test_train_es_mingru_runs(tmp_path):
    result = run_script("train_es.py", "--model", "mingru", "--data", tiny_corpus(tmp_path), "--run-dir",
                        tmp_path / "run", "--steps", "3", "--population", "8", "--group-size", "4",
                        "--tokens-per-update", "8", *TINY_MODEL)
    assert result.returncode == 0, result.stderr
    assert "float EGGROLL: population 8" in result.stdout and "done: 3 steps" in result.stdout
    assert (tmp_path / "run" / "checkpoints" / "latest").is_file()


def test_print_arch_solves_the_gruboros_configuration():
    result = run_script("print_arch.py", "mingru", "--params", "1g", "--dim", "1024", "--expansion-factor", "3",
                        "--ff-mult", "1.5", "--json")
    arch = json.loads(result.stdout)
    assert arch["config"]["depth"] == 85 and arch["total_params"] == 1_070_464_512


@pytest.mark.parametrize("args,message", [
    (["--dim", "0", "--depth", "2"], "--dim must be positive, got 0"),
    (["--params", "1k"], "cannot be met"),
    (["--params", "lots"], "is not a size"),
    (["--dim", "64", "--depth", "2", "--expansion-factor", "0.001"], "zero-width layer"),
    (["--chunk-size", "1"], "--chunk-size must be at least 2"),
    (["--optimizer", "lion"], "unknown optimizer 'lion'"),
    (["--lr", "-1"], "--lr must be a positive number"),
])
def test_train_bptt_bad_input(tmp_path, args, message):
    assert_user_error(run_script("train_bptt.py", "--run-dir", tmp_path / "run", *args), message)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("args,message", [
    (["--model", "mingru", "--sigma-shift", "3"], "--sigma-shift does not apply to --model mingru"),
    (["--sigma", "0.1"], "--sigma does not apply to --model egg"),
    (["--model", "mingru", "--sigma", "0"], "sigma must be a positive number"),
    (["--model", "mingru", "--population", "12", "--group-size", "8"], "multiple of the group size"),
    (["--model", "gpt"], "unknown model 'gpt'"),
])
def test_train_es_mingru_bad_input(tmp_path, args, message):
    assert_user_error(run_script("train_es.py", "--run-dir", tmp_path / "run", *args), message)
    assert not (tmp_path / "run").exists()


def test_resuming_another_model_type_is_refused(tmp_path):
    run_dir = tmp_path / "egg-run"
    save_checkpoint(run_dir / "checkpoints", 3, {"params": np.zeros(4, np.int8)}, {"model": "egg", "config": {}})
    (run_dir / "config.json").write_text(json.dumps({"n_layer": 1, "n_embd": 8}))
    result = run_script("train_bptt.py", "--resume", run_dir, "--data", tiny_corpus(tmp_path), *TINY_MODEL)
    assert_user_error(result, "holds a 'egg' model, not a 'mingru' one")
    assert sorted(p.name for p in run_dir.iterdir()) == ["checkpoints", "config.json"]
