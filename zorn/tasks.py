"""The sequence tasks of the zero-order RNN paper (Chaubard & Kochenderfer, zero_order_rnn) and a
character LM, as TaskBatches over the 100 symbols of string.printable (token id = index there).

Synthetic tasks, one sample of L symbols each (L uniform in [min_seq_len, max_seq_len] per sample, so a
curriculum only moves these bounds), formatted as in the authors' code:
- copy / sort / reverse: L random lowercase letters, " ", the same / sorted / reversed letters;
- repeat_copy: L letters, a digit k in [1, 4], " ", the letters repeated k times;
- add: L single digits joined by "+", "=", the decimal sum.
Every batch has the fixed width of the longest possible sample (right-padded with spaces), so its
shape depends only on the task and the bounds. Next-token prediction: inputs = seq[:-1],
targets = seq[1:], mask 1 exactly where the target is an answer token (after the separator " " or
"=", the last answer token included), 0 on the question, the separator and the padding.

More in docs/internals.md (zorn/tasks.py)."""

import operator
import string

import numpy as np

from eggnog.corpus.samplers import RandomWindows
from eggnog.runtime.errors import BadInput
from eggnog.zorn.batch import TaskBatch

SYMBOLS = string.printable
VOCAB = len(SYMBOLS)  # 100
SPACE = SYMBOLS.index(" ")
SYNTHETIC = ("copy", "repeat_copy", "reverse", "sort", "add")
TASKS = SYNTHETIC + ("char_lm",)
MAX_REPEATS = 4  # repeat_copy's k is in [1, MAX_REPEATS]

_TOKEN_OF_BYTE = np.zeros(256, dtype=np.uint8)  # bytes outside string.printable map to token 0
_TOKEN_OF_BYTE[[ord(c) for c in SYMBOLS]] = np.arange(VOCAB, dtype=np.uint8)
_BYTE_OF_TOKEN = np.frombuffer(SYMBOLS.encode("ascii"), dtype=np.uint8)

_BATCH_STREAM = 0x5441534B  # first seed word of per-step batches: "TASK"
_OVERFIT_STREAM = 0x46495844  # first seed word of the fixed overfit batch: "FIXD"
_VALIDATION_STREAM = 0x56414C44  # first seed word of validation samples: "VALD", never a training batch's


def tokens_of_bytes(data):
    """Token ids of raw bytes; bytes not in string.printable become token 0."""
    return _TOKEN_OF_BYTE[np.asarray(data, dtype=np.uint8)]


def encode(text):
    """Token ids of a string of printable characters."""
    bad = sorted({c for c in text if c not in SYMBOLS})
    if bad:
        raise BadInput(f"characters {''.join(bad)!r} are not in the printable vocabulary")
    return tokens_of_bytes(np.frombuffer(text.encode("ascii"), dtype=np.uint8))


def decode(tokens):
    """The string of a 1-D array of token ids."""
    return _BYTE_OF_TOKEN[np.asarray(tokens, dtype=np.int64)].tobytes().decode("ascii")


def _count(name, value, minimum):
    try:
        value = operator.index(value)
    except TypeError:
        raise BadInput(f"{name} must be an integer, got {value!r}") from None
    if value < minimum:
        raise BadInput(f"{name} must be at least {minimum}, got {value}")
    return value


def _shifted(seqs, mask):
    """inputs = seqs[:, :-1], targets = seqs[:, 1:] (contiguous copies) and the mask."""
    return TaskBatch(np.ascontiguousarray(seqs[:, :-1]), np.ascontiguousarray(seqs[:, 1:]), mask)


def _table1_batch(seqs, input_tokens):
    """Shifted pairs of (B, input_tokens + target_tokens) sequences with the Table 1 mask; read-only,
    as the one batch is shared by every step."""
    mask = np.zeros((seqs.shape[0], seqs.shape[1] - 1), dtype=np.float32)
    mask[:, input_tokens:] = 1.0
    batch = _shifted(seqs, mask)
    for a in (batch.inputs, batch.targets, batch.mask):
        a.flags.writeable = False
    return batch


