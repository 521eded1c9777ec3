"""One warp through `mma_s8_16832` and `mma_tf32_1688`: each lane loads its A and B fragment registers
from whole matrices by the PTX ISA layout (kernels/mma.py), and stores its C fragment back by the same layout.
Used by the simulator test and, unchanged, by the GPU test, so both check the same layout."""

import numpy as np

from eggnog.kernels.cuda_api import cuda
from eggnog.kernels.mma import MMA_K, MMA_M, MMA_N, TF32_K, mma_s8_16832, mma_tf32_1688, round_tf32, to_tf32


@cuda.jit
def one_warp_mma(a_words, b_words, c, d):
    """a_words: (16, 8) int32 = A (16x32 int8) row-major; b_words: (8, 8) int32 = B^T (8x32 int8)."""
    lane = cuda.threadIdx.x
    g = lane // 4
    q = lane % 4
    d0, d1, d2, d3 = mma_s8_16832(a_words[g, q], a_words[g + 8, q], a_words[g, 4 + q], a_words[g + 8, 4 + q],
                                  b_words[g, q], b_words[g, 4 + q], c[g, 2 * q], c[g, 2 * q + 1], c[g + 8, 2 * q],
                                  c[g + 8, 2 * q + 1])
    d[g, 2 * q] = d0
    d[g, 2 * q + 1] = d1
    d[g + 8, 2 * q] = d2
    d[g + 8, 2 * q + 1] = d3


def run_and_compare(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (MMA_M, MMA_K)).astype(np.int8)
    b = rng.integers(-128, 128, (MMA_K, MMA_N)).astype(np.int8)
    a[0] = -128  # extreme products and a sum that wraps past 2^31 in C
    b[:, 0] = -128
    c = rng.integers(-(1 << 31), 1 << 31, (MMA_M, MMA_N), dtype=np.int64).astype(np.int32)
    c[0, 0] = np.iinfo(np.int32).max
    d = cuda.device_array((MMA_M, MMA_N), np.int32)
    one_warp_mma[1, 32](cuda.to_device(a.view(np.int32)), cuda.to_device(np.ascontiguousarray(b.T).view(np.int32)),
                        cuda.to_device(c), d)
    expected = (a.astype(np.int64) @ b.astype(np.int64) + c) & 0xFFFFFFFF
    return d.copy_to_host(), expected.astype(np.uint32).view(np.int32)



@cuda.jit
def one_warp_tf32(a, b, c, d):
    """a: (16, 8), b: (8, 8), c: (16, 8) float32, rounded to TF32 in the kernel as a caller does."""
    lane = cuda.threadIdx.x
    g = lane // 4
    q = lane % 4
    d0, d1, d2, d3 = mma_tf32_1688(to_tf32(a[g, q]), to_tf32(a[g + 8, q]), to_tf32(a[g, q + 4]),
                                   to_tf32(a[g + 8, q + 4]), to_tf32(b[q, g]), to_tf32(b[q + 4, g]),
                                   c[g, 2 * q], c[g, 2 * q + 1], c[g + 8, 2 * q], c[g + 8, 2 * q + 1])
    d[g, 2 * q] = d0
    d[g, 2 * q + 1] = d1
    d[g + 8, 2 * q] = d2
    d[g + 8, 2 * q + 1] = d3


def run_tf32(seed):
    """The one-warp TF32 product and its float64 value on the TF32-rounded inputs, with the bound of
    fp32 accumulation: |got - expected| <= 2^-22 (|A| |B| + |C|) (products exact, 9 additions)."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(MMA_M, TF32_K)).astype(np.float32)
    b = rng.normal(size=(TF32_K, MMA_N)).astype(np.float32)
    c = rng.normal(size=(MMA_M, MMA_N)).astype(np.float32)
    d = cuda.device_array((MMA_M, MMA_N), np.float32)
    one_warp_tf32[1, 32](cuda.to_device(a), cuda.to_device(b), cuda.to_device(c), d)
    ar, br = round_tf32(a).astype(np.float64), round_tf32(b).astype(np.float64)
    expected = ar @ br + c
    bound = 2.0 ** -22 * (np.abs(ar) @ np.abs(br) + np.abs(c))
    return d.copy_to_host(), expected, bound
