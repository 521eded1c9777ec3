"""Perturbation kernels of CD-RGE beyond reference = twin = simulator (tests/test_kernel_ops.py): z is
the stream of noise.streams; z statistics; rademacher perturbations are bit-identical on every backend; the fp16 copy
and the CPU's float16 scratch; the grid-stride loop; apply_probes_ is the fp32 probe-order sum; what
restores θ exactly and what only to 1-2 ulps; bad input is refused.

The simulator computes without FMA contraction, as the CPU twin does; a real GPU fuses θ + α z.
"""

import numpy as np
import pytest

from eggnog.kernels.core.cuda_api import cuda
from eggnog.kernels.core.placement import to_host
from eggnog.kernels.noise import perturb, streams
from eggnog.kernels.noise.perturb import DISTRIBUTIONS
from eggnog.kernels.noise.scalar_math import stream_key

EPS = float(np.finfo(np.float32).eps)
ULPS = 6  # roundings of θ + α z against the exact value, in eps of max(|θ|, |α z|)
KEY = stream_key(2024, 3, 1, 7)
N = 300  # not a multiple of the 256-thread block: two blocks, the second partly idle
STARTS = [123_456_789, 2**32 - N]


def keys_of(count, epoch=1):
    return np.array([stream_key(2024, 3, epoch, m) for m in range(count)], np.int64)


def theta_of(n, seed=0):
    """Values over many magnitudes, both signs, a few exact zeros."""
    g = np.random.default_rng(seed)
    theta = g.standard_normal(n) * 2.0 ** g.uniform(-14, 3, n)
    theta[::97] = 0.0
    return theta.astype(np.float32)


def ulp(x):
    return np.spacing(np.abs(np.asarray(x, np.float32)))


def sim_perturb(theta, *args):
    d = cuda.to_device(theta)
    perturb.cuda_perturb_(d, *args)
    return d.copy_to_host()


def sim_copy(theta, dtype, *args):
    d, out = cuda.to_device(theta), cuda.device_array(theta.size, dtype)
    perturb.cuda_perturbed_copy(d, out, *args)
    assert np.array_equal(d.copy_to_host(), theta)
    return out.copy_to_host()


def sim_apply(theta, *args):
    d = cuda.to_device(theta)
    perturb.cuda_apply_probes_(d, *args)
    return d.copy_to_host()


# ---- z --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("start", STARTS)
def test_noise_is_the_rng_stream(start):
    normal = perturb.cpu_noise(KEY, N, "normal", start)
    assert np.array_equal(normal, streams.generate("normal_float32", KEY, start, N, backend="cpu"))
    sim = to_host(perturb.cuda_noise(KEY, N, "normal", start))
    assert np.array_equal(sim, to_host(streams.generate("normal_float32", KEY, start, N, backend="cuda")))
    rademacher = perturb.cpu_noise(KEY, N, "rademacher", start)
    assert np.array_equal(rademacher, streams.generate("rademacher_int8", KEY, start, N, backend="numpy"))


def test_noise_statistics():
    n = 400_000
    rad = perturb.cpu_noise(KEY, n, "rademacher")
    assert set(np.unique(rad)) == {-1.0, 1.0} and abs(rad.mean()) < 0.01
    uni = perturb.cpu_noise(KEY, n, "uniform", 77)
    assert uni.min() >= -1 and uni.max() < 1 and uni.min() < -0.999 and uni.max() > 0.999
    assert abs(uni.mean()) < 0.005 and abs(uni.var() - 1 / 3) < 0.005
    assert np.array_equal(uni * 2**23, np.round(uni * 2**23))  # multiples of 2^-23: exact in fp32
    nor = perturb.cpu_noise(KEY, n, "normal", 5)
    assert abs(nor.mean()) < 0.01 and abs(nor.std() - 1) < 0.01
    # different keys give unrelated directions
    other = perturb.cpu_noise(stream_key(2024, 3, 1, 8), n, "normal", 5)
    assert abs(np.corrcoef(nor, other)[0, 1]) < 0.01


# ---- perturb_ and perturbed_copy -----------------------------------------------------------------------

