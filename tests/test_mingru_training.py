"""MinGRU training runs (TBPTT and float EGGROLL) on a small real corpus: the loss falls, and a run
stopped and resumed (mid-sample for TBPTT, with carried states) equals an uninterrupted one bit for
bit; checkpoints keep the evaluation point and refuse another trainer."""

import numpy as np
import pytest

from eggnog.corpus.reader import open_corpus
from eggnog.evolution.float_es_trainer import FloatEsRunConfig, FloatEsTrainer
from eggnog.kernels.core.backend import Backend
from eggnog.runtime.checkpoint import load_checkpoint
from eggnog.runtime.errors import BadInput
from eggnog.runtime.rundir import read_jsonl
from eggnog.runtime.world import init_world
from eggnog.training.mingru.bptt import BpttRunConfig, BpttTrainer
from tests.es_helpers import tiny_corpus

CPU = Backend("cpu")
SMALL = dict(dim=16, depth=1, val_rows=4, val_tokens=64, seed=2)
BPTT = dict(SMALL, chunk_size=16, context_chunks=3, batch_size=4, grad_accum=2, lr=1e-2, validate_every=5,
            checkpoint_every=5)
ES = dict(SMALL, population=16, group_size=4, tokens_per_update=16, lr=2e-2, validate_every=4, checkpoint_every=4)


def run(kind, tmp_path, name, resume=False, backend=CPU, **overrides):
    cls, trainer_cls, base = (BpttRunConfig, BpttTrainer, BPTT) if kind == "bptt" else \
        (FloatEsRunConfig, FloatEsTrainer, ES)
    cfg = cls(**{**base, **overrides}).resolved()
    run_dir = tmp_path / name
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    trainer = trainer_cls(cfg, init_world(), backend, open_corpus(tiny_corpus(tmp_path)))
    if resume:
        trainer.restore(run_dir)
    trainer.run(run_dir)
    return run_dir


def test_bptt_loss_falls(tmp_path):
    run_dir = run("bptt", tmp_path, "fall", steps=40, optimizer="sf-adamw")
    vals = [r["val_bpb"] for r in read_jsonl(run_dir / "metrics.jsonl") if "val_bpb" in r]
    assert vals[-1] < vals[0] - 1.0


def test_float_eggroll_loss_falls(tmp_path):
    # 150 steps: the corpus is this interpreter's json package, and on Python 3.12's the validation loss
    # first rises for 15 steps (8.02 -> 8.27) and had fallen only 0.23 bits after 60 (3.11: 0.63)
    run_dir = run("es", tmp_path, "fall", steps=150, optimizer="adamw", population=64, group_size=8, lr=0.05)
    vals = [r["val_bpb"] for r in read_jsonl(run_dir / "metrics.jsonl") if "val_bpb" in r]
    assert vals[-1] < vals[0] - 0.5


@pytest.mark.parametrize("kind,optimizer,total,first", [("bptt", "sf-adamw", 10, 5), ("bptt", "adamw", 10, 5),
                                                         ("es", "sf-adamw", 8, 4), ("es", "sgd", 8, 4)])
def test_resume_equals_uninterrupted_run(tmp_path, kind, optimizer, total, first):
    straight = run(kind, tmp_path, "straight", optimizer=optimizer, steps=total)
    run(kind, tmp_path, "split", optimizer=optimizer, steps=first)
    resumed = run(kind, tmp_path, "split", resume=True, optimizer=optimizer, steps=total)
    a, record = load_checkpoint(straight)
    b, _ = load_checkpoint(resumed)
    assert record["step"] == total and set(a) == set(b)
    for name in a:
        assert np.array_equal(a[name], b[name]), name
    assert not np.array_equal(a["params"], a["train_params"]) if optimizer == "sf-adamw" else \
        np.array_equal(a["params"], a["train_params"])


def test_a_checkpoint_of_another_trainer_or_config_is_refused(tmp_path):
    es_dir = run("es", tmp_path, "es", steps=4)
    with pytest.raises(BadInput, match="written by 'float-eggroll' training, not 'bptt'"):
        run("bptt", tmp_path, "es", resume=True, steps=8)
    with pytest.raises(BadInput, match=r"different sigma \(0.01 -> 0.02\)"):
        run("es", tmp_path, "es", resume=True, steps=8, sigma=0.02)
    assert (es_dir / "checkpoints" / "latest").exists()


def test_bptt_refuses_bad_settings():
    for overrides, message in (({"chunk_size": 1}, "at least 2"), ({"batch_size": 0}, "must be positive"),
                               ({"optimizer": "lion"}, "unknown optimizer")):
        with pytest.raises(BadInput, match=message):
            BpttRunConfig(**{**BPTT, **overrides}).resolved().check()
    with pytest.raises(BadInput, match="cannot be split evenly over 3 ranks"):
        BpttRunConfig(**BPTT).resolved().check(3)


def test_bptt_on_the_device_matches_the_cpu(tmp_path):
    """The CUDA backend (the simulator in CI: one step, two accumulated chunks) keeps parameters and
    optimiser state on the device and steps there; its checkpoint, written through the host, agrees
    with the CPU run's to float32 rounding."""
    tiny = dict(steps=1, optimizer="adamw", depth=1, dim=8, batch_size=2, chunk_size=4, context_chunks=2,
                grad_accum=2, validate_every=1, checkpoint_every=1, val_rows=2, val_tokens=8)
    cpu_run = load_checkpoint(run("bptt", tmp_path, "cpu", **tiny))[0]
    device_run = load_checkpoint(run("bptt", tmp_path, "device", backend=Backend("cuda", simulated=True), **tiny))[0]
    assert set(device_run) == set(cpu_run)
    for name in ("params", "train_params", "opt_m", "opt_v"):
        np.testing.assert_allclose(device_run[name], cpu_run[name], rtol=1e-4, atol=1e-6)
