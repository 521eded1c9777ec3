"""The updates integer EGGROLL applies from a step's pair fitnesses, as objects: `IntEggroll.tell`
calls `optimizer.update(...)` without knowing which one it holds.

    ZTestUpdate      nano-egg's z-test gated +-1 step (`--optimizer ztest`), no state
    QuantizedAdamW   d-eggs' AdamW on each weight's vote, applied as +-1 steps through a float
                     accumulator (`--optimizer adamw`); m, v and the accumulator (12 bytes a parameter)
                     live where the parameters are, made at the first update when not given
"""

import numpy as np

from eggnog.kernels.egg.int_update import int_update, int_vote
from eggnog.kernels.optim.quantized_adamw import quantized_adamw_

OPTIMIZER_ARRAYS = ("opt_m", "opt_v", "opt_acc")  # adamw state, float32 like the parameters' layout
ADAM_EPS = 1e-8


def kind_of(tensor):
    return "vector" if tensor.kind == "vector" else "matrix"


class ZTestUpdate:
    def __init__(self, cfg, model, backend, kernels, state=None):
        self.cfg, self.model, self.kernels = cfg, model, kernels
        self.state = {}

    def update(self, params, views, fitness, prefixes, step):
        """Move `params` (int8, on the backend) by the z-test gated votes of `fitness` (int8 pair signs
        on the backend) at `step`."""
        cfg, model = self.cfg, self.model
        threshold = cfg.threshold_at(step)
        for t in model.tensors:
            int_update(self.kernels, views[t.name], fitness, prefixes[t.name], kind_of(t), threshold, cfg.use_clt,
                       model.noise_kind)


class QuantizedAdamW:
    def __init__(self, cfg, model, backend, kernels, state=None):
        self.cfg, self.model, self.backend, self.kernels = cfg, model, backend, kernels
        state = state or {}
        # an evaluation-only copy holds no state: zeros are made at the first update
        self.state = {name: backend.to_device(np.array(state[name], dtype=np.float32))
                      for name in OPTIMIZER_ARRAYS if name in state}

    def update(self, params, views, fitness, prefixes, step):
        cfg, model = self.cfg, self.model
        if not self.state:
            self.state = {name: self.backend.zeros((model.n_params,), np.float32) for name in OPTIMIZER_ARRAYS}
        for t in model.tensors:
            votes = int_vote(self.kernels, views[t.name], fitness, prefixes[t.name], kind_of(t), cfg.use_clt,
                             model.noise_kind)
            flat = slice(t.offset, t.offset + t.size)
            m, v, acc = (self.state[name][flat] for name in OPTIMIZER_ARRAYS)
            lr = cfg.lr_at(step) * model.lr_scale.get(t.name, 1.0)
            quantized_adamw_(self.kernels, params[flat], votes.reshape(t.size), m, v, acc, lr, cfg.beta1, cfg.beta2,
                             ADAM_EPS, cfg.weight_decay)


INT_OPTIMIZERS = {"ztest": ZTestUpdate, "adamw": QuantizedAdamW}
