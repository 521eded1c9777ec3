"""On a real GPU, d-eggs' transformer at its own width (4 x 256, heads of 64; vocabulary 8192 and
bytes): the tensor-core population forward over d-eggs' 64-token windows (two members a 128-row block,
an odd first member) at 4096 members with d-eggs' vocabulary (2048 blocks, many waves of the GPU), the
last logits, the sampler and a whole EGGROLL step give the CPU twin's bits."""

import numpy as np
import pytest

from eggnog.evolution.eggroll import IntEggroll
from eggnog.evolution.transformer_es_config import TransformerEsRunConfig
from eggnog.kernels.core.backend import select_backend
from eggnog.kernels.core.registry import ops_for
from eggnog.kernels.transformer.sampler import sampler_settings

RNG = np.random.default_rng(14)
TOKENS = 64  # d-eggs' window
MEMBERS, STEP_TOKENS = 96, 24  # the EGGROLL step


@pytest.fixture(scope="module")
def gpu():
    backend = select_backend("cuda")
    assert not backend.simulated
    return backend


def model_of(vocab, members, tokens, **overrides):
    return TransformerEsRunConfig(depth=4, dim=256, head_dim=64, vocab_size=vocab, population=members,
                                  group_size=2, tokens_per_update=tokens, **overrides)


@pytest.mark.parametrize("vocab,noise,population", [(8192, "uniform", 4096), (256, "gaussian", 512)])
def test_population_forward_and_logits_match_the_cpu(gpu, vocab, noise, population):
    cfg = model_of(vocab, population, TOKENS, noise=noise)
    model = cfg.build_model()
    params = model.init_params(3)
    windows = RNG.integers(0, vocab, (population, TOKENS + 1)).astype(np.int32)
    prefixes = RNG.integers(0, 1 << 32, len(model.tensors)).astype(np.int64)
    for perturbed in (True, False):
        cpu = ops_for("cpu").transformer_epoch(params, windows, prefixes, 5, model.spec, perturbed)
        cuda = ops_for("cuda").transformer_epoch(params, windows, prefixes, 5, model.spec, perturbed)
        np.testing.assert_array_equal(cuda, cpu)
    context = windows[0, :TOKENS]
    logits = ops_for("cpu").transformer_last_logits(params, context, model.spec)
    np.testing.assert_array_equal(ops_for("cuda").transformer_last_logits(params, context, model.spec), logits)
    counts = np.bincount(context, minlength=vocab).astype(np.int64)
    for r in (0, 12345, 1 << 61):
        args = (logits, counts, *sampler_settings(0.6, 0.08, 0.2), r)
        assert ops_for("cuda").sample_token(*args) == ops_for("cpu").sample_token(*args)


def test_an_eggroll_step_matches_the_cpu(gpu):
    from eggnog.kernels.core.backend import Backend

    cfg = model_of(256, MEMBERS, STEP_TOKENS)
    model = cfg.build_model()
    windows = RNG.integers(0, 256, (MEMBERS, STEP_TOKENS + 1))
    results = []
    for backend in (Backend("cpu"), gpu):
        strategy = IntEggroll(model, cfg, backend, model.init_params(7), 7)
        states = backend.zeros((0, MEMBERS, 0), np.int8)
        scores = strategy.evaluate(windows, states)
        strategy.update(np.sign(scores[0::2] - scores[1::2]).astype(np.int8))
        results.append((scores, strategy.host_params(), strategy.host_optimizer_state()))
    (s_cpu, p_cpu, o_cpu), (s_gpu, p_gpu, o_gpu) = results
    np.testing.assert_array_equal(s_gpu, s_cpu)
    np.testing.assert_array_equal(p_gpu, p_cpu)
    for name in o_cpu:
        np.testing.assert_allclose(o_gpu[name], o_cpu[name], rtol=1e-6, atol=1e-6)
