"""Validation of zero-order runs: held-out samples of the lengths promised, from a generator no training
batch uses; the loss is the model's own masked loss; exact-match accuracy is greedy decoding's; the
run logs val_loss / val_accuracy on schedule and `best` points at the best validation."""

import numpy as np
import pytest

from eggnog.kernels.core.backend import Backend
from eggnog.runtime.checkpoint import load_checkpoint
from eggnog.runtime.rundir import read_jsonl
from eggnog.runtime.world import init_world
from eggnog.zorn.batch import TaskBatch
from eggnog.zorn.rge.run import RgeRun, RgeRunConfig, build_model
from eggnog.zorn.tasks import SYNTHETIC, decode, make_task, validation_task
from eggnog.zorn.validation import Validation, score_rows, validation_bounds

CPU = Backend("cpu")
TINY = dict(hidden_size=8, num_heads=2, input_size=4, batch_size=4, probes=4, lr=0.05, sigma=0.01, steps=6,
            checkpoint_every=100, validate_every=2, val_samples=12)


def question_length(task_name, row):
    """Letters (or digits) of a sample's question, read back from its tokens."""
    text = decode(row)
    if task_name == "add":
        return len(text.split("=")[0].split("+"))
    return len(text.split(" ")[0]) - (1 if task_name == "repeat_copy" else 0)


@pytest.mark.parametrize("name", SYNTHETIC)
def test_validation_lengths_lie_past_training(name):
    cfg = RgeRunConfig(task=name, max_seq_len=4, val_samples=200)
    low, high = validation_bounds(cfg)
    assert (low, high) == (5, 54)
    batch = Validation(cfg).batch
    seqs = np.concatenate([batch.inputs[:, :1], batch.targets], axis=1)
    lengths = [question_length(name, row) for row in seqs]
    assert min(lengths) >= 5 and max(lengths) <= 54 and len(set(lengths)) > 20


def test_validation_bounds_follow_the_curriculum_cap_and_the_flags():
    assert validation_bounds(RgeRunConfig(max_seq_len=4, curriculum_max=10)) == (11, 60)
    assert validation_bounds(RgeRunConfig(max_seq_len=20, val_min_len=21, val_max_len=50)) == (21, 50)


def test_validation_generators_are_never_a_training_batch_s():
    train = make_task("copy", 2, 5, 3)
    held_out = validation_task("copy", 6, 55, 3)
    train_states = {str(train.generator(step).bit_generator.state) for step in range(2000)}
    assert str(held_out.generator(0).bit_generator.state) not in train_states
    # and with the same bounds (in-distribution validation) the samples still differ
    same_bounds = validation_task("copy", 2, 5, 3)
    assert not np.array_equal(same_bounds.batch(0, 64).inputs, train.batch(0, 64).inputs)


def greedy_exact(model, flat, batch):
    """Exact answers by real greedy decoding: over each answer, feed back the model's own argmax."""
    exact = 0
    for row in range(batch.inputs.shape[0]):
        tokens, decoded = batch.inputs[row].copy(), []
        for pos in np.flatnonzero(batch.mask[row]):
            decoded.append(model.logits("cpu", flat, tokens[None, :pos + 1])[0, pos].argmax())
            if pos + 1 < tokens.size:
                tokens[pos + 1] = decoded[-1]
        exact += int(np.array_equal(decoded, batch.targets[row][batch.mask[row] == 1]))
    return exact


def trained_lstm_params():
    """An LSTM that gets some copy answers right: BPTT on length-1 copies."""
    cfg = RgeRunConfig(hidden_size=16, num_heads=2, input_size=8, solver="bptt", optimizer="adam", lr=0.05,
                       min_seq_len=1, max_seq_len=1, batch_size=32)
    run = RgeRun(cfg, init_world(), CPU)
    task = make_task("copy", 1, 1, 0)
    for run.step in range(150):
        run.train_step(task.batch(run.step, 32))
    return run.model, run.host_params()


