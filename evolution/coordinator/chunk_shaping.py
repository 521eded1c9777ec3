"""d-eggs fitness shaping of one chunk of the population (its worker's `train_sequence_kernel`
epilogue), from the antithetic differences d_i = score(+) - score(-) of the chunk's pairs (scores
are log-likelihood sums, higher is better, so d_i > 0 favours the + direction):

- chunk mean filter: m = mean(d); d_i += trunc(sign(m) |m|^1.2), which favours directions that
  agree with the chunk's overall trend;
- adaptive threshold: F_i = 0 where |d_i| < 0.1 mean|d|, sign(d_i) otherwise.

With both off, F_i = sign(d_i): the synchronous trainer's fast fitness exactly.
"""

import numpy as np

CHUNK_MEAN_EXPONENT = 1.2
ADAPTIVE_THRESHOLD_ALPHA = 0.1


def pair_differences(scores):
    scores = np.asarray(scores, dtype=np.int64)
    return scores[0::2] - scores[1::2]


def chunk_mean_filter(diffs):
    m = float(np.mean(diffs)) if diffs.size else 0.0
    shift = int(np.sign(m) * abs(m) ** CHUNK_MEAN_EXPONENT)  # int(): truncation toward zero, as C's cast
    return diffs + shift


def ternary_fitness(scores, mean_filter=False, adaptive_threshold=False):
    """int8 {-1, 0, +1} per pair of a chunk's member scores (members in pair order)."""
    diffs = pair_differences(scores)
    if mean_filter:
        diffs = chunk_mean_filter(diffs)
    signs = np.sign(diffs).astype(np.int8)
    if adaptive_threshold and diffs.size:
        small = np.abs(diffs) < ADAPTIVE_THRESHOLD_ALPHA * float(np.mean(np.abs(diffs)))
        signs[small] = 0
    return signs