@pytest.mark.parametrize("start", STARTS)
def test_rademacher_perturbation_is_bit_identical_everywhere(start):
    """θ ± α rounds once on every backend; uniform z is exact too, so twin and simulator agree bitwise."""
    theta, alpha = theta_of(N, start % 7), 1e-3
    ref = perturb.reference_perturb_(theta.copy(), KEY, alpha, "rademacher", start)
    cpu = theta.copy()
    assert perturb.cpu_perturb_(cpu, KEY, alpha, "rademacher", start) is cpu
    assert np.array_equal(cpu, ref) and np.array_equal(sim_perturb(theta, KEY, alpha, "rademacher", start), ref)
    assert not np.array_equal(cpu, theta)
    uniform = perturb.cpu_perturb_(theta.copy(), KEY, alpha, "uniform", start)
    assert np.array_equal(sim_perturb(theta, KEY, alpha, "uniform", start), uniform)


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_half_copy_is_the_float32_copy_rounded(distribution):
    start, alpha = STARTS[0], -0.37
    theta = theta_of(N, 3)
    before = theta.copy()
    for copy in (lambda dtype: perturb.cpu_perturbed_copy(theta, np.empty(N, dtype), KEY, alpha, distribution, start),
                 lambda dtype: sim_copy(theta, dtype, KEY, alpha, distribution, start)):
        full, half = copy(np.float32), copy(np.float16)
        assert half.dtype == np.float16 and np.array_equal(half, full.astype(np.float16))
    assert np.array_equal(theta, before)
    assert np.array_equal(perturb.cpu_perturbed_copy(theta, np.empty(N, np.float32), KEY, alpha, distribution, start),
                          perturb.cpu_perturb_(theta.copy(), KEY, alpha, distribution, start))


def test_cpu_half_copy_crosses_scratch_chunks(monkeypatch):
    monkeypatch.setattr(perturb, "HALF_CHUNK", 300)
    theta = theta_of(N, 4)
    half = perturb.cpu_perturbed_copy(theta, np.empty(N, np.float16), KEY, 0.5, "normal", 9)
    assert np.array_equal(half, perturb.cpu_perturb_(theta.copy(), KEY, 0.5, "normal", 9).astype(np.float16))


def test_grid_stride_covers_any_size(monkeypatch):
    monkeypatch.setattr(perturb, "MAX_BLOCKS", 1)  # 256 threads for 700 elements
    n, theta = 700, theta_of(700, 5)
    keys, coefs = keys_of(3), np.float32([0.5, -0.25, 2.0])
    assert np.array_equal(to_host(perturb.cuda_noise(KEY, n, "uniform", 3)), perturb.cpu_noise(KEY, n, "uniform", 3))
    assert np.array_equal(sim_perturb(theta, KEY, 0.125, "rademacher", 3),
                          perturb.cpu_perturb_(theta.copy(), KEY, 0.125, "rademacher", 3))
    assert np.array_equal(sim_apply(theta, keys, coefs, "rademacher", 3),
                          perturb.cpu_apply_probes_(theta.copy(), keys, coefs, "rademacher", 3))


# ---- apply_probes_ --------------------------------------------------------------------------------------

@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_apply_probes_is_the_sum_of_the_perturbations(distribution):
    start, theta = STARTS[1], theta_of(N, 6)
    keys, coefs = keys_of(4), np.float32([3e-3, -1e-2, 0.25, -0.125])
    # the simulator's z equals the twin's except for normal (checked above), so only normal launches noise
    noise = {"cpu": perturb.cpu_noise,
             "sim": (lambda *a: to_host(perturb.cuda_noise(*a))) if distribution == "normal" else perturb.cpu_noise}
    fused = {"cpu": perturb.cpu_apply_probes_(theta.copy(), keys, coefs, distribution, start),
             "sim": sim_apply(theta, keys, coefs, distribution, start)}
    grad = {"cpu": perturb.cpu_apply_probes_(np.zeros(N, np.float32), keys, coefs, distribution, start),
            "sim": sim_apply(np.zeros(N, np.float32), keys, coefs, distribution, start)}
    for backend in ("cpu", "sim"):
        z = [noise[backend](tuple(k), N, distribution, start) for k in keys]
        # on zeros: the gradient estimate Σ c_i z_i in fp32 probe order, bit for bit (no FMA off the GPU)
        s = np.zeros(N, np.float32)
        for c, zi in zip(coefs, z):
            s = s + c * zi
        assert np.array_equal(grad[backend], s), backend
        assert np.array_equal(fused[backend], theta + s), backend
        # the sequential perturbations agree to fp32 rounding
        sequential = theta.copy()
        for k, c in zip(keys, coefs):
            perturb.cpu_perturb_(sequential, tuple(k), c, distribution, start)
        mass = np.abs(theta) + sum(abs(c) * np.maximum(np.abs(zi), 1) for c, zi in zip(coefs, z))
        assert np.all(np.abs(fused[backend] - sequential) <= (len(coefs) + ULPS) * EPS * mass), backend


