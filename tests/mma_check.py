"""One warp through `mma_s8_16832` and `mma_tf32_1688` (the ops warp_mma_s8 and warp_mma_tf32 of
kernels/checks/hardware.py): each lane loads its A and B fragment registers from whole matrices by the
PTX ISA layout (kernels/core/mma.py) and stores its C fragment back by the same layout. Used by the simulator
test and, unchanged, by the GPU test, so both check the same layout."""

import numpy as np

from eggnog.kernels.checks.hardware import cuda_warp_mma_s8, cuda_warp_mma_tf32
from eggnog.kernels.core.mma import MMA_K, MMA_M, MMA_N, TF32_K, round_tf32
from eggnog.kernels.core.placement import to_host


def run_and_compare(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (MMA_M, MMA_K)).astype(np.int8)
    b = rng.integers(-128, 128, (MMA_K, MMA_N)).astype(np.int8)
    a[0] = -128  # extreme products and a sum that wraps past 2^31 in C
    b[:, 0] = -128
    c = rng.integers(-(1 << 31), 1 << 31, (MMA_M, MMA_N), dtype=np.int64).astype(np.int32)
    c[0, 0] = np.iinfo(np.int32).max
    expected = (a.astype(np.int64) @ b.astype(np.int64) + c) & 0xFFFFFFFF
    return to_host(cuda_warp_mma_s8(a, b, c)), expected.astype(np.uint32).view(np.int32)


def run_tf32(seed):
    """The one-warp TF32 product and its float64 value on the TF32-rounded inputs, with the bound of
    fp32 accumulation: |got - expected| <= 2^-22 (|A| |B| + |C|) (products exact, 9 additions)."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(MMA_M, TF32_K)).astype(np.float32)
    b = rng.normal(size=(TF32_K, MMA_N)).astype(np.float32)
    c = rng.normal(size=(MMA_M, MMA_N)).astype(np.float32)
    ar, br = round_tf32(a).astype(np.float64), round_tf32(b).astype(np.float64)
    expected = ar @ br + c
    bound = 2.0 ** -22 * (np.abs(ar) @ np.abs(br) + np.abs(c))
    return to_host(cuda_warp_mma_tf32(a, b, c)), expected, bound
