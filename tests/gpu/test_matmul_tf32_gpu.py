"""On a real GPU, the TF32 tensor-core matmul at the MinGRU LM's layer size gives its CPU twin's values
to fp32 accumulation error, on the 128-bit path (whole blocks) and the checked one (ragged edges)."""

import numpy as np
import pytest

from eggnog.kernels.core.mma import round_tf32
from eggnog.kernels.layers.matmul_tf32 import cpu_matmul_tf32, cuda_matmul_tf32


@pytest.mark.parametrize("rows, d_in, d_out", [(4096, 1536, 1536), (1000, 333, 77)])
def test_tf32_matmul_matches_its_twin(rows, d_in, d_out):
    rng = np.random.default_rng(rows)
    x = rng.normal(size=(rows, d_in)).astype(np.float32)
    w = (rng.normal(size=(d_out, d_in)) / np.sqrt(d_in)).astype(np.float32)
    got = cuda_matmul_tf32(x, w).copy_to_host()
    expected = cpu_matmul_tf32(x, w)
    accumulation = d_in * 2.0 ** -23 * (np.abs(round_tf32(x)).astype(np.float64) @ np.abs(round_tf32(w)).T)
    assert np.all(np.abs(got - expected) <= accumulation)