def test_apply_probes_takes_host_keys_on_the_device_and_no_probes():
    theta, keys, coefs = theta_of(300, 8), keys_of(2), np.float32([1.0, -1.0])
    want = perturb.cpu_apply_probes_(theta.copy(), keys, coefs, "uniform", 11)
    assert np.array_equal(sim_apply(theta, keys, [1.0, -1.0], "uniform", 11), want)
    empty = (np.zeros((0, 2), np.int64), np.zeros(0, np.float32))
    assert np.array_equal(perturb.cpu_apply_probes_(theta.copy(), *empty, "normal"), theta)
    assert np.array_equal(sim_apply(theta, *empty, "normal"), theta)


# ---- restoring θ ----------------------------------------------------------------------------------------

def test_forward_copy_leaves_the_master_bit_exact():
    master = theta_of(N, 9)
    before = master.tobytes()
    for dtype in (np.float32, np.float16):
        buf = np.empty(N, dtype)
        for member, distribution in enumerate(DISTRIBUTIONS * 3):
            for sign in (1.0, -1.0):
                perturb.cpu_perturbed_copy(master, buf, stream_key(1, 2, 3, member), sign * 1e-3, distribution)
    perturb.cpu_apply_probes_(np.zeros(N, np.float32), keys_of(3), np.float32([1, 2, 3]), "normal")  # the gradient
    assert master.tobytes() == before
    d_master = cuda.to_device(master)
    for dtype, distribution in ((np.float16, "normal"), (np.float32, "uniform")):
        perturb.cuda_perturbed_copy(d_master, cuda.device_array(N, dtype), KEY, 0.37, distribution)
    assert d_master.copy_to_host().tobytes() == before


def plus_minus_plus(perturb_, theta, key, eps, distribution):
    for a in (eps, -2 * eps, eps):
        perturb_(theta, key, a, distribution)
    return theta


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
@pytest.mark.parametrize("eps", [1e-3, 0.37, 2.0**-10])
def test_in_place_restore_is_within_two_ulps_not_exact(distribution, eps):
    """+ε, −2ε, +ε in fp32: |θ' − θ| <= 2 ulp(max(|θ|, |fl32(ε z)|)) per element; not exact in general."""
    theta = theta_of(200_000, 10)
    z = perturb.cpu_noise(KEY, theta.size, distribution)
    bound = 2 * ulp(np.maximum(np.abs(theta), np.abs(np.float32(eps) * z)))
    back = plus_minus_plus(perturb.cpu_perturb_, theta.copy(), KEY, eps, distribution)
    err = np.abs(back.astype(np.float64) - theta)
    assert np.all(err <= bound)
    if not (distribution == "rademacher" and eps == 2.0**-10):
        assert np.any(err == bound) and np.any(err > 0)  # the bound is reached: no 1-ulp statement
    if eps != 1e-3:
        return  # the simulator runs one ε per distribution
    small = theta_of(N, 11)
    d = cuda.to_device(small)
    plus_minus_plus(perturb.cuda_perturb_, d, KEY, eps, distribution)
    zs = to_host(perturb.cuda_noise(KEY, N, distribution)) if distribution == "normal" else z[:N]
    assert np.all(np.abs(d.copy_to_host().astype(np.float64) - small)
                  <= 2 * ulp(np.maximum(np.abs(small), np.abs(np.float32(eps) * zs))))


