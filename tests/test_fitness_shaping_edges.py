"""Fitness shaping at its edges: the population split accepted exactly at its limits and refused just past
them, z-scores clipped to +-127 (never -128), the d-eggs loss proxy's scale, the ternary range check, and
the coordinator's chunk shaping where the mean filter and the adaptive threshold change a sign."""

import numpy as np
import pytest

from eggnog.evolution.coordinator.chunk_shaping import chunk_mean_filter, ternary_fitness
from eggnog.evolution.fitness import check_population, deggs_proxy, pack_ternary, pair_zscores, unpack_ternary
from eggnog.runtime.errors import BadInput


@pytest.mark.parametrize("population, group_size, ranks", [
    (2, 2, 1), (4, 4, 1), (8, 4, 2), (12, 2, 2), (16, 4, 4), (24, 6, 3)])
def test_populations_at_the_limits_are_accepted(population, group_size, ranks):
    check_population(population, group_size, ranks)


@pytest.mark.parametrize("population, group_size, ranks, says", [
    (4, 0, 1, "group size must be even and at least 2"),
    (3, 1, 1, "group size must be even and at least 2"),
    (6, 3, 1, "group size must be even and at least 2"),
    (2, 4, 1, "positive multiple of the group size 4"),
    (6, 4, 1, "positive multiple of the group size 4"),
    (8, 2, 3, "3 equal slices of whole antithetic pairs; use a multiple of 6"),
    (6, 2, 2, "2 equal slices of whole antithetic pairs; use a multiple of 4"),
])
def test_populations_past_the_limits_are_refused_with_the_fix(population, group_size, ranks, says):
    with pytest.raises(BadInput, match=says):
        check_population(population, group_size, ranks)


def test_the_deggs_proxy_is_its_sum_over_sixteen_per_token():
    assert deggs_proxy(320, 10) == 2.0
    assert deggs_proxy(-48, 3) == -1.0


def test_zscores_at_one_standard_deviation_and_at_the_clip():
    np.testing.assert_array_equal(pair_zscores([1, 0, 0, 1]), [16, -16])  # differences +-1: std exactly 1
    low = pair_zscores([-100, 0] + [0, 0] * 99)  # one pair far below: z = -161, clipped to -127
    high = pair_zscores([100, 0] + [0, 0] * 99)
    assert low[0] == -127 and high[0] == 127 and not low[1:].any()


def test_ternary_values_outside_minus_one_to_one_are_refused():
    for bad in ([-2], [2], [0, 1, -3]):
        with pytest.raises(ValueError, match="values in"):
            pack_ternary(bad)
    values = np.array([-1, 0, 1] * 4, np.int8)
    np.testing.assert_array_equal(unpack_ternary(pack_ternary(values), values.size), values)


def test_the_chunk_mean_filter_shifts_every_difference_by_the_truncated_mean_power():
    # mean 10: shift trunc(10^1.2) = 15; mean -10: -15; mean 0: none
    np.testing.assert_array_equal(chunk_mean_filter(np.array([4, 16])), [19, 31])
    np.testing.assert_array_equal(chunk_mean_filter(np.array([-4, -16])), [-19, -31])
    np.testing.assert_array_equal(chunk_mean_filter(np.array([3, -3])), [3, -3])
    np.testing.assert_array_equal(chunk_mean_filter(np.array([], np.int64)), [])


def test_the_mean_filter_can_flip_a_pair_that_disagrees_with_the_chunk():
    scores = [0, 12, 0, -2, 0, -2, 0, -2]  # differences -12, 2, 2, 2: mean -1.5, shift trunc(-1.63) = -1
    np.testing.assert_array_equal(ternary_fitness(scores), [-1, 1, 1, 1])
    np.testing.assert_array_equal(ternary_fitness(scores, mean_filter=True), [-1, 1, 1, 1])
    scores = [0, 40, 0, -2, 0, -2, 0, -2]  # differences -40, 2, 2, 2: mean -8.5, shift -13 flips the 2s
    np.testing.assert_array_equal(ternary_fitness(scores, mean_filter=True), [-1, -1, -1, -1])
    np.testing.assert_array_equal(ternary_fitness(scores), [-1, 1, 1, 1])  # the filter is off unless asked


def test_the_adaptive_threshold_zeroes_differences_under_a_tenth_of_the_mean_magnitude():
    scores = [100, 0, 9, 0, 10, 0, -120, 0]  # |d| mean 59.75: threshold 5.975
    np.testing.assert_array_equal(ternary_fitness(scores, adaptive_threshold=True), [1, 1, 1, -1])
    scores = [100, 0, 2, 0, 0, 2, 90, 0]  # |d| mean 48.5: 2 and -2 fall under 4.85
    np.testing.assert_array_equal(ternary_fitness(scores, adaptive_threshold=True), [1, 0, 0, 1])
    np.testing.assert_array_equal(ternary_fitness(scores), [1, 1, -1, 1])
    scores = [38, 0, 2, 0, 0, 0, 40, 0]  # |d| mean 20: a difference of exactly 2.0 is kept
    np.testing.assert_array_equal(ternary_fitness(scores, adaptive_threshold=True), [1, 1, 0, 1])
    assert ternary_fitness([], adaptive_threshold=True).size == 0