def _overfit_geometry(batch_size, input_tokens, target_tokens):
    return (_count("batch size", batch_size, 1), _count("input tokens", input_tokens, 1),
            _count("target tokens", target_tokens, 2))


class SyntheticTask:
    """copy, repeat_copy, reverse, sort or add with sample lengths in [min_seq_len, max_seq_len]."""

    def __init__(self, name, min_seq_len, max_seq_len, seed, stream=_BATCH_STREAM):
        self.name, self.min_seq_len, self.max_seq_len, self.seed = name, min_seq_len, max_seq_len, seed
        self.stream = stream
        hi = max_seq_len
        self.width = {"add": 2 * hi + len(str(9 * hi)), "repeat_copy": (MAX_REPEATS + 1) * hi + 2}.get(name, 2 * hi + 1)

    def _texts(self, rng, count):
        """(question + separator, answer) strings of `count` samples."""
        lengths = rng.integers(self.min_seq_len, self.max_seq_len + 1, size=count)
        if self.name == "add":
            digits = rng.integers(0, 10, size=(count, self.max_seq_len))
            return [("+".join(map(str, d[:n])) + "=", str(int(d[:n].sum()))) for d, n in zip(digits, lengths)]
        letters = rng.integers(0, 26, size=(count, self.max_seq_len))
        words = ["".join(string.ascii_lowercase[i] for i in row[:n]) for row, n in zip(letters, lengths)]
        if self.name == "repeat_copy":
            repeats = rng.integers(1, MAX_REPEATS + 1, size=count)
            return [(w + str(k) + " ", w * int(k)) for w, k in zip(words, repeats)]
        answer = {"copy": lambda w: w, "sort": lambda w: "".join(sorted(w)), "reverse": lambda w: w[::-1]}[self.name]
        return [(w + " ", answer(w)) for w in words]

    def _sequences(self, rng, count):
        seqs = np.full((count, self.width), SPACE, dtype=np.uint8)
        mask = np.zeros((count, self.width - 1), dtype=np.float32)
        for row, (question, answer) in enumerate(self._texts(rng, count)):
            q, a = len(question), len(answer)
            seqs[row, :q + a] = encode(question + answer)
            mask[row, q - 1:q - 1 + a] = 1.0  # inputs at q-1 .. q+a-2 predict the answer tokens q .. q+a-1
        return seqs, mask

    def generator(self, step):
        """The generator of the samples of `step`."""
        return np.random.default_rng([self.stream, self.seed, step])

    def batch(self, step, batch_size):
        """The batch of `step`: a pure function of (seed, step)."""
        step, batch_size = _count("step", step, 0), _count("batch size", batch_size, 1)
        seqs, mask = self._sequences(self.generator(step), batch_size)
        return _shifted(seqs, mask)

    def overfit_batch(self, batch_size=1024, input_tokens=2, target_tokens=10):
        """The Table 1 batch: fixed samples cut or space-padded to input + target tokens."""
        batch_size, input_tokens, target_tokens = _overfit_geometry(batch_size, input_tokens, target_tokens)
        seqs, _ = self._sequences(np.random.default_rng([_OVERFIT_STREAM, self.seed]), batch_size)
        length = input_tokens + target_tokens
        fitted = np.full((batch_size, length), SPACE, dtype=np.uint8)
        fitted[:, :min(length, self.width)] = seqs[:, :length]
        return _table1_batch(fitted, input_tokens)


