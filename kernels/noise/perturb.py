"""Perturbations of one flat float32 parameter vector θ for CD-RGE zero-order training.

A probe is a noise stream key (ka, kb) from `scalar_math.stream_key`; its direction z has one element
per parameter, z[j] drawn from stream element start + j (`start` is the offset of this slice of θ in
the whole vector, so shards of θ draw the slices of one stream):

    rademacher   z = ±1                        streams.cpu_rademacher(bits): streams' rademacher_int8
    normal       z = N(0, 1) in float32        streams.cpu_normal_f32(round1(ka, start + j), kb): exactly
                                               streams.generate("normal_float32", key) element start + j
    uniform      z ~ U[-1, 1)                  ((bits >> 8) * 2^-24) * 2 - 1: every step exact in fp32

More in docs/internals.md (kernels/noise/perturb.py)."""

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float16Array, Float32Array, Int64Array
from eggnog.kernels.core.cpu_jit import parallel_jit
from eggnog.kernels.core.cuda_api import F16_1D, F32, F32_1D, I64, I64_2D, blocks, cuda, device_function, f64, kernel
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import op, registered
from eggnog.kernels.noise import reference
from eggnog.kernels.noise.scalar_math import MASK32, TWO_POW_M24, stream_key
from eggnog.kernels.noise.streams import (
    cpu_bits_of,
    cpu_normal_f32,
    cpu_rademacher,
    cpu_round1,
    gpu_bits_of,
    gpu_normal_f32,
    gpu_rademacher,
    gpu_round1,
)

DISTRIBUTIONS = ("rademacher", "normal", "uniform")
RADEMACHER, NORMAL, UNIFORM = 0, 1, 2
_CODE = {name: code for code, name in enumerate(DISTRIBUTIONS)}

MAX_BLOCKS = 4096  # grid-stride loops cover the rest; a test lowers it to exercise the stride
HALF_CHUNK = 1 << 16  # CPU float16 copies go through a float32 scratch of this many elements
EPS = float(np.finfo(np.float32).eps)


def build_uniform(jit):
    """U[-1, 1) from 32 random bits: the top 24 bits times 2^-24, doubled, minus one. Each step is
    exact in float32 (multiples of 2^-23 below 1 in magnitude are representable)."""

    @jit
    def uniform_pm1(bits):
        u = np.float32(np.int32(bits >> 8)) * np.float32(TWO_POW_M24)
        return u * np.float32(2.0) - np.float32(1.0)

    return uniform_pm1


def build_direction(jit, round1, bits_of, rademacher, normal_f32, uniform_pm1):
    """z of stream (ka, kb) at stream index `index` for a distribution code, as float32."""

    @jit
    def direction(ka, kb, index, distribution):
        y = round1(ka, index)
        if distribution == NORMAL:
            return np.float32(normal_f32(y, kb))
        b = bits_of(y, kb)
        if distribution == RADEMACHER:
            return np.float32(rademacher(b))
        return uniform_pm1(b)

    return direction


cpu_uniform_pm1 = build_uniform(numba.njit)
gpu_uniform_pm1 = build_uniform(device_function)
cpu_direction = build_direction(numba.njit, cpu_round1, cpu_bits_of, cpu_rademacher, cpu_normal_f32, cpu_uniform_pm1)
gpu_direction = build_direction(device_function, gpu_round1, gpu_bits_of, gpu_rademacher, gpu_normal_f32,
                                gpu_uniform_pm1)


# ---- argument checks ----------------------------------------------------------------------------------

def distribution_code(distribution):
    if not isinstance(distribution, str) or distribution not in _CODE:
        raise ValueError(f"unknown distribution {distribution!r}; choose one of {', '.join(DISTRIBUTIONS)}")
    return _CODE[distribution]


def _key(key):
    if hasattr(key, "copy_to_host"):  # the registry takes a key given as a device array as it is
        key = key.copy_to_host()
    ka, kb = (int(k) for k in key)
    if not (0 <= ka <= MASK32 and 0 <= kb <= MASK32):
        raise ValueError(f"a probe key is two 32-bit words (ka, kb), got {key!r}")
    return ka, kb