@pytest.mark.parametrize("eps", [2.0**-10, 2.0**-3])
def test_rademacher_power_of_two_restore(eps):
    """Rademacher, ε = 2^k: within 1 ulp(max(|θ|, ε)), and exact wherever ulp(θ) <= ε and θ ± ε stays
    below the next power of two above |θ|."""
    theta = theta_of(200_000, 12)
    back = plus_minus_plus(perturb.cpu_perturb_, theta.copy(), KEY, eps, "rademacher")
    err = np.abs(back.astype(np.float64) - theta)
    assert np.all(err <= ulp(np.maximum(np.abs(theta), eps)))
    mag = np.abs(theta).astype(np.float64)
    with np.errstate(divide="ignore"):
        no_crossing = (theta != 0) & (ulp(theta) <= eps) & (mag + eps < 2.0 ** (np.floor(np.log2(mag)) + 1))
    assert no_crossing.mean() > 0.1 and np.all(err[no_crossing] == 0)
    assert np.any(err[~no_crossing] > 0)
    if eps != 2.0**-10:
        return
    d = cuda.to_device(theta[:N])
    plus_minus_plus(perturb.cuda_perturb_, d, KEY, eps, "rademacher")
    assert np.array_equal(d.copy_to_host(), back[:N])


def test_magnitude_above_eps_alone_does_not_restore_exactly():
    # 1.5 + 2^-23 ± 0.5 crosses 2 with a tie in one of the steps whatever the sign: it comes back as 1.5.
    theta = np.full(64, 1.5 + 2.0**-23, np.float32)
    back = plus_minus_plus(perturb.cpu_perturb_, theta.copy(), KEY, 0.5, "rademacher")
    assert np.all(back == np.float32(1.5))


# ---- bad input -------------------------------------------------------------------------------------------

def test_bad_input_is_refused():
    theta = np.zeros(8, np.float32)
    calls = [lambda d: perturb.reference_noise(KEY, 8, d), lambda d: perturb.cpu_noise(KEY, 8, d),
             lambda d: perturb.cuda_noise(KEY, 8, d), lambda d: perturb.reference_perturb_(theta, KEY, 1.0, d),
             lambda d: perturb.cpu_perturb_(theta, KEY, 1.0, d),
             lambda d: perturb.cuda_perturb_(cuda.to_device(theta), KEY, 1.0, d),
             lambda d: perturb.cpu_perturbed_copy(theta, theta.copy(), KEY, 1.0, d),
             lambda d: perturb.cpu_apply_probes_(theta, keys_of(1), [1.0], d)]
    for call in calls:
        with pytest.raises(ValueError, match="distribution"):
            call("gaussian")
    for start in (2**32 - 7, 2**32):
        with pytest.raises(ValueError, match="2\\^32"):
            perturb.cpu_perturb_(theta, KEY, 1.0, "normal", start)
        with pytest.raises(ValueError, match="2\\^32"):
            perturb.cuda_apply_probes_(cuda.to_device(theta), keys_of(1), [1.0], "normal", start)
    with pytest.raises(ValueError, match="2\\^32"):
        perturb.cpu_noise(KEY, 2**32 + 1, "uniform")
    with pytest.raises(ValueError, match="2\\^32"):
        perturb.reference_noise(KEY, 10, "uniform", -1)
    with pytest.raises(ValueError, match="key"):
        perturb.cpu_perturb_(theta, (2**32, 0), 1.0, "normal")
    with pytest.raises(ValueError, match="coefficients"):
        perturb.cpu_apply_probes_(theta, keys_of(2), [1.0], "normal")
    with pytest.raises(ValueError, match="float32"):
        perturb.cpu_perturb_(theta.astype(np.float64), KEY, 1.0, "normal")
    with pytest.raises(ValueError, match="out"):
        perturb.cpu_perturbed_copy(theta, np.empty(8, np.float64), KEY, 1.0, "normal")
    assert np.array_equal(theta, np.zeros(8, np.float32))
