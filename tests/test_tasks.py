"""Sequence tasks: samples decode to right answers, masks cover exactly the answers, batches are pure
functions of (seed, step), the Table 1 overfit batch has its geometry, bad input says what is wrong."""

import re
import string
from types import SimpleNamespace

import numpy as np
import pytest

from eggnog.corpus.reader import open_corpus
from eggnog.runtime.errors import BadInput
from eggnog.zorn.tasks import SPACE, SYNTHETIC, TASKS, VOCAB, decode, encode, make_task, overfit_task, tokens_of_bytes
from tests.es_helpers import tiny_corpus

LOWER = set(string.ascii_lowercase)


def rows(batch):
    """(full sequence, answer read off the masked targets, first masked position) of each row."""
    for inputs, targets, mask in zip(batch.inputs, batch.targets, batch.mask):
        seq = decode(inputs) + decode(targets[-1:])
        on = np.flatnonzero(mask)
        assert on.size and np.array_equal(on, np.arange(on[0], on[-1] + 1)), "mask is one contiguous run"
        yield seq, decode(targets[on]), int(on[0])


def check_sample(task, seq, answer, first, lo, hi):
    """The question, separator and answer of one decoded sample; returns its length L."""
    sep = "=" if task == "add" else " "
    p = seq.index(sep)
    assert first == p, "the first counted prediction is made while reading the separator"
    question, tail = seq[:p], seq[p + 1:]
    assert tail == answer + " " * (len(tail) - len(answer)), "the answer is followed by padding only"
    if task == "add":
        terms = question.split("+")
        assert all(len(t) == 1 and t.isdigit() for t in terms)
        assert answer == str(sum(map(int, terms)))
        length = len(terms)
    elif task == "repeat_copy":
        letters, k = question[:-1], int(question[-1])
        assert 1 <= k <= 4 and set(letters) <= LOWER
        assert answer == letters * k
        length = len(letters)
    else:
        assert set(question) <= LOWER
        assert answer == {"copy": question, "sort": "".join(sorted(question)), "reverse": question[::-1]}[task]
        length = len(question)
    assert lo <= length <= hi
    return length


@pytest.mark.parametrize("task", SYNTHETIC)
def test_synthetic_samples_are_right_and_masks_cover_exactly_the_answer(task):
    lo, hi = 2, 7
    batch = make_task(task, lo, hi, seed=5).batch(3, 256)
    assert batch.inputs.dtype == batch.targets.dtype == np.uint8 and batch.mask.dtype == np.float32
    assert batch.inputs.shape == batch.targets.shape == batch.mask.shape
    assert np.array_equal(batch.inputs[:, 1:], batch.targets[:, :-1])
    assert batch.inputs.max() < VOCAB
    lengths = [check_sample(task, *row, lo, hi) for row in rows(batch)]
    assert set(lengths) == set(range(lo, hi + 1)), "lengths are drawn over the whole range"


@pytest.mark.parametrize("task", SYNTHETIC)
def test_fixed_width_comes_from_the_bounds_and_one_length_curriculum(task):
    batch = make_task(task, 4, 4, seed=0).batch(0, 64)
    assert {check_sample(task, *row, 4, 4) for row in rows(batch)} == {4}
    width = {"add": 2 * 4 + 2, "repeat_copy": 5 * 4 + 2}.get(task, 2 * 4 + 1)
    assert batch.inputs.shape == (64, width - 1)
    longest = make_task(task, 1, 4, seed=0).batch(0, 512)
    assert longest.inputs.shape[1] == batch.inputs.shape[1]


def test_copy_pads_with_spaces_and_masks_the_padding_out():
    batch = make_task("copy", 1, 9, seed=1).batch(0, 128)
    padded = batch.targets == SPACE
    answer_ends = batch.mask.sum(1) * 2 + 1  # L letters, " ", L letters: targets end at index 2L - 1
    for row, end in enumerate(answer_ends.astype(int)):
        assert padded[row, end:].all() and not batch.mask[row, end:].any()


@pytest.mark.parametrize("task", TASKS)
def test_batches_are_pure_functions_of_seed_and_step(task, tmp_path):
    corpus = open_corpus(tiny_corpus(tmp_path)) if task == "char_lm" else None
    a = make_task(task, 2, 9, seed=7, corpus=corpus)
    b = make_task(task, 2, 9, seed=7, corpus=corpus)
    first = a.batch(11, 32)
    for again in (a.batch(11, 32), b.batch(11, 32)):
        for x, y in zip((first.inputs, first.targets, first.mask), (again.inputs, again.targets, again.mask)):
            assert np.array_equal(x, y)
    assert not np.array_equal(a.batch(12, 32).inputs, first.inputs)
    assert not np.array_equal(make_task(task, 2, 9, seed=8, corpus=corpus).batch(11, 32).inputs, first.inputs)


