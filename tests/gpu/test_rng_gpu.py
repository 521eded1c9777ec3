"""On a real GPU: the noise kernels produce the CPU twin's bits at full size."""

import numpy as np
import pytest

from eggnog.kernels.core.backend import select_backend
from eggnog.kernels.core.placement import to_host
from eggnog.kernels.noise import scalar_math
from eggnog.kernels.noise.streams import KINDS, generate

EPS32 = float(np.finfo(np.float32).eps)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("start", [0, 2**32 - (1 << 24)])
def test_gpu_matches_cpu_twin(kind, start):
    backend = select_backend("cuda")
    assert not backend.simulated
    key = scalar_math.stream_key(2026, 4, 1, 17)
    n = 1 << 24
    gpu = to_host(generate(kind, key, start, n, backend="cuda"))
    cpu = generate(kind, key, start, n, backend="cpu")
    if kind.endswith("int8"):
        assert np.array_equal(gpu, cpu)
    else:
        assert np.all(np.abs(gpu - cpu) <= 4 * EPS32 * np.maximum(np.abs(cpu), 1))
