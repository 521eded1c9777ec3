"""On a real GPU: the noise kernels produce the CPU twin's bits at full size."""

import numpy as np
import pytest

from eggnog.kernels import noise_math
from eggnog.kernels.backend import select_backend, to_host
from eggnog.kernels.rng import KINDS, generate

EPS32 = float(np.finfo(np.float32).eps)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("start", [0, 2**32 - (1 << 24)])
def test_gpu_matches_cpu_twin(kind, start):
    backend = select_backend("cuda")
    assert not backend.simulated
    key = noise_math.stream_key(2026, 4, 1, 17)
    n = 1 << 24
    gpu = to_host(generate(kind, key, start, n, backend="cuda"))
    cpu = generate(kind, key, start, n, backend="cpu")
    if kind.endswith("int8"):
        assert np.array_equal(gpu, cpu)
    else:
        assert np.all(np.abs(gpu - cpu) <= 4 * EPS32 * np.maximum(np.abs(cpu), 1))