def _vector(theta, name="theta"):
    if theta.ndim != 1 or theta.dtype != np.float32:
        raise ValueError(f"{name} must be a 1-D float32 array, got {theta.ndim}-D {theta.dtype}")
    return theta


def _copy_target(theta, out):
    _vector(theta)
    if out.shape != theta.shape or out.dtype not in (np.float32, np.float16):
        raise ValueError(f"out must be float32 or float16 of shape {theta.shape}, got {out.dtype} {out.shape}")


def _keys(keys, coefs):
    """Host-side keys (n, 2) int64 and coefs (n,) float32, checked."""
    keys = np.ascontiguousarray(keys, np.int64).reshape(-1, 2) if np.size(keys) else np.zeros((0, 2), np.int64)
    coefs = np.ascontiguousarray(coefs, np.float32).reshape(-1)
    if keys.shape[0] != coefs.size:
        raise ValueError(f"{keys.shape[0]} probe keys but {coefs.size} coefficients")
    if keys.size and (keys.min() < 0 or keys.max() > MASK32):
        raise ValueError("probe keys must be 32-bit words (ka, kb)")
    return keys, coefs


# ---- cases of the generated tests ---------------------------------------------------------------------
# 300 elements: two 256-thread blocks, the second partly idle; the last case of each op ends at stream
# index 2^32 - 1. Parameters span several magnitudes; α and c_i stay small enough that the fp32
# roundings (a few ulps of max(|θ|, |α z|)) fit the registered tolerances.

N = 300
STARTS = (123_456_789, 2**32 - N)


def _theta(rng, n=N):
    return (rng.standard_normal(n) * 2.0 ** rng.uniform(-6, 2, n)).astype(np.float32)


def _key_of(rng):
    return stream_key(int(rng.integers(0, 2**31)), 3, 1, int(rng.integers(0, 2**31)))


def _noise_cases(rng):
    """The key as an array first (the form the declaration checks), then as the tuple stream_key gives."""
    for d in DISTRIBUTIONS:
        for start in STARTS:
            key = _key_of(rng)
            yield np.array(key, np.int64) if d == DISTRIBUTIONS[0] else key, N, d, start
    yield _key_of(rng), 0, "normal", 0


def _perturb_cases(rng):
    for d, alpha, start in (("rademacher", 0.125, STARTS[0]), ("normal", -0.37, STARTS[0]),
                            ("uniform", 1e-3, STARTS[1])):
        yield _theta(rng), _key_of(rng), np.float32(alpha), d, start


def _perturbed_copy_cases(rng):
    for d, dtype, start in (("rademacher", np.float32, STARTS[1]), ("normal", np.float32, STARTS[0]),
                            ("uniform", np.float32, 0), ("rademacher", np.float16, STARTS[0])):
        yield _theta(rng), np.zeros(N, dtype), _key_of(rng), np.float32(-0.25), d, start


def _apply_probes_cases(rng):
    coefs = np.array([3e-3, -1e-2, 0.25, -0.125], np.float32)
    for d, start in (("rademacher", STARTS[1]), ("normal", STARTS[0]), ("uniform", 7)):
        keys = np.array([_key_of(rng) for _ in coefs], np.int64)
        yield _theta(rng), keys, coefs, d, start
    yield _theta(rng), np.zeros((0, 2), np.int64), np.zeros(0, np.float32), "normal", 0


# ---- NumPy reference ----------------------------------------------------------------------------------

# the tolerance is streams' normal_float32's; rademacher and uniform are exact
@op(cases=_noise_cases, tolerance=(4 * EPS, 4 * EPS), args={"key": "int64[2]", "count": "int", "distribution": "str",
                                                          "start": "int"})
