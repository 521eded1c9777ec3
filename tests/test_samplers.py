"""Samplers are pure functions of (seed, step, global index): any split of a global batch over
ranks gives the same windows; nano-egg streams continue across epochs; TBPTT chunks skip no byte."""

import numpy as np
import pytest

from eggnog.corpus.samplers import ContiguousStreams, RandomWindows, tbptt_chunks
from eggnog.runtime.errors import BadInput

DATA = np.random.default_rng(0).integers(0, 256, size=20_000, dtype=np.uint8)


def test_random_windows_are_slices_of_the_data_and_deterministic():
    sampler = RandomWindows(DATA, 65, seed=3)
    starts = sampler.starts(step=5, first=0, count=64)
    batch = sampler.batch(5, 0, 64)
    assert batch.shape == (64, 65) and batch.dtype == np.uint8
    for row, start in zip(batch, starts):
        assert np.array_equal(row, DATA[start:start + 65])
    assert np.array_equal(RandomWindows(DATA, 65, seed=3).batch(5, 0, 64), batch)
    assert not np.array_equal(sampler.starts(6, 0, 64), starts)
    assert not np.array_equal(RandomWindows(DATA, 65, seed=4).starts(5, 0, 64), starts)


@pytest.mark.parametrize("ranks", [1, 2, 4, 8])
def test_random_windows_independent_of_rank_split(ranks):
    sampler = RandomWindows(DATA, 33, seed=1)
    whole = sampler.batch(2, 0, 64)
    per_rank = 64 // ranks
    parts = [sampler.batch(2, r * per_rank, per_rank) for r in range(ranks)]
    assert np.array_equal(np.concatenate(parts), whole)


def test_random_window_starts_cover_the_range_uniformly():
    sampler = RandomWindows(DATA, 1000, seed=9)
    starts = np.concatenate([sampler.starts(s, 0, 4096) for s in range(4)])
    assert starts.min() >= 0 and starts.max() <= DATA.size - 1000
    counts = np.bincount(starts * 10 // (DATA.size - 999), minlength=10)
    assert counts.min() > 0.8 * starts.size / 10


def nano_egg_window(data, streams, tokens, epoch):
    """nano-egg's layout: reshape into (S, segments*T + 1), window (e mod segments)*T, T + 1 long."""
    segments = (len(data) - streams) // (tokens * streams)
    length = segments * tokens + 1
    table = np.asarray(data[:streams * length]).reshape(streams, length)
    offset = (epoch % segments) * tokens
    return table[:, offset:offset + tokens + 1]


@pytest.mark.parametrize("epoch", [0, 1, 7, 1000])
def test_streams_match_the_nano_egg_layout(epoch):
    sampler = ContiguousStreams(DATA, n_streams=8, tokens=100)
    assert np.array_equal(sampler.batch(epoch, 0, 8), nano_egg_window(DATA, 8, 100, epoch))


def test_streams_continue_across_epochs_and_wrap():
    sampler = ContiguousStreams(DATA, n_streams=4, tokens=50)
    a, b = sampler.batch(3, 0, 4), sampler.batch(4, 0, 4)
    assert np.array_equal(a[:, -1], b[:, 0])  # the last target is the next window's first input
    assert np.array_equal(sampler.batch(sampler.segments, 0, 4), sampler.batch(0, 0, 4))


def test_members_share_streams_and_slices_agree():
    sampler = ContiguousStreams(DATA, n_streams=4, tokens=20)
    whole = sampler.member_batch(2, 0, 16, group_size=4)
    assert np.array_equal(whole[4:8], np.repeat(sampler.batch(2, 1, 1), 4, axis=0))
    for first, count in [(0, 3), (3, 6), (9, 7), (15, 1)]:
        assert np.array_equal(sampler.member_batch(2, first, count, group_size=4), whole[first:first + count])


def test_tbptt_chunks_overlap_by_one_byte_and_skip_nothing():
    windows = RandomWindows(DATA, 4 * 16 + 1, seed=0).batch(0, 0, 3)
    chunks = tbptt_chunks(windows, 16)
    assert len(chunks) == 4 and all(c.shape == (3, 17) for c in chunks)
    for left, right in zip(chunks, chunks[1:]):
        assert np.array_equal(left[:, -1], right[:, 0])
    inputs = np.concatenate([c[:, :-1] for c in chunks], axis=1)
    targets = np.concatenate([c[:, 1:] for c in chunks], axis=1)
    assert np.array_equal(inputs, windows[:, :-1]) and np.array_equal(targets, windows[:, 1:])


def test_bad_sampler_sizes():
    with pytest.raises(BadInput, match="shorter than one window"):
        RandomWindows(DATA[:10], 11, seed=0)
    with pytest.raises(BadInput, match="shorter than one window of 101 bytes for each of 300 streams"):
        ContiguousStreams(DATA, n_streams=300, tokens=100)
    with pytest.raises(BadInput, match="whole number"):
        tbptt_chunks(np.zeros((2, 50), np.uint8), 16)
    with pytest.raises(BadInput, match="positive"):
        tbptt_chunks(np.zeros((2, 50), np.uint8), 0)
