"""The zero-order run and bin/train_rge.py: logs what it promises, resumes bit for bit, stops on a
non-finite loss after checkpointing the last good state, overfits a fixed batch below its target,
and refuses bad input with one sentence."""

from dataclasses import asdict

import numpy as np
import pytest

from eggnog.kernels.core.backend import Backend
from eggnog.runtime.checkpoint import load_checkpoint
from eggnog.runtime.errors import BadInput
from eggnog.runtime.rundir import read_jsonl
from eggnog.runtime.world import init_world
from eggnog.zorn.rge.run import RgeRun, RgeRunConfig
from tests.helpers import assert_user_error, run_script

CPU = Backend("cpu")
TINY = dict(hidden_size=8, num_heads=2, input_size=4, batch_size=4, probes=4, lr=0.05, sigma=0.01, steps=6,
            checkpoint_every=3, overfit=True)


def run(tmp_path, name, resume=False, **overrides):
    run_dir = tmp_path / name
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    r = RgeRun(RgeRunConfig(**{**TINY, **overrides}), init_world(), CPU)
    if resume:
        r.restore(run_dir)
    summary = r.run(run_dir)
    return run_dir, summary


@pytest.mark.parametrize("solver,optimizer", [("cdrge", "sgd"), ("fdras", "adam"), ("bptt", "momentum")])
def test_resume_equals_uninterrupted_run(tmp_path, solver, optimizer):
    straight, _ = run(tmp_path, "straight", solver=solver, optimizer=optimizer)
    run(tmp_path, "split", solver=solver, optimizer=optimizer, steps=3)
    resumed, _ = run(tmp_path, "split", resume=True, solver=solver, optimizer=optimizer)
    a, record = load_checkpoint(straight)
    b, _ = load_checkpoint(resumed)
    assert record["step"] == 6 and set(a) == set(b)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    log = read_jsonl(straight / "metrics.jsonl")
    assert [r["step"] for r in log] == list(range(1, 7))
    assert {"loss", "eps", "lr", "step_s", "eval_s", "exchange_s", "update_s", "probes", "peak_process_bytes",
            "peak_own_bytes", "mode"} <= set(log[0])


def test_overfit_stops_below_the_target(tmp_path):
    run_dir, summary = run(tmp_path, "fit", solver="bptt", optimizer="adam", lr=0.05, steps=400, target_loss=0.5)
    assert summary["reached_target"] and summary["loss"] < 0.5 and summary["steps"] < 400
    assert load_checkpoint(run_dir)[1]["step"] == summary["steps"]


def test_a_nan_loss_stops_with_the_step_and_a_checkpoint(tmp_path):
    with pytest.raises(BadInput, match=r"NaN or infinite at step 1; lower --lr .* step 0"):
        run(tmp_path, "nan", lr=1e30, sigma=1e30)
    arrays, record = load_checkpoint(tmp_path / "nan")
    assert record["step"] == 0 and np.isfinite(arrays["params"]).all()


def test_train_rge_script_runs(tmp_path):
    result = run_script("train_rge.py", "--run-dir", tmp_path / "r", "--hidden-size", "8", "--num-heads", "2",
                        "--input-size", "4", "--batch-size", "4", "--probes", "4", "--steps", "2", "--overfit")
    assert result.returncode == 0, result.stderr
    assert "lstm: 1,604 parameters; cdrge with 4 rademacher probes" in result.stdout
    assert "done: 2 steps" in result.stdout


@pytest.mark.parametrize("args,message", [
    (["--hidden-size", "10", "--num-heads", "3"], "divisible"),
    (["--sigma", "0"], "--sigma must be a positive"),
    (["--epsilon", "-0.1"], "--sigma must be a positive"),
    (["--task", "juggle"], "unknown task"),
    (["--min-seq-len", "6", "--max-seq-len", "3"], "min"),
    (["--solver", "adjoint"], "unknown --solver"),
    (["--model", "gru"], "unknown --model"),
    (["--probes", "0"], "--probes must be positive"),
    (["--probe-batch", "-1"], "--probe-batch must be 0"),
    (["--model", "dnc", "--probe-batch", "4"], "--probe-batch above 1 needs --model lstm"),
])
def test_train_rge_bad_input(tmp_path, args, message):
    assert_user_error(run_script("train_rge.py", "--run-dir", tmp_path / "r", *args), message)
    assert not (tmp_path / "r").exists()


