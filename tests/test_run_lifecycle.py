"""A run's life as a user meets it, through the scripts: a finished run asks for more steps, a resume
logs each step once and its clock goes on, Ctrl-C and SIGTERM stop after the step with a checkpoint,
a run killed before its first checkpoint resumes from step 0, a second process is refused by the
lock (a dead owner's lock is taken over), another script's run is refused, stale temporary files go."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from eggnog.runtime.checkpoint import checkpoint_step, load_checkpoint
from eggnog.runtime.rundir import read_jsonl
from tests.es_helpers import tiny_corpus
from tests.helpers import ROOT, assert_user_error, run_script

ES = ["--dim", "8", "--depth", "1", "--population", "8", "--group-size", "2", "--tokens-per-update", "8",
      "--val-rows", "4", "--val-tokens", "8", "--backend", "cpu"]
BPTT = ["--dim", "16", "--depth", "1", "--chunk-size", "8", "--context-chunks", "2", "--batch-size", "2",
        "--val-rows", "4", "--val-tokens", "16", "--backend", "cpu"]
RGE = ["--hidden-size", "8", "--num-heads", "2", "--input-size", "4", "--batch-size", "4", "--probes", "4",
       "--backend", "cpu"]
SCRIPTS = {"train_es.py": ES, "train_bptt.py": BPTT, "train_rge.py": RGE}


def steps_logged(run_dir):
    return [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl")]


@pytest.fixture
def corpus(tmp_path):
    return tiny_corpus(tmp_path)


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_finished_run_asks_for_more_steps_then_continues(tmp_path, corpus, script):
    data = [] if script == "train_rge.py" else ["--data", corpus]
    run = tmp_path / "r"
    first = run_script(script, "--run-dir", run, "--steps", "2", *data, *SCRIPTS[script])
    assert first.returncode == 0, first.stderr
    assert f"latest: {(run / 'checkpoints' / 'step-00000002.npz').resolve()}" in first.stdout
    scripts = Path(ROOT) / "bin"  # the printed commands follow how the run was started: by its path here
    assert f"continue: python {scripts / script} --resume {run} --steps N" in first.stdout
    assert (f"generate: python {scripts / 'generate.py'}" in first.stdout) == (script != "train_rge.py")
    assert ("the validation split's baselines: unigram" in first.stdout) == (script != "train_rge.py")
    assert_user_error(run_script(script, "--resume", run), "already finished at step 2", "--steps N with N > 2")
    more = run_script(script, "--resume", run, "--steps", "3")
    assert more.returncode == 0, more.stderr
    assert "resumed from step 2" in more.stdout and checkpoint_step(run) == 3
    assert len(steps_logged(run)) == 3


def test_a_resume_logs_each_step_once_and_its_clock_goes_on(tmp_path, corpus):
    run = tmp_path / "r"
    first = run_script("train_es.py", "--run-dir", run, "--steps", "4", "--checkpoint-every", "2",
                       "--validate-every", "4", "--data", corpus, *ES)
    assert first.returncode == 0, first.stderr
    before = read_jsonl(run / "metrics.jsonl")
    # as a kill after step 3 leaves it: latest at step 2, steps 2 and 3 logged, a torn last line
    os.replace(run / "checkpoints" / "step-00000002.npz", run / "checkpoints" / "keep.npz")
    for name in ("step-00000004.npz", "latest", "best"):
        (run / "checkpoints" / name).unlink()
    os.replace(run / "checkpoints" / "keep.npz", run / "checkpoints" / "step-00000002.npz")
    os.symlink("step-00000002.npz", run / "checkpoints" / "latest")
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 5, "train_')
    again = run_script("train_es.py", "--resume", run)
    assert again.returncode == 0, again.stderr
    after = read_jsonl(run / "metrics.jsonl")
    assert [r["step"] for r in after] == [1, 2, 3, 4]
    assert after[:2] == before[:2] and after[2]["elapsed_s"] > before[1]["elapsed_s"]


@pytest.mark.parametrize("signum,status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_after_the_step_with_a_checkpoint(tmp_path, corpus, signum, status):
    run = tmp_path / "r"
    env = dict(os.environ, PYTHONPATH=ROOT, NUMBA_ENABLE_CUDASIM="0", EGGNOG_PROGRESS="0")
    child = subprocess.Popen([sys.executable, os.path.join(ROOT, "bin", "train_es.py"), "--run-dir", str(run),
                              "--steps", "100000", "--checkpoint-every", "100000", "--validate-every", "100000",
                              "--data", str(corpus), *ES], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    deadline = time.monotonic() + 240
    while not (run / "metrics.jsonl").is_file() or not (run / "metrics.jsonl").read_text().strip():
        assert child.poll() is None and time.monotonic() < deadline, "the run did not start stepping"
        time.sleep(0.2)
    child.send_signal(signum)
    out, err = child.communicate(timeout=120)
    assert child.returncode == status, err
    step = checkpoint_step(run)
    assert f"stopped by {signal.Signals(signum).name} after step {step}" in out and "--resume" in out
    assert steps_logged(run) == list(range(1, step + 1))
    assert not (run / "lock").exists()
    more = run_script("train_es.py", "--resume", run, "--steps", str(step + 2))
    assert more.returncode == 0, more.stderr
    assert steps_logged(run) == list(range(1, step + 3))
    straight = tmp_path / "straight"  # the same run without the interruption: the same weights
    assert run_script("train_es.py", "--run-dir", straight, "--steps", str(step + 2), "--checkpoint-every", "100000",
                      "--validate-every", "100000", "--data", corpus, *ES).returncode == 0
    interrupted, uninterrupted = load_checkpoint(run)[0], load_checkpoint(straight)[0]
    assert all(np.array_equal(interrupted[k], uninterrupted[k]) for k in uninterrupted)


def test_a_run_killed_before_its_first_checkpoint_starts_again_from_step_zero(tmp_path, corpus):
    run = tmp_path / "r"
    assert run_script("train_es.py", "--run-dir", run, "--steps", "2", "--data", corpus, *ES).returncode == 0
    for path in (run / "checkpoints").iterdir():
        path.unlink()
    again = run_script("train_es.py", "--resume", run, "--steps", "3")
    assert again.returncode == 0, again.stderr
    assert "no checkpoint yet: starting it from step 0 with its stored configuration" in again.stdout
    assert steps_logged(run) == [1, 2, 3] and checkpoint_step(run) == 3


def test_the_lock_refuses_a_second_process_and_a_dead_owners_lock_is_taken_over(tmp_path, corpus):
    import socket

    run = tmp_path / "r"
    assert run_script("train_es.py", "--run-dir", run, "--steps", "1", "--data", corpus, *ES).returncode == 0
    assert not (run / "lock").exists()
    (run / "lock").write_text(f'{{"host": "{socket.gethostname()}", "pid": {os.getpid()}}}')
    assert_user_error(run_script("train_es.py", "--resume", run, "--steps", "2"),
                      f"is in use by process {os.getpid()} on this host")
    (run / "lock").write_text('{"host": "elsewhere", "pid": 1}')
    assert_user_error(run_script("train_es.py", "--resume", run, "--steps", "2"), "in use by process 1 on elsewhere")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (run / "lock").write_text(f'{{"host": "{socket.gethostname()}", "pid": {int(gone.stdout)}}}')
    taken = run_script("train_es.py", "--resume", run, "--steps", "2")
    assert taken.returncode == 0, taken.stderr
    assert f"taking over the lock of {str(run)!r} from process {int(gone.stdout)}" in taken.stdout
    assert not (run / "lock").exists() and checkpoint_step(run) == 2


def test_another_scripts_run_is_refused_and_stale_temporary_files_go(tmp_path, corpus):
    bptt = tmp_path / "b"
    assert run_script("train_bptt.py", "--run-dir", bptt, "--steps", "1", "--data", corpus, *BPTT).returncode == 0
    for script in ("train_es.py", "train_rge.py"):
        assert_user_error(run_script(script, "--resume", bptt), f"{str(bptt)!r} is a train_bptt run",
                          "resume it with bin/train_bptt.py")
    stale = bptt / "checkpoints" / ".step-00000002.npz.tmp-99999-0badc0de"
    stale.write_bytes(b"half a checkpoint")
    assert run_script("train_bptt.py", "--resume", bptt, "--steps", "2").returncode == 0
    assert not stale.exists() and checkpoint_step(bptt) == 2


def test_only_the_newest_checkpoints_are_kept_with_latest_and_best(tmp_path, corpus):
    run = tmp_path / "r"
    result = run_script("train_es.py", "--run-dir", run, "--steps", "8", "--checkpoint-every", "1",
                        "--validate-every", "1", "--keep-checkpoints", "2", "--data", corpus, *ES)
    assert result.returncode == 0, result.stderr
    steps = sorted(int(p.stem.split("-")[1]) for p in (run / "checkpoints").glob("step-*.npz"))
    best = int((run / "checkpoints" / "best").resolve().stem.split("-")[1])
    assert steps == sorted({7, 8, best}) and checkpoint_step(run) == 8


def test_threads_default_to_the_ranks_share_of_the_cores_and_the_flag_sets_them(tmp_path, corpus):
    from eggnog.runtime.errors import BadInput
    from eggnog.runtime.threads import thread_count, usable_cores

    assert thread_count(None, 1, 64) == min(64, usable_cores())
    assert thread_count(None, 4 * usable_cores(), 64) == 1 and thread_count(3, 4, 8) == 3
    with pytest.raises(BadInput, match=r"--threads must lie in \[1, 8\]"):
        thread_count(9, 1, 8)
    result = run_script("train_es.py", "--run-dir", tmp_path / "r", "--steps", "1", "--threads", "1", "--data",
                        corpus, *ES)
    assert result.returncode == 0, result.stderr
    assert "threads: 1" in result.stdout
    assert_user_error(run_script("train_es.py", "--run-dir", tmp_path / "s", "--threads", "0"), "--threads must lie in")
