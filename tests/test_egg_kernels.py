"""EGG population kernels: NumPy reference, CPU twin and CUDA kernel (simulator) are bit-identical,
including saturated inputs, odd first members, unperturbed runs and sizes off the tile grid."""

import numpy as np
import pytest

from eggnog.kernels import egg_ops, int_matmul
from eggnog.kernels.backend import Backend, to_host

SIM = Backend("cuda", simulated=True)
RNG = np.random.default_rng(7)


def int8(shape, scale=16):
    return np.clip(np.rint(RNG.normal(0, scale, shape)), -127, 127).astype(np.int8)


def three_ways(name, *args, **kwargs):
    ref = getattr(egg_ops, "reference_" + name)(*args, **kwargs)
    cpu = getattr(egg_ops, "cpu_" + name)(*args, **kwargs)
    sim = getattr(egg_ops, "cuda_" + name)(*args, **kwargs)
    return ref, cpu, sim


def same(ref, *others):
    refs = ref if isinstance(ref, tuple) else (ref,)
    for other in others:
        others_t = other if isinstance(other, tuple) else (other,)
        for a, b in zip(refs, others_t):
            assert np.array_equal(a, to_host(b))


CASES = [(5, 40, 19, 3, True, 16), (4, 64, 16, 0, True, 127), (3, 17, 33, 8, False, 40)]


@pytest.mark.parametrize("members,d_in,d_out,first,perturbed,scale", CASES)
def test_perturbed_matmul(members, d_in, d_out, first, perturbed, scale):
    x, w = int8((members, d_in), scale), int8((d_out, d_in), scale)
    ref = int_matmul.reference(x, w, 4242, first, 4, perturbed)
    same(ref, int_matmul.cpu(x, w, 4242, first, 4, perturbed), int_matmul.cuda_launch(x, w, 4242, first, 4, perturbed))
    if scale == 127:
        assert np.abs(ref).max() == 127  # saturation exercised


def test_perturbation_is_antithetic_and_rank_one():
    x = np.repeat(int8((1, 64)), 4, axis=0)  # the same input for two pairs
    w = int8((32, 64))
    sigma_shift = 0  # a large perturbation, so the rank-1 term survives the division
    plus, minus = int_matmul.reference(x, w, 9, 0, sigma_shift)[[0, 1]].astype(int)
    base = int_matmul.reference(x, w, 9, 0, sigma_shift, perturbed=False)[0].astype(int)
    assert not np.array_equal(plus, base) and not np.array_equal(minus, base)
    assert np.corrcoef(plus - base, base - minus)[0, 1] > 0.9
    other_pair = int_matmul.reference(x, w, 9, 0, sigma_shift)[2]
    assert not np.array_equal(other_pair, plus)


@pytest.mark.parametrize("first,perturbed", [(0, True), (3, True), (2, False)])
def test_perturbed_vector(first, perturbed):
    theta = int8(37, 40)
    theta[:2] = [127, -127]
    same(*three_ways("vector", theta, 77, first, 5, 2, perturbed))


@pytest.mark.parametrize("first,perturbed", [(0, True), (5, True), (1, False)])
def test_perturbed_embedding(first, perturbed):
    table = int8((256, 24), 40)
    tokens = np.array([0, 255, 7, 7, 100], dtype=np.uint8)
    same(*three_ways("embedding", tokens, table, 31, first, 3, perturbed))


def test_l1_norm_including_quiet_rows():
    x, w = int8((6, 40)), int8((6, 40))
    x[1] = 0  # mean |x| < 1: nano-egg's divide-by-zero row (-1 where x*w == 0, else -2)
    x[2] = 0
    x[2, :5] = 3
    x[3] = 127
    ref, cpu, sim = three_ways("l1_norm", x, w)
    assert np.all(ref[1] == -1) and set(np.unique(ref[2])) <= {-1, -2}
    same(ref, cpu, sim)


def test_gru_gates_and_residual():
    a, b, c, s = (int8((4, 33), 60) for _ in range(4))
    s[0] = 127
    same(*three_ways("gru_forget", a, b, c, s))
    f, _ = egg_ops.reference_gru_forget(a, b, c, s)
    same(*three_ways("gru_output", a, b, c, f, s))
    same(*three_ways("clip_add", a, b))


def test_state_reset_where_input_is_zero():
    tokens = np.array([0, 5, 0, 9], dtype=np.uint8)
    base = int8((4, 10))
    states = [base.copy() for _ in range(3)]
    egg_ops.reference_reset(states[0], tokens)
    egg_ops.cpu_reset(states[1], tokens)
    device = SIM.to_device(states[2])
    egg_ops.cuda_reset(device, tokens)
    states[2] = to_host(device)
    assert np.all(states[0][[0, 2]] == 0) and np.any(states[0][1] != 0)
    same(states[0], states[1], states[2])