def test_runs_from_before_a_new_performance_flag_still_resume():
    """--probe-batch (and float EGGROLL's --forward-precision) change speed, not the run: a run directory
    whose config predates them must resume, so neither is among the fields fixed on resume."""
    from eggnog.evolution.float_es_trainer import FloatEsRunConfig
    from eggnog.runtime.rundir import check_resume

    for cls, name in ((RgeRunConfig, "probe_batch"), (FloatEsRunConfig, "forward_precision")):
        now = asdict(cls())
        before = {k: v for k, v in now.items() if k != name}
        check_resume(before, now, cls.fixed_on_resume())


def test_a_checkpoint_from_before_validation_and_the_curriculum_resumes(tmp_path):
    from eggnog.runtime.checkpoint import save_checkpoint

    run_dir, _ = run(tmp_path, "old", steps=3)
    arrays, record = load_checkpoint(run_dir)
    new = ("validate_every", "val_samples", "val_min_len", "val_max_len", "curriculum_max", "curriculum_threshold",
           "curriculum_patience", "curriculum_step", "lr_search", "lr_search_steps", "lr_search_rounds")
    meta = {**record["meta"], "config": {k: v for k, v in record["meta"]["config"].items() if k not in new}}
    save_checkpoint(run_dir / "checkpoints", 3, arrays, meta)
    _, summary = run(tmp_path, "old", resume=True)
    assert summary["steps"] == 6


@pytest.mark.parametrize("solver", ["cdrge", "bptt"])
def test_validations_log_the_clean_loss_of_the_unperturbed_parameters(tmp_path, solver):
    """`loss` of a CD-RGE step is the probes' mean at theta +- eps z; `clean_loss`, at each validation, is
    the loss of the parameters validated (those checkpointed at that step) on the step's own batch."""
    from eggnog.zorn.rge.run import build_model
    from eggnog.zorn.tasks import make_task

    cfg = RgeRunConfig(**{**TINY, "overfit": False, "validate_every": 2, "checkpoint_every": 2, "val_samples": 4,
                          "sigma": 0.5, "solver": solver, "optimizer": "sgd"})
    run_dir = tmp_path / "clean"
    (run_dir / "checkpoints").mkdir(parents=True)
    summary = RgeRun(cfg, init_world(), CPU).run(run_dir)
    log = read_jsonl(run_dir / "metrics.jsonl")
    assert [r["step"] for r in log if "clean_loss" in r] == [2, 4, 6]
    assert all("clean_loss" not in r for r in log if "val_loss" not in r)
    model, task = build_model(cfg), make_task(cfg.task, cfg.min_seq_len, cfg.max_seq_len, cfg.seed)
    for r in (r for r in log if "clean_loss" in r):
        params, _ = load_checkpoint(run_dir / "checkpoints" / f"step-{r['step']:08d}.npz")
        batch = task.batch(r["step"] - 1, cfg.batch_size)  # the batch the step trained on
        logits = np.asarray(model.logits("cpu", params["params"], batch.inputs), np.float64)
        log_z = np.log(np.exp(logits).sum(axis=2))
        picked = np.take_along_axis(logits, batch.targets[..., None].astype(np.int64), axis=2)[..., 0]
        bits = ((log_z - picked) * batch.mask).sum() / batch.mask.sum() / np.log(2.0)
        assert r["clean_loss"] == pytest.approx(bits, rel=1e-4, abs=1e-5)
    if solver == "cdrge":  # eps 0.5: the probes sit far above the unperturbed parameters
        assert all(r["loss"] > r["clean_loss"] + 0.05 for r in log if "clean_loss" in r)
    assert summary["clean_loss"] == pytest.approx(log[-1]["clean_loss"])
