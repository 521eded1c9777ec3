"""d-eggs' sampler (temperature, min-p, presence penalty) in integers, over one row of int8 logits
read as the log-likelihood reads them (16 units = 1 bit):

    sample_token(logits, counts, temperature, floor_weight, penalty, r) -> the chosen token (int64)

    z_v = logit_v - penalty * counts_v            counts: earlier occurrences (d-eggs: last 256 tokens)
    g_v = (max z - z_v) * 1024 // temperature     temperature in 1/1024 (0.6 -> 614)
    w_v = WEIGHTS[min(g_v, 1023)]                 round(2^20 * 2^(-i/16)): 2^(z_v / (16 T)) scaled to 2^20
    w_v = 0 where w_v < floor_weight              min-p: floor_weight = ceil(min_p * 2^20) (the top has 2^20)
    token = the first v whose running sum of w exceeds r mod sum(w)

`sampler_settings` turns the float flags into these integers (penalty: nats -> 1/16 bit, rounded);
r comes from the counter hash of the seed and the step. The GPU runs it in one block (block maximum
and sum; the scan in thread 0), the CPU in one loop; all three agree exactly.
"""

import math

import numba
import numpy as np

from eggnog.kernels.core.array_types import Int64Array
from eggnog.kernels.core.cuda_api import I64, I64_1D, cuda, kernel
from eggnog.kernels.core.placement import BackendArray
from eggnog.kernels.core.reductions import block_max, block_total
from eggnog.kernels.core.registry import op, registered

TEMP_ONE = 1024
WEIGHT_BITS = 20
WEIGHTS = np.array([round(2.0 ** (WEIGHT_BITS - i / 16)) for i in range(1024)], np.int64)
THREADS = 256


def sampler_settings(temperature, min_p, presence_penalty):
    """(temperature in 1/1024, floor weight, penalty in logit units) of d-eggs' float settings."""
    return (max(1, round(temperature * TEMP_ONE)), math.ceil(min_p * (1 << WEIGHT_BITS)),
            round(presence_penalty * 16 / math.log(2)))


def _cases(rng):
    for vocab, temperature, min_p, penalty in ((256, 0.6, 0.08, 0.2), (300, 1.0, 0.0, 0.0), (40, 0.3, 0.5, 1.0)):
        logits = rng.integers(-127, 128, vocab)
        logits[: vocab // 4] = 127 - rng.integers(0, 20, vocab // 4)  # a few strong candidates
        counts = rng.integers(0, 3, vocab) * (rng.random(vocab) < 0.2)
        for r in (0, int(rng.integers(1 << 62))):
            yield logits.astype(np.int64), counts.astype(np.int64), *sampler_settings(temperature, min_p, penalty), r


def _weights(logits, counts, temperature, floor_weight, penalty):
    z = logits - penalty * counts
    g = ((z.max() - z) * TEMP_ONE) // temperature
    w = WEIGHTS[np.minimum(g, WEIGHTS.size - 1)]
    return np.where(w < floor_weight, 0, w)


@op(cases=_cases, args={"logits": "int64[vocab]", "counts": "int64[vocab]", "temperature": "int",
                        "floor_weight": "int", "penalty": "int", "r": "int"})
def reference_sample_token(logits: Int64Array, counts: Int64Array, temperature: int, floor_weight: int, penalty: int,
                           r: int) -> int:
    """int: the token d-eggs' integer sampler draws from one row of logits (the module docstring's formula):
    weights 2^(z / (16 T)) of the penalised logits z, those below the min-p floor dropped, and the token
    where the running sum of weights first exceeds r mod their total.

    logits: the model's int8 logits as int64 (16 units = 1 bit; `transformer_decode`). counts: how often
    each token occurred in the recent context (d-eggs: the last 256 tokens). temperature (1/1024),
    floor_weight (min-p times 2^20) and penalty (presence penalty in logit units): `sampler_settings` of
    the float settings. r: a non-negative random integer below 2^63, from the counter hash of the seed and
    the step (models/generate.py)."""
    w = _weights(np.asarray(logits, np.int64), np.asarray(counts, np.int64), temperature, floor_weight, penalty)
    pick = r % int(w.sum())
    return int(np.argmax(np.cumsum(w) > pick))


@numba.njit(cache=True)
def _cpu_sample(logits, counts, temperature, floor_weight, penalty, r):
    top = logits[0] - penalty * counts[0]
    for v in range(logits.size):
        top = max(top, logits[v] - penalty * counts[v])
    w = np.zeros(logits.size, np.int64)
    total = 0
    for v in range(logits.size):
        g = ((top - (logits[v] - penalty * counts[v])) * TEMP_ONE) // temperature
        w[v] = WEIGHTS[min(g, WEIGHTS.size - 1)]
        if w[v] < floor_weight:
            w[v] = 0
        total += w[v]
    pick = r % total
    running = 0
    for v in range(logits.size):
        running += w[v]
        if running > pick:
            return v
    return logits.size - 1


@op
def cpu_sample_token(logits: Int64Array, counts: Int64Array, temperature: int, floor_weight: int, penalty: int,
                     r: int) -> int:
    return int(_cpu_sample(np.ascontiguousarray(logits, np.int64), np.ascontiguousarray(counts, np.int64),
                           int(temperature), int(floor_weight), int(penalty), int(r)))


@kernel((I64_1D, I64_1D, I64, I64, I64, I64, I64_1D, I64_1D, I64_1D), block=THREADS)
def sample_token_cuda(logits, counts, temperature, floor_weight, penalty, r, weights, w, out):
    t = cuda.threadIdx.x
    partial = cuda.shared.array(THREADS, numba.int64)
    n = logits.size
    mine = logits[0] - penalty * counts[0]
    for v in range(t, n, THREADS):
        mine = max(mine, logits[v] - penalty * counts[v])
    partial[t] = mine
    top = block_max(partial, t)
    cuda.syncthreads()  # every thread has the maximum before the slots are reused
    acc = np.int64(0)
    for v in range(t, n, THREADS):
        g = ((top - (logits[v] - penalty * counts[v])) * TEMP_ONE) // temperature
        value = weights[min(g, weights.size - 1)]
        w[v] = 0 if value < floor_weight else value
        acc += w[v]
    total = block_total(acc, partial, t)
    if t == 0:
        pick = r % total
        running = np.int64(0)
        out[0] = n - 1
        for v in range(n):
            running += w[v]
            if running > pick:
                out[0] = v
                break


@op
def cuda_sample_token(logits: BackendArray, counts: BackendArray, temperature: int, floor_weight: int, penalty: int,
                      r: int) -> int:
    from eggnog.kernels.core.cuda_api import on_device

    logits = on_device(logits, np.int64)
    out = cuda.device_array(1, np.int64)
    sample_token_cuda[1, THREADS](logits, on_device(counts, np.int64), np.int64(temperature), np.int64(floor_weight),
                                  np.int64(penalty), np.int64(r), cuda.to_device(WEIGHTS),
                                  cuda.device_array(logits.shape[0], np.int64), out)
    return int(out.copy_to_host()[0])

# the ops of this module by name, for callers: sample_token(kernels, ...)
sample_token = registered(reference_sample_token)