def test_exact_match_is_greedy_decoding_s():
    model, flat = trained_lstm_params()
    batch = validation_task("copy", 1, 2, 5).batch(0, 40)
    sums = score_rows(model.logits("cpu", flat, batch.inputs), batch)
    assert 0 < sums[2] < 40  # some right, some wrong: the comparison means something
    assert sums[2] == greedy_exact(model, flat, batch)


@pytest.mark.parametrize("model_name", ["lstm", "dnc", "mingru"])
def test_val_loss_is_the_model_s_masked_loss(model_name):
    cfg = RgeRunConfig(model=model_name, hidden_size=8, num_heads=2, input_size=4, memory_size=4, head_size=4,
                       dim=8, depth=1, val_samples=6, batch_size=4, max_seq_len=2, val_max_len=6)
    model = build_model(cfg)
    flat = model.init_params(1)
    validation = Validation(cfg)
    got = validation.score(model, CPU, flat, init_world())
    assert got["val_loss"] == pytest.approx(model.loss("cpu", flat, validation.batch), rel=1e-5)
    assert 0 <= got["val_accuracy"] <= 1


def test_char_lm_accuracy_counts_bytes():
    logits = np.zeros((1, 3, 100))
    logits[0, 0, 7] = logits[0, 1, 8] = logits[0, 2, 1] = 5.0
    batch = TaskBatch(np.zeros((1, 3), np.uint8), np.array([[7, 8, 9]], np.uint8), np.ones((1, 3), np.float32))
    loss, tokens, exact, samples, right = score_rows(logits, batch)
    assert (tokens, exact, samples, right) == (3, 0, 1, 2)
    assert loss > 0


def test_a_run_validates_on_schedule_and_marks_the_best(tmp_path):
    run_dir = tmp_path / "v"
    (run_dir / "checkpoints").mkdir(parents=True)
    run = RgeRun(RgeRunConfig(**TINY, solver="bptt", optimizer="adam", max_seq_len=2), init_world(), CPU)
    summary = run.run(run_dir)
    log = read_jsonl(run_dir / "metrics.jsonl")
    validated = [r for r in log if "val_loss" in r]
    assert [r["step"] for r in validated] == [2, 4, 6]
    assert all(0 <= r["val_accuracy"] <= 1 for r in validated)
    best = min(validated, key=lambda r: r["val_loss"])
    _, record = load_checkpoint(run_dir / "checkpoints" / "best")
    assert record["step"] == best["step"] and record["meta"]["best_val_loss"] == pytest.approx(best["val_loss"])
    assert summary["val_loss"] == pytest.approx(validated[-1]["val_loss"])


def test_validate_every_zero_never_validates(tmp_path):
    run_dir = tmp_path / "n"
    (run_dir / "checkpoints").mkdir(parents=True)
    RgeRun(RgeRunConfig(**{**TINY, "validate_every": 0}), init_world(), CPU).run(run_dir)
    assert not any("val_loss" in r for r in read_jsonl(run_dir / "metrics.jsonl"))
    assert not (run_dir / "checkpoints" / "best").exists()



@pytest.mark.parametrize("overrides", [dict(), dict(batch_size=1024, max_seq_len=20, val_min_len=21, val_max_len=50),
                                       dict(batch_size=2, curriculum_max=30), dict(task="char_lm", max_seq_len=40)])
def test_a_validation_pass_holds_no_more_tokens_than_a_training_batch(overrides):
    from eggnog.zorn.validation import MIN_PASS_TOKENS, sample_tokens, validation_chunk

    cfg = RgeRunConfig(**overrides)
    longest = cfg.max_seq_len if cfg.task == "char_lm" else validation_bounds(cfg)[1]
    train = cfg.batch_size * sample_tokens(cfg, cfg.curriculum_max or cfg.max_seq_len)
    assert validation_chunk(cfg) * sample_tokens(cfg, longest) <= max(train, MIN_PASS_TOKENS)
    assert validation_chunk(cfg) >= 1
