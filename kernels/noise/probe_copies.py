"""Many probes' perturbed copies of θ in one pass, laid out for a model that runs the probes side by side:

    probe_copies(θ, keys, alphas, distribution, segments) -> out (P n,) float32

For probe p (key keys[p], scale alphas[p]) every element is perturbed_copy's, θ[j] + α_p z_p[j] with z
drawn from stream index j (kernels/noise/perturb.py). `segments` (K, 3) int64 rows (start, G, M) cut θ
into tensors θ[start : start + G M] seen as (G, M); in `out` such a tensor is the (G, P, M) block at
P start: its G leading slices each hold the P probes' copies side by side. G = 1 gives a (P, M) block
(one copy a probe); G = 4 for an LSTM's gate-major weights puts the probes of a gate together, which is
the layout of one LSTM with P times the heads. One launch replaces P times K perturbed copies and
the transposes after them. The segments tile θ in order from 0 (checked).

Agreement as perturbed_copy's: rademacher bit for bit; normal and uniform within 6 eps (1 + |ref|).
"""

import numba
import numpy as np

from eggnog.kernels.core.array_types import Float32Array, Float64Array, Int64Array
from eggnog.kernels.core.cpu_jit import parallel_jit
from eggnog.kernels.core.cuda_api import F32_1D, I64, I64_2D, blocks, cuda, device_function, f64, kernel
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.registry import op, registered
from eggnog.kernels.noise.perturb import (
    MAX_BLOCKS,
    cpu_direction,
    distribution_code,
    gpu_direction,
    reference_noise,
)
from eggnog.kernels.noise.scalar_math import MASK32, stream_key

EPS = float(np.finfo(np.float32).eps)


def _check(theta, keys, alphas, segments):
    """Host (keys, alphas, segments) checked; device keys and alphas are taken as they are."""
    if theta.ndim != 1 or theta.dtype != np.float32:
        raise ValueError(f"theta must be a 1-D float32 array, got {theta.ndim}-D {theta.dtype}")
    segments = np.ascontiguousarray(segments, np.int64).reshape(-1, 3)
    ends = np.cumsum(segments[:, 1] * segments[:, 2])
    if segments.size == 0 or (segments[:, 1:] < 1).any() or (segments[:, 0] != ends - segments[:, 1] *
                                                               segments[:, 2]).any() or ends[-1] != theta.size:
        raise ValueError(f"segments must be (start, G, M) rows with G, M >= 1 tiling theta of {theta.size} in order")
    if not hasattr(keys, "copy_to_host"):
        keys = np.ascontiguousarray(keys, np.int64).reshape(-1, 2)
        if keys.size and (keys.min() < 0 or keys.max() > MASK32):
            raise ValueError("probe keys must be 32-bit words (ka, kb)")
        alphas = np.ascontiguousarray(alphas, np.float32).reshape(-1)
    if tuple(keys.shape) != (alphas.shape[0], 2) or keys.dtype != np.int64 or alphas.dtype != np.float32:
        raise ValueError(f"keys must be int64 (P, 2) and alphas float32 (P,), got {keys.dtype} {tuple(keys.shape)} "
                         f"and {alphas.dtype} {tuple(alphas.shape)}")
    return keys, alphas, segments


def _cases(rng):
    """Tensors of one and several leading slices, probes of every distribution; the last case ends
    at stream index 2^32 - 1 through its start."""
    layouts = (((0, 1, 7), (7, 4, 5), (27, 2, 3), (33, 1, 40)), ((0, 3, 100),))
    for distribution, layout, probes in (("rademacher", layouts[0], 3), ("normal", layouts[0], 2),
                                         ("uniform", layouts[1], 4)):
        n = sum(g * m for _, g, m in layout)
        theta = (rng.standard_normal(n) * 2.0 ** rng.uniform(-6, 2, n)).astype(np.float32)
        keys = np.array([stream_key(int(rng.integers(0, 2**31)), 5, 2, i) for i in range(probes)], np.int64)
        yield theta, keys, rng.uniform(-0.3, 0.3, probes).astype(np.float32), distribution, np.array(layout, np.int64)


def _source_index(o, probes, segments):
    """(θ index j, probe p) of output element o."""
    k = 0
    while k + 1 < segments.shape[0] and o >= probes * segments[k + 1, 0]:
        k += 1
    start, width = segments[k, 0], segments[k, 2]
    local = o - probes * start
    g, rest = local // (probes * width), local % (probes * width)
    return start + g * width + rest % width, rest // width


