"""Integer EGGROLL's `--optimizer adamw` step through `tell`, against d-eggs' update written per tensor: each
weight's vote moves its float accumulator by AdamW at the step's learning rate times the tensor's scale
(0.1 for the transformer's embedding bias), with eps 1e-8, and a weight steps by one when its accumulator
passes +-1."""

import numpy as np

from eggnog.evolution.eggroll import IntEggroll, IntEggrollConfig
from eggnog.kernels.core.backend import Backend
from eggnog.kernels.core.placement import kernels_for
from eggnog.kernels.egg.int_update import int_vote
from eggnog.kernels.optim.quantized_adamw import reference_quantized_adamw_
from eggnog.models.egg_transformer import TransformerConfig, TransformerModel

CPU = Backend("cpu")
SCALE = {"embedding_bias": 0.1}  # d-eggs: the embedding bias learns at a tenth of the rate


def test_each_tensor_moves_by_adamw_at_its_scaled_rate():
    model = TransformerModel(TransformerConfig(1, 8, 4, 16))
    assert model.lr_scale == SCALE and "embedding_bias" in model.by_name
    cfg = IntEggrollConfig(population=8, optimizer="adamw", lr=2.0, beta1=0.8, beta2=0.9, weight_decay=0.01,
                           alpha=0.2)
    step = 150  # lr 2x during warm-up
    s = IntEggroll(model, cfg, CPU, model.init_params(4), 5, step)
    fitness = np.array([1, -1, 1, 1], np.int8)
    theta = s.host_params()
    m, v, acc = (np.zeros(model.n_params, np.float32) for _ in range(3))
    prefixes = model.prefixes(5, cfg.noise_epoch(step))
    views = model.views(theta.copy())
    ops = kernels_for("cpu")
    for _ in range(3):  # three steps: the moments and the accumulator carry over
        for t in model.tensors:
            votes = int_vote(ops, views[t.name], fitness, prefixes[t.name], "vector" if t.kind == "vector"
                             else "matrix", cfg.use_clt, model.noise_kind)
            flat = slice(t.offset, t.offset + t.size)
            reference_quantized_adamw_(theta[flat], np.asarray(votes).reshape(t.size), m[flat], v[flat], acc[flat],
                                       2 * 2.0 * SCALE.get(t.name, 1.0), 0.8, 0.9, 1e-8, 0.01)
        s.update(fitness)
        s.step = step  # the same noise and rate each time
        views = model.views(theta.copy())
    state = s.host_optimizer_state()
    assert np.array_equal(s.host_params(), theta) and np.count_nonzero(theta != model.init_params(4)) > 0
    np.testing.assert_allclose(state["opt_m"], m, rtol=1e-6)
    np.testing.assert_allclose(state["opt_acc"], acc, rtol=1e-5, atol=1e-6)
