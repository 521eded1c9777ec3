"""bin/evaluate.py: a checkpoint's bits/byte on a corpus split equals what its run's validation logged
for the same rows, for the EGG and the MinGRU; the baselines come with it; bad input is refused."""

import json

import pytest

from eggnog.runtime.rundir import read_jsonl
from tests.es_helpers import tiny_corpus
from tests.helpers import assert_user_error, run_script

VAL = ["--val-rows", "4", "--val-tokens", "16"]


@pytest.mark.parametrize("script,args", [
    ("train_es.py", ["--dim", "8", "--population", "8", "--group-size", "2", "--tokens-per-update", "8"]),
    ("train_bptt.py", ["--dim", "16", "--depth", "1", "--chunk-size", "8", "--context-chunks", "2",
                       "--batch-size", "2"]),
])
def test_evaluate_matches_the_runs_validation_and_names_the_baselines(tmp_path, script, args):
    corpus, run = tiny_corpus(tmp_path), tmp_path / "r"
    trained = run_script(script, "--run-dir", run, "--steps", "2", "--data", corpus, *VAL, *args, "--backend", "cpu")
    assert trained.returncode == 0, trained.stderr
    logged = read_jsonl(run / "metrics.jsonl")[-1]["val_bpb"]
    result = run_script("evaluate.py", run, "--data", corpus, "--rows", "4", "--tokens", "16", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["loss"] == pytest.approx(logged, abs=1e-4) and report["step"] == 2
    assert set(report["baselines"]) == {"unigram", "bigram", "gzip", "xz"}
    text = run_script("evaluate.py", run, "--data", corpus, "--split", "train", "--rows", "2")
    assert text.returncode == 0 and "on the train split (2 rows of 256)" in text.stdout and "xz baseline" in text.stdout


def test_evaluate_refuses_what_it_cannot_read(tmp_path):
    run = tmp_path / "r"
    trained = run_script("train_rge.py", "--run-dir", run, "--steps", "1", "--hidden-size", "8", "--num-heads", "2",
                         "--input-size", "4", "--batch-size", "2", "--probes", "2")
    assert trained.returncode == 0, trained.stderr
    assert_user_error(run_script("evaluate.py", run), "holds a 'lstm' model", "egg, transformer, mingru")
    assert_user_error(run_script("evaluate.py", run, "--split", "test"), "--split must be val or train")
    assert_user_error(run_script("evaluate.py", tmp_path / "none"), "no checkpoint at")
