"""What a newcomer met on a first try, each refused in one sentence or made to work: --run-dir naming
a file, a damaged checkpoint and the earlier one to resume from, two names of one flag, --resume with
--run-dir, an unwritable checkpoint folder, corpus messages that name what is wrong, a split shorter
than one window, evaluate.py on a run of another corpus, degenerate samples, and printed commands in
the form the run was started with."""

import json
import os
from pathlib import Path

import pytest

from eggnog.models.sampling import degenerate
from eggnog.runtime.commands import command, this_program
from eggnog.runtime.rundir import read_jsonl
from tests.corpus_helpers import make_docs
from tests.es_helpers import tiny_corpus
from tests.helpers import ROOT, run_script

EGG = ["--depth", "1", "--dim", "8", "--population", "8", "--group-size", "2", "--tokens-per-update", "8",
       "--validate-every", "2", "--checkpoint-every", "2", "--val-rows", "4", "--val-tokens", "16", "--seed", "3",
       "--no-plots", "--backend", "cpu"]
UNWRITABLE = "/proc/1"  # no file can be made there, whoever runs the tests


def refused(result, fragment):
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert fragment in result.stderr and "Traceback" not in result.stderr, result.stderr


@pytest.mark.parametrize("script", ["train_es.py", "train_rge.py"])
def test_a_run_dir_that_is_a_file_is_refused(tmp_path, script):
    (tmp_path / "taken").write_text("mine")
    refused(run_script(script, "--run-dir", tmp_path / "taken", "--steps", "1", "--backend", "cpu"),
            "is a file, not a folder")
    assert (tmp_path / "taken").read_text() == "mine"


@pytest.fixture(scope="module")
def es_run(tmp_path_factory):
    """A tiny EGG run of 6 steps with checkpoints at 2, 4 and 6."""
    tmp = tmp_path_factory.mktemp("es")
    data = tiny_corpus(tmp)
    run = tmp / "run"
    done = run_script("train_es.py", *EGG, "--data", data, "--steps", "6", "--keep-checkpoints", "5", "--run-dir", run)
    assert done.returncode == 0, done.stderr
    return run, data


def copy_run(run, to):
    import shutil

    shutil.copytree(run, to, symlinks=True)
    (to / "lock").unlink(missing_ok=True)
    return to


def test_a_damaged_checkpoint_names_the_one_before_and_resume_takes_that_file(tmp_path, es_run):
    run = copy_run(es_run[0], tmp_path / "run")
    latest = run / "checkpoints" / "step-00000006.npz"
    raw = bytearray(latest.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # inside an array: the zip layer's CRC fails
    latest.write_bytes(bytes(raw))
    earlier = (run / "checkpoints" / "step-00000004.npz").resolve()
    result = run_script("train_es.py", "--resume", run, "--steps", "8")
    refused(result, f"use the one before it: --resume {earlier} continues the run from it")
    refused(run_script("generate.py", run), f"generate.py or evaluate.py take {earlier} in place of the run")
    again = run_script("train_es.py", "--resume", earlier, "--steps", "8")
    assert again.returncode == 0, again.stderr
    assert "resumed from step 4 (step-00000004.npz)" in again.stdout
    assert [r["step"] for r in read_jsonl(run / "metrics.jsonl")] == list(range(1, 9))  # each step logged once
    assert run_script("generate.py", earlier, "--length", "8").returncode == 0


@pytest.mark.parametrize("args,message", [
    (["--steps", "10", "--epochs", "20"], "--steps and --epochs set the same thing: give one of them"),
    (["--run-dir", "a", "--resume", "b"], "--resume continues a run in its own folder: --run-dir does not apply"),
])
def test_conflicting_flags_are_refused(tmp_path, args, message):
    refused(run_script("train_es.py", *args, cwd=tmp_path), message)
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_checkpoint_folder_is_refused_before_step_one(tmp_path, es_run):
    run = copy_run(es_run[0], tmp_path / "run")
    before = (run / "metrics.jsonl").read_text()
    folder = run / "checkpoints"
    os.rename(folder, tmp_path / "saved")
    os.symlink(UNWRITABLE, folder)
    refused(run_script("train_es.py", "--resume", run, "--steps", "8"), "where the run's checkpoints go")
    assert (run / "metrics.jsonl").read_text() == before


def test_corpus_messages_name_what_is_wrong(tmp_path):
    make_docs(tmp_path / "src", count=3, binary=False)
    refused(run_script("prepare_data.py", tmp_path / "src", "--out", "/proc/x.bin"),
            "cannot write the corpus in '/proc'")
    refused(run_script("train_es.py", "--data", tmp_path, "--steps", "1", "--run-dir", tmp_path / "r"),
            "is a folder without input.bin: give a corpus file (.bin, .h5 or .zarr, written by bin/prepare_data.py) "
            "or a d-eggs data folder")
    (tmp_path / "tiny.txt").write_bytes(b"x" * 25)
    refused(run_script("prepare_data.py", tmp_path / "tiny.txt", "--out", tmp_path / "t.bin"),
            "split would hold 24 bytes, shorter than one window (101 bytes)")
    assert not (tmp_path / "t.bin").exists()


def test_evaluate_scores_the_corpus_the_run_trained_on(tmp_path, es_run):
    run, data = es_run
    own = run_script("evaluate.py", run, "--json", "--rows", "4", "--tokens", "16")
    given = run_script("evaluate.py", run, "--json", "--rows", "4", "--tokens", "16", "--data", data)
    assert own.returncode == 0 and given.returncode == 0, own.stderr + given.stderr
    assert json.loads(own.stdout)["loss"] == json.loads(given.stdout)["loss"]
    moved = copy_run(run, tmp_path / "run")
    config = json.loads((moved / "config.json").read_text())
    ckpt = moved / "checkpoints" / "step-00000006.npz"
    assert config["data"] == str(data)
    os.rename(data, tmp_path / "elsewhere.bin")
    try:
        refused(run_script("evaluate.py", ckpt), f"the run trained on {str(data)!r}, which is not there from here")
    finally:
        os.rename(tmp_path / "elsewhere.bin", data)


def test_a_sample_that_ends_repeating_is_degenerate():
    assert bytes(degenerate(list(b"YT" + b" " * 290))) == b" "
    assert bytes(degenerate(list(b"def f():" + b"ab" * 40))) == b"ab"
    assert degenerate(list(b"def f(x):\n    return x + 1\n")) is None
    assert degenerate(list(b"aaaa")) is None  # too short to tell


def test_printed_commands_follow_how_the_run_was_started():
    assert command("generate.py", "/venv/bin/eggnog-train-es") == "eggnog-generate"
    script = Path(ROOT) / "bin" / "train_es.py"
    assert command("generate.py", str(script)) == f"python {script.parent / 'generate.py'}"
    assert command("evaluate.py", "/somewhere/else/tool.py") == "python bin/evaluate.py"
    assert this_program("/venv/bin/eggnog-gossip") == "eggnog-gossip"
    assert this_program("bin/train_gossip.py") == "python bin/train_gossip.py"


def test_the_console_names_are_pyprojects():
    tomllib = pytest.importorskip("tomllib")
    from eggnog.runtime.commands import CONSOLE

    scripts = tomllib.loads((Path(ROOT) / "pyproject.toml").read_text())["project"]["scripts"]
    assert {f"{target.split(':')[0].rsplit('.', 1)[1]}.py": name for name, target in scripts.items()} == CONSOLE
