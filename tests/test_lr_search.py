"""--lr-search: bisection in log space that converges on a unimodal optimum, chooses inside its bracket,
is deterministic for a seed, logs its trials, trains on with the chosen rate and is not redone on
resume; bad brackets are one sentence and exit 2."""

import math

import pytest

from eggnog.kernels.core.backend import Backend
from eggnog.runtime.checkpoint import load_checkpoint
from eggnog.runtime.errors import BadInput
from eggnog.runtime.rundir import read_jsonl
from eggnog.runtime.world import init_world
from eggnog.zorn.lr_search import parse_bracket, search_lr
from eggnog.zorn.rge.run import RgeRun, RgeRunConfig
from tests.helpers import assert_user_error, run_script

CPU = Backend("cpu")
TINY = dict(hidden_size=8, num_heads=2, input_size=4, batch_size=4, probes=4, steps=4, checkpoint_every=2,
            validate_every=0, lr_search="0.001,1", lr_search_steps=3, lr_search_rounds=3)


def test_bisection_closes_in_on_a_unimodal_optimum():
    calls = []

    def trial(lr):
        calls.append(lr)
        return (math.log10(lr) + 2.3) ** 2  # best at 10^-2.3

    chosen, trials = search_lr(1e-4, 1.0, 6, trial)
    assert abs(math.log10(chosen) + 2.3) < 0.1
    assert len(calls) == len(set(calls)) == len(trials) <= 12  # a rate is tried once
    assert all(1e-4 < t["lr"] < 1.0 for t in trials)
    assert [t["round"] for t in trials][:2] == [0, 0]


def test_diverged_trials_lose_and_are_logged_as_such():
    chosen, trials = search_lr(1e-3, 10.0, 2, lambda lr: math.nan if lr > 0.1 else -lr)
    assert chosen < 0.1
    assert any(t["loss"] is None for t in trials)


@pytest.mark.parametrize("text", ["0.1,0.01", "0,1", "-1,1", "a,b", "0.1", "0.1,0.2,0.3", "nan,1", "1e-3,inf",
                                  "0.1,0.1"])
def test_bad_brackets(text):
    with pytest.raises(BadInput, match="--lr-search"):
        parse_bracket(text)


def search_run(tmp_path, name, **overrides):
    run_dir = tmp_path / name
    (run_dir / "checkpoints").mkdir(parents=True)
    run = RgeRun(RgeRunConfig(**{**TINY, **overrides}), init_world(), CPU)
    return run_dir, run.run(run_dir)


@pytest.mark.parametrize("solver", ["cdrge", "bptt"])
def test_the_run_searches_deterministically_then_trains_at_the_choice(tmp_path, solver):
    a, summary = search_run(tmp_path, "a", solver=solver)
    b, _ = search_run(tmp_path, "b", solver=solver)
    lines = read_jsonl(a / "lr_search.jsonl")
    assert lines == read_jsonl(b / "lr_search.jsonl")
    *trials, choice = lines
    assert len(trials) == 6 and choice == {"chosen_lr": choice["chosen_lr"], "trials": 6}
    chosen = next(t for t in trials if t["lr"] == choice["chosen_lr"])
    assert 0.001 < chosen["lr"] < 1 and chosen["loss"] == min(t["loss"] for t in trials if t["loss"] is not None)
    assert summary["lr"] == chosen["lr"] and {t["steps"] for t in trials} == {3}
    log = read_jsonl(a / "metrics.jsonl")
    assert [r["step"] for r in log] == [1, 2, 3, 4] and {r["lr"] for r in log} == {chosen["lr"]}
    if solver == "cdrge":
        assert {r["eps"] for r in log} == {chosen["lr"]}  # eps follows the chosen lr unless --sigma is given


def test_a_given_sigma_stays_through_the_search(tmp_path):
    run_dir, summary = search_run(tmp_path, "s", sigma=0.02)
    assert {t["eps"] for t in read_jsonl(run_dir / "lr_search.jsonl")[:-1]} == {0.02}
    assert {r["eps"] for r in read_jsonl(run_dir / "metrics.jsonl")} == {0.02}


def test_the_first_training_step_starts_from_the_initial_weights(tmp_path):
    """After the search the run is the plain run at the chosen rate, step for step."""
    searched, summary = search_run(tmp_path, "searched")
    plain, _ = search_run(tmp_path, "plain", lr_search=None, lr=summary["lr"])
    a, _ = load_checkpoint(searched)
    b, _ = load_checkpoint(plain)
    assert (a["params"] == b["params"]).all()


def test_resume_keeps_the_chosen_rate_without_searching_again(tmp_path):
    run_dir, summary = search_run(tmp_path, "r", steps=2)
    trials = (run_dir / "lr_search.jsonl").read_text()
    resumed = RgeRun(RgeRunConfig(**{**TINY, "steps": 4}), init_world(), CPU)
    resumed.restore(run_dir)
    assert resumed.lr == summary["lr"] and resumed.lr_settled
    resumed.run(run_dir)
    assert (run_dir / "lr_search.jsonl").read_text() == trials
    assert {r["lr"] for r in read_jsonl(run_dir / "metrics.jsonl")} == {summary["lr"]}


@pytest.mark.parametrize("args,message", [
    (["--lr-search", "0.1,0.01"], "0 < LO < HI"),
    (["--lr-search", "0,0.1"], "0 < LO < HI"),
    (["--lr-search", "-1,0.1"], "0 < LO < HI"),
    (["--lr-search", "fast"], "LO,HI"),
    (["--lr-search", "1e-3,1", "--lr-search-steps", "0"], "--lr-search-steps must be positive"),
    (["--lr-search", "1e-3,1", "--lr-search-rounds", "0"], "--lr-search-rounds must be positive"),
])
def test_bad_search_flags(tmp_path, args, message):
    assert_user_error(run_script("train_rge.py", "--run-dir", tmp_path / "r", *args), message)
    assert not (tmp_path / "r").exists()


def test_gossip_islands_refuse_the_search_and_the_curriculum(tmp_path):
    for args in (["--lr-search", "1e-3,1"], ["--curriculum-max", "9"]):
        assert_user_error(run_script("train_gossip.py", "--trainer", "rge", "--run-dir", tmp_path / "g", *args),
                          "belong to bin/train_rge.py")


def test_a_signal_during_the_search_exits_cleanly_and_a_resume_searches_again(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.helpers import ROOT

    run = tmp_path / "r"
    env = dict(os.environ, PYTHONPATH=ROOT, NUMBA_ENABLE_CUDASIM="0", EGGNOG_PROGRESS="0")
    child = subprocess.Popen([sys.executable, os.path.join(ROOT, "bin", "train_rge.py"), "--run-dir", str(run),
                              "--hidden-size", "8", "--num-heads", "2", "--input-size", "4", "--probes", "4",
                              "--lr-search", "0.01,1", "--lr-search-steps", "1000000", "--steps", "2"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not (run / "lr_search.jsonl").is_file():
        assert child.poll() is None and time.monotonic() < deadline, "the search did not start"
        time.sleep(0.2)
    time.sleep(0.5)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 130, err
    assert "stopped by SIGINT during the learning-rate search" in out and "Traceback" not in err
    assert not (run / "lock").exists() and not (run / "checkpoints" / "latest").exists()
    again = run_script("train_rge.py", "--resume", run, "--lr-search-steps", "2", "--lr-search-rounds", "1")
    assert again.returncode == 0, again.stderr
    assert "no checkpoint yet" in again.stdout and len(read_jsonl(run / "lr_search.jsonl")) == 3