@pytest.mark.parametrize("task", TASKS)
def test_overfit_batch_has_the_table1_geometry_and_is_fixed(task, tmp_path):
    corpus = open_corpus(tiny_corpus(tmp_path)) if task == "char_lm" else None
    fixed = overfit_task(make_task(task, 2, 5, seed=4, corpus=corpus))
    batch = fixed.batch(0)
    assert batch.inputs.shape == batch.targets.shape == batch.mask.shape == (1024, 11)
    assert np.array_equal(batch.inputs[:, 1:], batch.targets[:, :-1])
    assert (batch.mask.sum(1) == 9).all() and not batch.mask[:, :2].any() and batch.mask[:, 2:].all()
    assert batch.predicted == 1024 * 9
    assert fixed.batch(1) is batch and fixed.batch(500, 1024) is batch
    assert not batch.inputs.flags.writeable
    again = overfit_task(make_task(task, 2, 5, seed=4, corpus=corpus)).batch(0)
    assert np.array_equal(again.inputs, batch.inputs) and np.array_equal(again.targets, batch.targets)
    small = make_task(task, 2, 5, seed=4, corpus=corpus).overfit_batch(8, input_tokens=3, target_tokens=5)
    assert small.inputs.shape == (8, 7) and (small.mask.sum(1) == 4).all() and not small.mask[:, :3].any()


def test_char_lm_windows_are_corpus_text_with_non_printable_bytes_as_token_0():
    data = np.frombuffer(b"ab\x00c\xffd\n\te~" * 40, dtype=np.uint8)
    corpus = SimpleNamespace(train=data, val=data[:20])
    batch = make_task("char_lm", 1, 15, seed=2, corpus=corpus).batch(0, 16)
    assert batch.inputs.shape == (16, 15) and (batch.mask == 1).all()
    text = decode(tokens_of_bytes(data))
    assert text[:10] == "ab0c0d\n\te~"
    for inputs, targets in zip(batch.inputs, batch.targets):
        window = decode(inputs) + decode(targets[-1:])
        assert window in text and decode(targets)[:-1] == decode(inputs)[1:]
    assert np.array_equal(tokens_of_bytes(np.arange(256)) != 0, np.isin(np.arange(256), list(b"123456789" + bytes(
        ord(c) for c in string.printable[10:]))))
    val = make_task("char_lm", 1, 19, seed=2, corpus=corpus, split="val").batch(0, 2)
    assert decode(val.inputs[0]) == text[:19]


def test_char_lm_on_a_real_corpus(tmp_path):
    corpus = open_corpus(tiny_corpus(tmp_path))
    batch = make_task("char_lm", 64, 64, seed=0, corpus=corpus).batch(0, 8)
    assert batch.inputs.shape == (8, 64) and batch.inputs.max() < VOCAB
    assert (batch.inputs == encode(" ")[0]).any()


def test_encode_decode_round_trip():
    assert decode(encode(string.printable)) == string.printable
    assert np.array_equal(encode(string.printable), np.arange(100))


def test_bad_input_says_what_is_wrong():
    corpus = SimpleNamespace(train=np.zeros(8, np.uint8), val=np.zeros(0, np.uint8))
    cases = [
        (lambda: make_task("copyy", 1, 5, 0), "unknown task 'copyy'; choose one of copy, repeat_copy, reverse, "
                                               "sort, add, char_lm"),
        (lambda: make_task("copy", 0, 5, 0), "minimum sequence length must be at least 1, got 0"),
        (lambda: make_task("add", 6, 5, 0), "minimum sequence length 6 exceeds the maximum 5"),
        (lambda: make_task("copy", 1, 5, -1), "seed must be at least 0, got -1"),
        (lambda: make_task("char_lm", 1, 5, 0), "task char_lm needs a corpus"),
        (lambda: make_task("char_lm", 1, 8, 0, corpus=corpus), "the train split of the corpus holds 8 bytes, "
                                                               "shorter than one window of 9 bytes"),
        (lambda: make_task("char_lm", 1, 3, 0, corpus=corpus, split="val"), "the val split of the corpus holds 0"),
        (lambda: make_task("char_lm", 1, 3, 0, corpus=corpus, split="test"), "unknown corpus split 'test'"),
        (lambda: make_task("char_lm", 1, 3, 0, corpus=corpus).overfit_batch(), "corpus split of 8 bytes is "
                                                                               "shorter than one window of 12"),
        (lambda: make_task("copy", 1, 5, 0).batch(0, 0), "batch size must be at least 1, got 0"),
        (lambda: make_task("char_lm", 1, 3, 0, corpus=corpus).batch(0, 0), "batch size must be at least 1, got 0"),
        (lambda: make_task("sort", 1, 5, 0).overfit_batch(0), "batch size must be at least 1, got 0"),
        (lambda: make_task("sort", 1, 5, 0).overfit_batch(4, target_tokens=1), "target tokens must be at least 2"),
        (lambda: make_task("sort", 1, 5, 0).batch(0, 2.5), "batch size must be an integer, got 2.5"),
        (lambda: overfit_task(make_task("copy", 1, 5, 0), 16).batch(0, 32), "holds 16 sequences, not 32"),
        (lambda: encode("é"), "not in the printable vocabulary"),
    ]
    for call, message in cases:
        with pytest.raises(BadInput, match=re.escape(message)):
            call()