class CharLmTask:
    """Next-byte prediction on random windows of max_seq_len + 1 bytes of one corpus split."""

    name = "char_lm"

    def __init__(self, data, min_seq_len, max_seq_len, seed):
        self.data, self.min_seq_len, self.max_seq_len, self.seed = data, min_seq_len, max_seq_len, seed
        self.windows = RandomWindows(data, max_seq_len + 1, seed)
        self.width = max_seq_len + 1

    def batch(self, step, batch_size):
        step, batch_size = _count("step", step, 0), _count("batch size", batch_size, 1)
        seqs = tokens_of_bytes(self.windows.batch(step, 0, batch_size))
        return _shifted(seqs, np.ones((batch_size, self.max_seq_len), dtype=np.float32))

    def overfit_batch(self, batch_size=1024, input_tokens=2, target_tokens=10):
        """The Table 1 batch: the windows of input + target tokens of step 0 for this seed."""
        batch_size, input_tokens, target_tokens = _overfit_geometry(batch_size, input_tokens, target_tokens)
        length = input_tokens + target_tokens
        if len(self.data) < length:
            raise BadInput(f"corpus split of {len(self.data)} bytes is shorter than one window of {length} bytes")
        seqs = tokens_of_bytes(RandomWindows(self.data, length, self.seed).batch(0, 0, batch_size))
        return _table1_batch(seqs, input_tokens)


class FixedBatchTask:
    """Overfit mode: one batch built once, returned at every step (the Table 1 workload)."""

    def __init__(self, task, batch_size=1024, input_tokens=2, target_tokens=10):
        self.name, self.seed = task.name, task.seed
        self.fixed = task.overfit_batch(batch_size, input_tokens, target_tokens)
        self.batch_size = self.fixed.inputs.shape[0]

    def batch(self, step, batch_size=None):
        _count("step", step, 0)
        if batch_size is not None and batch_size != self.batch_size:
            raise BadInput(f"the fixed overfit batch holds {self.batch_size} sequences, not {batch_size}")
        return self.fixed


def make_task(name, min_seq_len, max_seq_len, seed, corpus=None, split="train"):
    """A task whose batch(step, batch_size) is a pure function of (seed, step). `corpus` (anything with
    .train and .val byte arrays) is needed by char_lm only; `split` picks which of its splits to read."""
    if name not in TASKS:
        raise BadInput(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")
    min_seq_len = _count("minimum sequence length", min_seq_len, 1)
    max_seq_len = _count("maximum sequence length", max_seq_len, 1)
    if min_seq_len > max_seq_len:
        raise BadInput(f"minimum sequence length {min_seq_len} exceeds the maximum {max_seq_len}")
    seed = _count("seed", seed, 0)
    if name != "char_lm":
        return SyntheticTask(name, min_seq_len, max_seq_len, seed)
    if corpus is None:
        raise BadInput("task char_lm needs a corpus")
    if split not in ("train", "val"):
        raise BadInput(f"unknown corpus split {split!r}; choose train or val")
    data = getattr(corpus, split)
    if len(data) < max_seq_len + 1:
        raise BadInput(f"the {split} split of the corpus holds {len(data)} bytes, shorter than one window of "
                       f"{max_seq_len + 1} bytes")
    return CharLmTask(data, min_seq_len, max_seq_len, seed)


def validation_task(name, min_seq_len, max_seq_len, seed, corpus=None):
    """Held-out samples: for a synthetic task, lengths in [min_seq_len, max_seq_len] drawn from a stream
    no training batch uses; for char_lm, windows of max_seq_len + 1 bytes of the corpus's val split."""
    if name == "char_lm":
        return make_task(name, min_seq_len, max_seq_len, seed, corpus, split="val")
    task = make_task(name, min_seq_len, max_seq_len, seed)
    return SyntheticTask(name, task.min_seq_len, task.max_seq_len, task.seed, _VALIDATION_STREAM)


def overfit_task(task, batch_size=1024, input_tokens=2, target_tokens=10):
    """Overfit mode of a task from make_task: the same Table 1 batch at every step."""
    return FixedBatchTask(task, batch_size, input_tokens, target_tokens)