def reference_noise(key: Int64Array | tuple[int, int], count: int, distribution: str, start: int = 0) -> Float32Array:
    """float32 (count,): a probe's direction z, elements start .. start + count - 1 of the noise stream
    `key`, drawn as `distribution` (the module docstring): "rademacher" (+-1), "normal" (N(0, 1)) or
    "uniform" (U[-1, 1)).

    key: the stream's two 32-bit words (ka, kb), a tuple or an int64 array, from
    `scalar_math.stream_key` (CD-RGE: zorn/rge/trainer.probe_keys). start: the offset of this slice in
    the whole parameter vector, so shards of θ draw the slices of one stream; start + count <= 2^32."""
    code = distribution_code(distribution)
    key = _key(key)
    reference.check_slice(start, count)
    if code == NORMAL:
        return reference.normal_float32(key, start, count)
    if code == RADEMACHER:
        return reference.rademacher_int8(key, start, count).astype(np.float32)
    b = reference.bits(key, start, count)
    return ((b >> np.uint64(8)).astype(np.float64) * 2.0**-24 * 2.0 - 1.0).astype(np.float32)


def _shifted(theta, key, alpha, distribution, start):
    """fl32(θ + α z), the sum in float64."""
    z = reference_noise(key, theta.size, distribution, start)
    return (f64(theta) + float(np.float32(alpha)) * f64(z)).astype(np.float32)


@op(cases=_perturb_cases, tolerance=(6 * EPS, 6 * EPS), args={"theta": "float32[n]", "key": "int64[2]",
                                                             "alpha": "float", "distribution": "str", "start": "int"})
def reference_perturb_(theta: Float32Array, key: Int64Array, alpha: float, distribution: str,
                       start: int = 0) -> Float32Array:
    """θ ← fl32(θ + α z) in place (the sum in float64); returns θ (float32 (n,)).

    theta: the flat parameter vector, or a slice of it. key: the probe's stream key (ka, kb), a tuple
    or an int64 array (`scalar_math.stream_key`). alpha: the step along z (rounded to float32 first;
    CD-RGE: +-eps). distribution: "rademacher", "normal" or "uniform" (`noise`). start: the offset of
    theta in the whole vector: z[j] is stream element start + j."""
    _vector(theta)
    theta[...] = _shifted(theta, key, alpha, distribution, start)
    return theta


@op(cases=_perturbed_copy_cases, tolerance=(6 * EPS, 6 * EPS),
    args={"theta": "float32[n]", "out": "float32/float16[n]", "key": "int64[2]", "alpha": "float",
          "distribution": "str", "start": "int"})
def reference_perturbed_copy(theta: Float32Array, out: Float32Array | Float16Array, key: Int64Array, alpha: float,
                             distribution: str, start: int = 0) -> Float32Array | Float16Array:
    """out ← fl32(θ + α z) (the sum in float64), then rounded to out's dtype; θ untouched; returns out.

    theta: the parameters. out: the work copy written (float16 for a half-precision evaluation). key:
    the probe's stream key (ka, kb), a tuple or an int64 array (`scalar_math.stream_key`). alpha: the
    step along z (CD-RGE: +-eps). distribution: "rademacher", "normal" or "uniform" (`noise`). start:
    the offset of theta in the whole vector: z[j] is stream element start + j."""
    _copy_target(theta, out)
    out[...] = _shifted(theta, key, alpha, distribution, start)
    return out


@op(cases=_apply_probes_cases, tolerance=(10 * EPS, 10 * EPS),  # (probes + 6) eps
    args={"theta": "float32[n]", "keys": "int64[probes, 2]", "coefs": "float32[probes]", "distribution": "str",
          "start": "int"})
def reference_apply_probes_(theta: Float32Array, keys: Int64Array, coefs: Float32Array, distribution: str,
                            start: int = 0) -> Float32Array:
    """θ ← fl32(θ + Σ_i c_i z_i) in place, the sum in float64; returns θ (float32 (n,)). On zeros this
    builds CD-RGE's gradient estimate; with c_i = -lr times a probe's coefficient, its update.

    keys: probe i's stream key (ka, kb) in row i (zorn/rge/trainer.probe_keys); coefs: c_i, one per
    probe (none: θ unchanged). distribution: "rademacher", "normal" or "uniform" (`noise`). start: the
    offset of theta in the whole vector: z_i[j] is stream element start + j of key i."""
    _vector(theta)
    keys, coefs = _keys(keys, coefs)
    acc = f64(theta).copy()
    for (ka, kb), c in zip(keys, coefs):
        acc += float(c) * f64(reference_noise((ka, kb), theta.size, distribution, start))
    theta[...] = acc.astype(np.float32)
    return theta


