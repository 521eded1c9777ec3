"""Counter-based noise (reference = twin = kernel is tests/test_kernel_ops.py): the hash matches its
specification, known answers are pinned, the streams look random (moments, chi-square, no
correlation between neighbouring keys) and any slice is generated on its own."""

import numpy as np
import pytest

from eggnog.kernels.noise import reference, scalar_math, streams
from eggnog.kernels.noise.streams import KINDS, generate

M32 = 0xFFFFFFFF


def fmix32_spec(h):
    """MurmurHash3's fmix32 on Python integers: the third, independent implementation."""
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M32
    return h ^ (h >> 16)


def bits_spec(key, index):
    return fmix32_spec(fmix32_spec((index + key[0]) & M32) ^ key[1])


EDGE_WORDS = [0, 1, 2, 0x7FFFFFFF, 0x80000000, 0xDEADBEEF, M32 - 1, M32]


@pytest.mark.parametrize("word", EDGE_WORDS)
def test_fmix32_matches_spec_on_every_implementation(word):
    expected = fmix32_spec(word)
    assert int(reference.fmix32(np.uint64(word))) == expected
    assert streams.cpu_fmix32(word) == expected
    assert int(streams.gpu_fmix32(word)) == expected  # simulator: the device function runs as Python


def test_known_answers_are_pinned():
    # Changing the noise definition silently changes every run and every checkpoint's meaning.
    key = scalar_math.stream_key(0, 0, 0, 0)
    assert key == (3977366720, 2918576263)
    assert scalar_math.stream_key(2**64 - 1, 2**32 - 1, 7, 3) == (4019943470, 3067140915)
    assert reference.bits(key, 0, 4).tolist() == [745207200, 2226087357, 2284148512, 4046112275]
    assert [bits_spec(key, i) for i in range(4)] == [745207200, 2226087357, 2284148512, 4046112275]
    assert generate("gaussian_int8", key, 0, 8, backend="numpy").tolist() == [5, 9, -24, -1, 26, 6, -9, 19]
    assert generate("uniform_int8", key, 0, 8, k=15, backend="numpy").tolist() == [-10, 1, 1, 14, 6, -6, -14, 7]
    assert generate("rademacher_int8", key, 0, 8, backend="numpy").tolist() == [1, -1, -1, -1, -1, 1, 1, -1]


def test_bits_match_python_integer_spec_at_stream_end():
    key = scalar_math.stream_key(9, 9, 9, 9)
    start = 2**32 - 5
    assert reference.bits(key, start, 5).tolist() == [bits_spec(key, start + i) for i in range(5)]


@pytest.mark.parametrize("kind", KINDS)
def test_any_slice_equals_the_same_part_of_the_whole(kind):
    key = scalar_math.stream_key(3, 1, 4, 1)
    whole = generate(kind, key, 0, 50_000, backend="cpu")
    for start, count in [(0, 1), (17, 1000), (49_000, 1000), (31_337, 0)]:
        assert np.array_equal(generate(kind, key, start, count, backend="cpu"), whole[start:start + count])


N = 1 << 20


def test_uniform_int8_chi_square_and_moments():
    key = scalar_math.stream_key(11, 0, 0, 0)
    for k in (1, 15, 127):
        x = generate("uniform_int8", key, 0, N, k=k, backend="cpu").astype(np.int64)
        assert x.min() == -k and x.max() == k
        counts = np.bincount(x + k, minlength=2 * k + 1)
        expected = N / (2 * k + 1)
        chi2 = float(((counts - expected) ** 2 / expected).sum())
        df = 2 * k
        assert chi2 < df + 6 * np.sqrt(2 * df) + 10, (k, chi2)
        assert abs(x.mean()) < 6 * np.sqrt(k * (k + 1) / 3 / N)
        assert abs(x.var() / (k * (k + 1) / 3) - 1) < 0.01


def test_raw_bits_bytes_are_uniform():
    b = reference.bits(scalar_math.stream_key(12, 0, 0, 0), 0, N)
    for shift in (0, 8, 16, 24):
        counts = np.bincount(((b >> np.uint64(shift)) & np.uint64(0xFF)).astype(np.int64), minlength=256)
        chi2 = float(((counts - N / 256) ** 2 / (N / 256)).sum())
        assert chi2 < 255 + 6 * np.sqrt(510), (shift, chi2)


