"""Under the test suite's simulator, device allocations refuse a NumPy integer shape as the real CUDA
target does (the first H100 run failed on one that the simulator had accepted), and the transformer
epoch's plan sizes, which once were NumPy integers, are Python ints."""

import numpy as np
import pytest

from eggnog.kernels.core.cuda_api import SIMULATED, cuda
from eggnog.kernels.core.simulator_strict import ALLOCATORS

pytestmark = pytest.mark.skipif(not SIMULATED, reason="the rule is the simulator's")


@pytest.mark.parametrize("name", [name for name in ALLOCATORS if hasattr(cuda, name)])
def test_a_numpy_integer_shape_is_refused_as_on_the_gpu(name):
    allocate = getattr(cuda, name)
    with pytest.raises(TypeError, match="not iterable"):
        allocate(np.int64(3), np.int8)
    with pytest.raises(TypeError, match="shape must be an integer"):
        allocate(3.0, np.int8)


def test_python_ints_and_tuples_of_numpy_integers_are_taken_as_on_the_gpu():
    assert cuda.device_array(3, np.int8).shape == (3,)
    assert cuda.device_array((np.int64(2), 3), np.int8).shape == (2, 3)
    assert cuda.device_array(np.int64(4).item(), np.float32).shape == (4,)


def test_the_transformer_plan_sizes_are_python_ints():
    from eggnog.kernels.transformer.epoch_cuda import Plan
    from eggnog.models.egg_transformer import TransformerConfig, TransformerModel

    plan = Plan(TransformerModel(TransformerConfig(n_layer=1, dim=32, head_dim=16, vocab=64)).spec, 4)
    for size in (plan.w_words, plan.noise_len, plan.n_vecs):
        assert type(size) is int