# ---- CPU twin -----------------------------------------------------------------------------------------

@parallel_jit
def _cpu_noise(out, ka, kb, start, distribution):
    for j in numba.prange(out.size):
        out[j] = cpu_direction(ka, kb, start + j, distribution)


@parallel_jit
def _cpu_axpz(theta, out, ka, kb, start, alpha, distribution):
    # out may be theta itself: element j is read before it is written, by the same iteration.
    for j in numba.prange(theta.size):
        out[j] = theta[j] + alpha * cpu_direction(ka, kb, start + j, distribution)


@parallel_jit
def _cpu_apply_probes(theta, keys, coefs, start, distribution):
    for j in numba.prange(theta.size):
        s = np.float32(0.0)
        for i in range(coefs.size):
            s += coefs[i] * cpu_direction(keys[i, 0], keys[i, 1], start + j, distribution)
        theta[j] = theta[j] + s


@op
def cpu_noise(key: Int64Array, count: int, distribution: str, start: int = 0) -> Float32Array:
    code = distribution_code(distribution)
    ka, kb = _key(key)
    reference.check_slice(start, count)
    out = np.empty(count, np.float32)
    _cpu_noise(out, np.int64(ka), np.int64(kb), np.int64(start), np.int64(code))
    return out


@op
def cpu_perturb_(theta: Float32Array, key: Int64Array, alpha: float, distribution: str, start: int = 0) -> Float32Array:
    """θ ← θ + α z in place (a float32 NumPy vector); returns θ."""
    code = distribution_code(distribution)
    ka, kb = _key(key)
    _vector(theta)
    reference.check_slice(start, theta.size)
    _cpu_axpz(theta, theta, np.int64(ka), np.int64(kb), np.int64(start), np.float32(alpha), np.int64(code))
    return theta


@op
def cpu_perturbed_copy(theta: Float32Array, out: Float32Array | Float16Array, key: Int64Array, alpha: float,
                       distribution: str, start: int = 0) -> Float32Array | Float16Array:
    """out ← θ + α z (float32, or float16 rounded from the float32 value); θ untouched; returns out.
    numba's CPU target has no float16 arrays, so a float16 out is filled through a float32 scratch of
    at most HALF_CHUNK elements (NumPy's cast rounds to nearest even, as the GPU's cvt.rn does)."""
    code = distribution_code(distribution)
    ka, kb = _key(key)
    _copy_target(theta, out)
    reference.check_slice(start, theta.size)
    args = (np.int64(ka), np.int64(kb))
    alpha, code = np.float32(alpha), np.int64(code)
    if out.dtype == np.float32:
        _cpu_axpz(theta, out, *args, np.int64(start), alpha, code)
        return out
    scratch = np.empty(min(HALF_CHUNK, theta.size), np.float32)
    for a in range(0, theta.size, HALF_CHUNK):
        b = min(a + HALF_CHUNK, theta.size)
        _cpu_axpz(theta[a:b], scratch[:b - a], *args, np.int64(start + a), alpha, code)
        out[a:b] = scratch[:b - a]
    return out


@op
def cpu_apply_probes_(theta: Float32Array, keys: Int64Array, coefs: Float32Array, distribution: str,
                      start: int = 0) -> Float32Array:
    """θ ← θ + Σ_i c_i z_i in place, one pass over θ; keys (n, 2) of (ka, kb), coefs (n,). Returns θ.
    On zeros this builds the gradient estimate Σ_i c_i z_i."""
    code = distribution_code(distribution)
    _vector(theta)
    keys, coefs = _keys(keys, coefs)
    reference.check_slice(start, theta.size)
    if coefs.size:
        _cpu_apply_probes(theta, keys, coefs, np.int64(start), np.int64(code))
    return theta


# ---- CUDA ---------------------------------------------------------------------------------------------

