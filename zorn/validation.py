"""Validation of a zero-order run: one fixed set of held-out samples, scored by the unperturbed model.

Synthetic tasks draw their samples with lengths in [val_min_len, val_max_len] (by default the
authors' length-generalisation split, max_seq_len + 1 .. max_seq_len + 50) from a stream no training
batch uses (zorn/tasks.validation_task); char_lm reads windows of the corpus's val split.

Scores: `val_loss`, the mask-weighted cross-entropy in bits per scored token (the training loss's
unit), and `val_accuracy`: for synthetic tasks the share of samples whose whole answer the model gets
right by greedy decoding, for char_lm the share of bytes predicted right. Greedy decoding feeds back
the model's own argmax; as long as every argmax so far was the answer's token, it has fed exactly the
teacher-forced input, so a sample is decoded exactly iff every teacher-forced argmax over its answer is
right: one forward pass scores it. Rows are split over MPI ranks and the sums reduced, so every rank
gets the same scores.
"""

import numpy as np

from eggnog.zorn.tasks import validation_task

LN2 = np.log(2.0)


def validation_bounds(cfg):
    """(shortest, longest) validation sample: the flags, or the split past the longest training sample
    (the curriculum's cap when it is on)."""
    longest_trained = cfg.curriculum_max or cfg.max_seq_len
    low = cfg.val_min_len if cfg.val_min_len is not None else longest_trained + 1
    high = cfg.val_max_len if cfg.val_max_len is not None else low + 49
    return low, high


MIN_PASS_TOKENS = 4096  # a pass costs the model's per-step launches, which dominate small batches


def sample_tokens(cfg, longest):
    """Tokens of a sample whose question is `longest` long (char_lm: a window)."""
    return longest + 1 if cfg.task == "char_lm" else 2 * longest + 1


def validation_chunk(cfg):
    """Rows scored in one pass: as many tokens as a training batch of the longest training samples holds
    (at least MIN_PASS_TOKENS), so validating on longer samples needs no more activation memory than a
    training step."""
    train = cfg.batch_size * sample_tokens(cfg, cfg.curriculum_max or cfg.max_seq_len)
    longest = cfg.max_seq_len if cfg.task == "char_lm" else validation_bounds(cfg)[1]
    return max(1, max(train, MIN_PASS_TOKENS) // sample_tokens(cfg, longest))


def score_rows(logits, batch):
    """(Σ mask · CE bits, Σ mask, exact answers, samples, right tokens) of a batch's host logits (B, T, V)."""
    logits = np.asarray(logits, np.float64)
    top = logits.max(axis=2, keepdims=True)
    log_z = np.log(np.exp(logits - top).sum(axis=2)) + top[..., 0]
    targets = np.asarray(batch.targets, np.int64)
    picked = np.take_along_axis(logits, targets[..., None], axis=2)[..., 0]
    mask = np.asarray(batch.mask, np.float64)
    hits = logits.argmax(axis=2) == targets
    scored = mask.sum(axis=1) > 0
    return np.array([float(((log_z - picked) * mask).sum() / LN2), float(mask.sum()),
                     float(((hits | (mask == 0)).all(axis=1) & scored).sum()), float(scored.sum()),
                     float((hits * mask).sum())])


class Validation:
    """The held-out samples of a run and their scoring."""

    def __init__(self, cfg, corpus=None):
        self.per_token = cfg.task == "char_lm"
        if self.per_token:
            task = validation_task(cfg.task, cfg.min_seq_len, cfg.max_seq_len, cfg.seed, corpus)
        else:
            task = validation_task(cfg.task, *validation_bounds(cfg), cfg.seed)
        self.batch = task.batch(0, cfg.val_samples)
        self.chunk = validation_chunk(cfg)

    def score(self, model, backend, flat, world):
        """{"val_loss": bits per scored token, "val_accuracy": share right} of the parameters `flat`."""
        rows = self.batch.inputs.shape[0]
        share = np.array_split(np.arange(rows), world.size)[world.rank]
        sums = np.zeros(5)
        for start in range(0, len(share), self.chunk):
            part = share[start:start + self.chunk]
            piece = type(self.batch)(self.batch.inputs[part], self.batch.targets[part], self.batch.mask[part])
            sums += score_rows(model.logits(backend.name, flat, piece.inputs), piece)
        loss, tokens, exact, samples, right = world.allreduce_sum(sums) if world.size > 1 else sums
        accuracy = right / tokens if self.per_token else exact / samples
        return {"val_loss": float(loss / tokens), "val_accuracy": float(accuracy)}
