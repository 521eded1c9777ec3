"""The sequence-length curriculum: raises exactly when the fast-EMA rule says, logs each raise with its
step, trains on the new bound from the next step, and a resumed run continues it exactly."""

import numpy as np
import pytest

from eggnog.kernels.core.backend import Backend
from eggnog.runtime.checkpoint import load_checkpoint
from eggnog.runtime.rundir import read_jsonl
from eggnog.runtime.world import init_world
from eggnog.zorn.curriculum import Curriculum
from eggnog.zorn.rge.run import RgeRun, RgeRunConfig
from tests.helpers import assert_user_error, run_script

CPU = Backend("cpu")
TINY = dict(hidden_size=8, num_heads=2, input_size=4, batch_size=4, probes=4, lr=0.05, sigma=0.01, steps=8,
            checkpoint_every=4, validate_every=0, max_seq_len=3, curriculum_max=8, curriculum_step=2,
            curriculum_patience=2, curriculum_threshold=1000.0)


def stable(log):
    """Metrics lines without their timings and memory peaks."""
    return [{k: v for k, v in r.items() if not (k.endswith("_s") or k.startswith(("peak", "s_per")))} for r in log]


def raises(curriculum, losses):
    """1-based observations at which the bound rose, with the bound."""
    return [(i, new) for i, loss in enumerate(losses, 1) if (new := curriculum.observe(loss)) is not None]


def test_the_rule_raises_after_patience_steps_below_the_threshold():
    c = Curriculum(max_seq_len=4, cap=100, step=3, threshold=1.0, patience=3)
    # EMA 0.5, 0.5, 0.5 -> raise at 3; a loss of 20 lifts the EMA to 2.45; zeros bring it down by 0.9 per
    # step: 2.45 * 0.9^k < 1 first at k = 9 (0.949), so the streak restarts at observation 13 and the
    # next raise comes at observation 15
    losses = [0.5] * 3 + [20.0] + [0.0] * 12
    assert raises(c, losses) == [(3, 7), (15, 10)]
    assert c.ema == pytest.approx(2.45 * 0.9 ** 12)


def test_a_loss_at_the_threshold_does_not_count_and_the_cap_holds():
    c = Curriculum(max_seq_len=4, cap=5, step=3, threshold=1.0, patience=1)
    assert raises(c, [1.0, 1.0]) == []  # "below" is strict
    assert raises(c, [0.0] * 40) == [(1, 5)]  # capped at 5, then no more raises
    assert c.max_seq_len == 5


def test_a_run_raises_on_schedule_and_trains_on_the_new_bound(tmp_path):
    run_dir = tmp_path / "c"
    (run_dir / "checkpoints").mkdir(parents=True)
    run = RgeRun(RgeRunConfig(**TINY), init_world(), CPU)
    run.run(run_dir)
    log = read_jsonl(run_dir / "metrics.jsonl")
    assert [(r["step"], r["curriculum_raised_to"]) for r in log if "curriculum_raised_to" in r] == \
        [(2, 5), (4, 7), (6, 8)]
    assert [r["max_seq_len"] for r in log] == [3, 3, 5, 5, 7, 7, 8, 8]
    assert run.task.max_seq_len == 8


def test_resume_restores_the_bounds_and_the_ema(tmp_path):
    straight = tmp_path / "straight"
    (straight / "checkpoints").mkdir(parents=True)
    RgeRun(RgeRunConfig(**TINY), init_world(), CPU).run(straight)
    split = tmp_path / "split"
    (split / "checkpoints").mkdir(parents=True)
    RgeRun(RgeRunConfig(**{**TINY, "steps": 3, "checkpoint_every": 3}), init_world(), CPU).run(split)
    resumed = RgeRun(RgeRunConfig(**TINY), init_world(), CPU)
    resumed.restore(split)
    assert resumed.curriculum.max_seq_len == 5 and resumed.task.max_seq_len == 5
    resumed.run(split)
    a, ra = load_checkpoint(straight)
    b, rb = load_checkpoint(split)
    assert ra["meta"]["curriculum"] == rb["meta"]["curriculum"]
    assert np.array_equal(a["params"], b["params"])
    assert stable(read_jsonl(straight / "metrics.jsonl")) == stable(read_jsonl(split / "metrics.jsonl"))

@pytest.mark.parametrize("args,message", [
    (["--curriculum-max", "5"], "--curriculum-max 5 must exceed --max-seq-len 5"),
    (["--curriculum-max", "9", "--overfit"], "--overfit trains on one fixed batch"),
    (["--curriculum-max", "9", "--curriculum-threshold", "nan"], "--curriculum-threshold must be a finite number"),
    (["--curriculum-max", "9", "--curriculum-patience", "0"], "--curriculum-patience must be positive"),
    (["--curriculum-max", "9", "--curriculum-step", "-1"], "--curriculum-step must be positive"),
    (["--val-min-len", "9", "--val-max-len", "4"], "1 <= --val-min-len <= --val-max-len"),
    (["--validate-every", "-1"], "--validate-every must be 0 (never) or positive"),
    (["--val-samples", "0"], "--val-samples must be positive"),
])
def test_bad_curriculum_and_validation_values(tmp_path, args, message):
    assert_user_error(run_script("train_rge.py", "--run-dir", tmp_path / "r", *args), message)
    assert not (tmp_path / "r").exists()


def test_the_rule_may_change_on_resume_and_applies_from_there(tmp_path):
    run_dir = tmp_path / "r"
    (run_dir / "checkpoints").mkdir(parents=True)
    RgeRun(RgeRunConfig(**{**TINY, "steps": 3, "checkpoint_every": 3}), init_world(), CPU).run(run_dir)
    resumed = RgeRun(RgeRunConfig(**{**TINY, "curriculum_patience": 1}), init_world(), CPU)
    resumed.restore(run_dir)  # the streak (1 after step 3) meets the new patience at step 4
    resumed.run(run_dir)
    raised = [(r["step"], r["curriculum_raised_to"]) for r in read_jsonl(run_dir / "metrics.jsonl")
              if "curriculum_raised_to" in r]
    assert raised == [(2, 5), (4, 7), (5, 8)]
