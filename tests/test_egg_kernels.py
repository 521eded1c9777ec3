"""What the EGG population kernels mean (reference = twin = kernel is tests/test_kernel_ops.py):
antithetic rank-1 perturbations, int8 saturation, nano-egg's quiet L1-norm rows, state resets."""

import numpy as np

from eggnog.kernels.egg.int_matmul import reference_int_matmul
from eggnog.kernels.egg.member_ops import (
    reference_egg_embedding,
    reference_egg_l1_norm,
    reference_egg_reset,
    reference_egg_vector,
)
from eggnog.kernels.noise.reference import gaussian_rows

RNG = np.random.default_rng(7)


def int8(shape, scale=16):
    return np.clip(np.rint(RNG.normal(0, scale, shape)), -127, 127).astype(np.int8)


def test_matmul_perturbation_is_antithetic_and_rank_one():
    w = int8((32, 64))
    noise = gaussian_rows(9, [0], 0, 64 + 32)[0]  # pair 0: B = noise[:64], A = noise[64:]
    x = np.repeat((4 * np.sign(noise[:64]))[None].astype(np.int8), 4, axis=0)  # x . B large, for both pairs
    out = reference_int_matmul(x, w, 9, 0, 0).astype(int)
    base = reference_int_matmul(x, w, 9, 0, 0, perturbed=False)[0].astype(int)
    plus, minus = out[0] - base, base - out[1]
    assert np.corrcoef(plus, noise[64:])[0, 1] > 0.95 and np.corrcoef(minus, noise[64:])[0, 1] > 0.95
    assert np.all(np.abs(plus - minus) <= 1)  # floor division: mirror images up to one unit
    assert not np.array_equal(out[2], out[0])  # pair 1 draws its own noise


def test_matmul_saturates_at_127():
    x = np.full((2, 64), 127, np.int8)
    w = np.stack([np.full(64, 127, np.int8), np.full(64, -127, np.int8), np.zeros(64, np.int8)])
    assert reference_int_matmul(x, w, 0, 0, 4, perturbed=False).tolist() == [[127, -127, 0]] * 2
    assert np.abs(reference_int_matmul(x, w, 0, 0, 0)[:, :2]).min() == 127  # the perturbation cannot leave it


def test_vector_and_embedding_members_of_a_pair_are_mirror_images():
    """Member 2p adds d >> s and member 2p + 1 adds (-d) >> s: floor shifts differ by at most one."""
    theta = int8(50, 8)
    vectors = reference_egg_vector(theta, 77, 0, 4, 2).astype(int)  # |theta| + 55 * 55 >> 6 stays unclipped
    assert np.all(reference_egg_vector(theta, 77, 0, 4, 2, perturbed=False) == theta)
    table = int8((256, 20), 8)
    tokens = np.array([9, 9, 200, 200], dtype=np.uint8)
    rows = reference_egg_embedding(tokens, table, 31, 0, 2).astype(int)
    for out, base in ((vectors, np.broadcast_to(theta, (4, 50))), (rows, table[tokens])):
        delta = out - base
        assert np.any(delta[0] != 0) and not np.array_equal(delta[0], delta[2])  # pairs differ
        assert set(np.unique(delta[0] + delta[1])) <= {-1, 0} and set(np.unique(delta[2] + delta[3])) <= {-1, 0}


def test_l1_norm_quiet_rows_follow_nano_egg():
    x, w = int8((4, 40)), int8((4, 40))
    w[:2, :3] = 0
    x[1] = 0  # mean |x| < 1: nano-egg's divide-by-zero row (-1 where x*w == 0, else -2)
    x[2] = 0
    x[2, :5] = 3
    x[3] = 127  # mean |x| = 127: x * w / 127 = w
    out = reference_egg_l1_norm(x, w)
    assert np.all(out[1] == -1)
    assert np.array_equal(out[2], np.where(x[2].astype(int) * w[2] == 0, -1, -2))
    assert np.array_equal(out[3], w[3])


def test_state_reset_where_input_is_zero():
    tokens = np.array([0, 5, 0, 9], dtype=np.uint8)
    state = int8((4, 10), 40)
    before = state.copy()
    reference_egg_reset(state, tokens)
    assert np.all(state[[0, 2]] == 0) and np.array_equal(state[[1, 3]], before[[1, 3]])
