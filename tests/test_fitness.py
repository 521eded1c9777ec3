"""Fitness: antithetic signs, z-scored differences, and the ternary wire format."""

import numpy as np
import pytest

from eggnog.evolution.fitness import bits_per_byte, pack_ternary, pair_signs, pair_zscores, unpack_ternary


def test_pair_signs():
    assert pair_signs([10, 3, 3, 10, 7, 7]).tolist() == [1, -1, 0]


def test_pair_zscores_are_16_per_standard_deviation():
    scores = np.array([4, 0, 0, 4, 2, 2, 8, 0], dtype=np.int64)  # differences 4, -4, 0, 8
    d = np.array([4, -4, 0, 8], dtype=float)
    assert pair_zscores(scores).tolist() == np.rint(16 * d / d.std()).astype(int).tolist()
    assert pair_zscores([5, 5, 1, 1]).tolist() == [0, 0]


def test_bits_per_byte_is_the_negated_loglik_in_sixteenths():
    assert bits_per_byte(-16 * 300, 100) == 3.0


@pytest.mark.parametrize("trits,byte", [([0, 0, 0, 0, 0], 0), ([1, 0, 0, 0, 0], 1), ([-1, 0, 0, 0, 0], 2),
                                        ([0, 1, 0, 0, 0], 3), ([1, 0, -1, 1, 1], 127), ([-1] * 5, 242)])
def test_known_bytes(trits, byte):
    assert pack_ternary(trits).tolist() == [byte]
    assert unpack_ternary([byte], 5).tolist() == trits


def test_round_trip_with_padding():
    rng = np.random.default_rng(0)
    for n in (0, 1, 4, 5, 6, 999):
        trits = rng.integers(-1, 2, n).astype(np.int8)
        packed = pack_ternary(trits)
        assert packed.size == -(-n // 5)
        assert np.array_equal(unpack_ternary(packed, n), trits)


def test_bad_values():
    with pytest.raises(ValueError):
        pack_ternary([2])
    with pytest.raises(ValueError):
        unpack_ternary([243], 1)