@kernel((F32_1D, I64, I64, I64, I64))
def noise_cuda(out, ka, kb, start, distribution):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < out.size:
        out[i] = gpu_direction(ka, kb, start + i, distribution)
        i += stride


@kernel((F32_1D, F32_1D, I64, I64, I64, F32, I64), (F32_1D, F16_1D, I64, I64, I64, F32, I64))
def axpz_cuda(theta, out, ka, kb, start, alpha, distribution):
    # out may be theta itself (perturb_): each thread reads element i before writing it.
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < theta.size:
        out[i] = theta[i] + alpha * gpu_direction(ka, kb, start + i, distribution)
        i += stride


@kernel((F32_1D, I64_2D, F32_1D, I64, I64))
def apply_probes_cuda(theta, keys, coefs, start, distribution):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < theta.size:
        s = np.float32(0.0)
        for p in range(coefs.size):
            s += coefs[p] * gpu_direction(keys[p, 0], keys[p, 1], start + i, distribution)
        theta[i] = theta[i] + s
        i += stride


@op
def cuda_noise(key: BackendArray, count: int, distribution: str, start: int = 0) -> BackendArray:
    """z as a float32 device array."""
    code = distribution_code(distribution)
    ka, kb = _key(key)
    reference.check_slice(start, count)
    out = cuda.device_array(count, np.float32)
    if count:
        grid = blocks(count, max_blocks=MAX_BLOCKS)
        noise_cuda[grid](out, np.int64(ka), np.int64(kb), np.int64(start), np.int64(code))
    return out


@op
def cuda_perturb_(theta: BackendArray, key: BackendArray, alpha: float, distribution: str,
                  start: int = 0) -> BackendArray:
    """θ ← θ + α z in place on a float32 device vector; returns θ."""
    code = distribution_code(distribution)
    ka, kb = _key(key)
    _vector(theta)
    reference.check_slice(start, theta.size)
    if theta.size:
        grid = blocks(theta.size, max_blocks=MAX_BLOCKS)
        axpz_cuda[grid](theta, theta, np.int64(ka), np.int64(kb), np.int64(start), np.float32(alpha), np.int64(code))
    return theta


@op
def cuda_perturbed_copy(theta: BackendArray, out: BackendArray, key: BackendArray, alpha: float, distribution: str,
                        start: int = 0) -> BackendArray:
    """out ← θ + α z on device arrays (out float32 or float16, rounded once from the fp32 value)."""
    code = distribution_code(distribution)
    ka, kb = _key(key)
    _copy_target(theta, out)
    reference.check_slice(start, theta.size)
    if theta.size:
        grid = blocks(theta.size, max_blocks=MAX_BLOCKS)
        axpz_cuda[grid](theta, out, np.int64(ka), np.int64(kb), np.int64(start), np.float32(alpha), np.int64(code))
    return out


@op
def cuda_apply_probes_(theta: BackendArray, keys: BackendArray, coefs: BackendArray, distribution: str,
                       start: int = 0) -> BackendArray:
    """θ ← θ + Σ_i c_i z_i in place on a float32 device vector; returns θ."""
    code = distribution_code(distribution)
    _vector(theta)
    if not (hasattr(keys, "copy_to_host") and hasattr(coefs, "copy_to_host")):
        keys, coefs = _keys(keys, coefs)
        keys, coefs = cuda.to_device(keys), cuda.to_device(coefs)
    elif keys.shape != (coefs.size, 2) or keys.dtype != np.int64 or coefs.dtype != np.float32:
        raise ValueError("device keys must be int64 (n, 2) and coefs float32 (n,)")
    reference.check_slice(start, theta.size)
    if theta.size and coefs.size:
        grid = blocks(theta.size, max_blocks=MAX_BLOCKS)
        apply_probes_cuda[grid](theta, keys, coefs, np.int64(start), np.int64(code))
    return theta

# the ops of this module by name, for callers: apply_probes_(kernels, ...)
apply_probes_ = registered(reference_apply_probes_)
noise = registered(reference_noise)
perturb_ = registered(reference_perturb_)
perturbed_copy = registered(reference_perturbed_copy)