# alphas: float64 too, rounded to float32 here (models/lstm.py's host path hands them on as given)
@op(cases=_cases, tolerance=(6 * EPS, 6 * EPS),
    args={"theta": "float32[n]", "keys": "int64[probes, 2]", "alphas": "float32/float64[probes]",
          "distribution": "str", "segments": "int64[tensors, 3]"})
def reference_probe_copies(theta: Float32Array, keys: Int64Array, alphas: Float32Array | Float64Array,
                           distribution: str, segments: Int64Array) -> Float32Array:
    """float32 (probes * n,): every probe's perturbed copy θ + α_p z_p (z_p[j] from element j of stream
    keys[p], as `perturbed_copy` with start 0), laid out tensor by tensor as the module docstring says:
    tensor k of θ, seen as (G, M), becomes the (G, probes, M) block at probes * start.

    keys: probe p's stream key (ka, kb) in row p. alphas: probe p's step along its direction (CD-RGE:
    +-eps). distribution: "rademacher", "normal" or "uniform" (kernels/noise/perturb.py). segments:
    one (start, G, M) row per tensor, tiling θ in order from 0 (models/lstm.py `probe_segments`: G = 4
    for gate-major weights)."""
    keys, alphas, segments = _check(theta, keys, alphas, segments)
    out = np.empty(alphas.size * theta.size, np.float32)
    for start, g, m in segments:
        for p, ((ka, kb), alpha) in enumerate(zip(keys, alphas)):
            z = f64(reference_noise((ka, kb), g * m, distribution, start))
            copy = (f64(theta[start:start + g * m]) + float(alpha) * z).astype(np.float32).reshape(g, 1, m)
            block = out[alphas.size * start:alphas.size * (start + g * m)].reshape(g, alphas.size, m)
            block[:, p:p + 1] = copy
    return out


_cpu_source_index = numba.njit(_source_index)
_gpu_source_index = device_function(_source_index)


@parallel_jit
def _cpu_probe_copies(theta, keys, alphas, code, segments, out):
    probes = alphas.size
    for o in numba.prange(out.size):
        j, p = _cpu_source_index(o, probes, segments)
        out[o] = theta[j] + alphas[p] * cpu_direction(keys[p, 0], keys[p, 1], j, code)


@op
def cpu_probe_copies(theta: Float32Array, keys: Int64Array, alphas: Float32Array | Float64Array, distribution: str,
                     segments: Int64Array) -> Float32Array:
    code = distribution_code(distribution)
    keys, alphas, segments = _check(theta, keys, alphas, segments)
    out = np.empty(alphas.size * theta.size, np.float32)
    _cpu_probe_copies(theta, keys, alphas, np.int64(code), segments, out)
    return out


@kernel((F32_1D, I64_2D, F32_1D, I64, I64_2D, F32_1D))
def probe_copies_cuda(theta, keys, alphas, code, segments, out):
    o = cuda.grid(1)
    stride = cuda.gridsize(1)
    probes = alphas.size
    while o < out.size:
        j, p = _gpu_source_index(o, probes, segments)
        out[o] = theta[j] + alphas[p] * gpu_direction(keys[p, 0], keys[p, 1], j, code)
        o += stride


@op
def cuda_probe_copies(theta: BackendArray, keys: BackendArray, alphas: BackendArray, distribution: str,
                      segments: BackendArray) -> BackendArray:
    """θ, keys and alphas on the device (host keys and alphas are checked and copied); `segments` a
    host array or, taken as checked, a device one."""
    code = distribution_code(distribution)
    if hasattr(segments, "copy_to_host"):  # a caller's checked layout, kept on the device
        if not hasattr(keys, "copy_to_host") or theta.ndim != 1 or theta.dtype != np.float32:
            raise ValueError("device segments go with a float32 theta and device keys and alphas")
        device_segments = segments
    else:
        keys, alphas, segments = _check(theta, keys, alphas, segments)
        device_segments = cuda.to_device(segments)
    if not hasattr(keys, "copy_to_host"):
        keys, alphas = cuda.to_device(keys), cuda.to_device(alphas)
    out = cuda.device_array(alphas.shape[0] * theta.shape[0], np.float32)
    if out.size:
        probe_copies_cuda[blocks(out.size, max_blocks=MAX_BLOCKS)](theta, keys, alphas, np.int64(code),
                                                                    device_segments, out)
    return out

# the ops of this module by name, for callers: probe_copies(kernels, ...)
probe_copies = registered(reference_probe_copies)