def test_gaussian_int8_is_16_scaled_approximately_normal():
    x = generate("gaussian_int8", scalar_math.stream_key(13, 0, 0, 0), 0, N, backend="cpu").astype(np.float64)
    assert abs(x.mean()) < 0.1
    assert 15.9 < x.std() < 16.1
    assert abs(((x - x.mean()) ** 3).mean() / x.std() ** 3) < 0.02
    assert 2.6 < ((x - x.mean()) ** 4).mean() / x.var() ** 2 < 3.0  # Irwin-Hall of 4: 2.7
    assert np.abs(x).max() <= 55


def test_rademacher_is_balanced_signs():
    x = generate("rademacher_int8", scalar_math.stream_key(14, 0, 0, 0), 0, N, backend="cpu")
    assert set(np.unique(x).tolist()) == {-1, 1}
    assert abs(x.astype(np.float64).mean()) < 6 / np.sqrt(N)


def test_normal_float32_moments():
    x = generate("normal_float32", scalar_math.stream_key(15, 0, 0, 0), 0, N, backend="cpu").astype(np.float64)
    assert abs(x.mean()) < 6 / np.sqrt(N)
    assert abs(x.var() - 1) < 6 * np.sqrt(2 / N)
    assert abs((x**3).mean()) < 6 * np.sqrt(15 / N)
    assert abs((x**4).mean() - 3) < 6 * np.sqrt(96 / N)
    assert abs((np.abs(x) < 1).mean() - 0.682689) < 0.003


NEIGHBOURS = [
    ((20, 5, 6, 7), (21, 5, 6, 7)),
    ((20, 5, 6, 7), (20, 6, 6, 7)),
    ((20, 5, 6, 7), (20, 5, 7, 7)),
    ((20, 5, 6, 7), (20, 5, 6, 8)),
    ((0, 0, 0, 0), (1 << 32, 0, 0, 0)),
]


@pytest.mark.parametrize("a,b", NEIGHBOURS)
def test_neighbouring_keys_are_uncorrelated(a, b):
    n = 1 << 18
    x = generate("normal_float32", scalar_math.stream_key(*a), 0, n + 4, backend="cpu").astype(np.float64)
    y = generate("normal_float32", scalar_math.stream_key(*b), 0, n + 4, backend="cpu").astype(np.float64)
    bound = 6 / np.sqrt(n)
    for lag in range(-2, 3):  # also no shifted copies of one stream in the other
        xs, ys = x[2:2 + n], y[2 + lag:2 + lag + n]
        assert abs(np.corrcoef(xs, ys)[0, 1]) < bound, lag
    wa = reference.bits(scalar_math.stream_key(*a), 0, n)
    wb = reference.bits(scalar_math.stream_key(*b), 0, n)
    assert np.count_nonzero(wa == wb) <= 2


def test_neighbouring_elements_are_uncorrelated():
    x = generate("normal_float32", scalar_math.stream_key(30, 0, 0, 0), 0, N, backend="cpu").astype(np.float64)
    for lag in (1, 2, 256):
        assert abs(np.corrcoef(x[:-lag], x[lag:])[0, 1]) < 6 / np.sqrt(N)


def test_bad_arguments_raise():
    key = scalar_math.stream_key(0, 0, 0, 0)
    with pytest.raises(ValueError, match="2\\^32"):
        generate("gaussian_int8", key, 2**32 - 1, 2, backend="cpu")
    with pytest.raises(ValueError, match="unknown noise kind"):
        generate("poisson", key, 0, 1)
    with pytest.raises(ValueError, match="k <= 127"):
        generate("uniform_int8", key, 0, 1, k=128)
    with pytest.raises(ValueError, match="member"):
        scalar_math.stream_key(0, 0, 0, -1)
    with pytest.raises(ValueError, match="seed"):
        scalar_math.stream_key(2**64, 0, 0, 0)
