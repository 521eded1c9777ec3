"""Optimisers over one flat float32 parameter vector, updated in place where it lives (host or GPU;
the element-wise steps are kernels/optim/float_steps.py):

- "sf-adamw": Schedule-Free AdamW as published (facebookresearch/schedule_free AdamWScheduleFree).
  The parameters hold y, where gradients are taken; state z and v; at step k (from 0)
      lr = lr0 * min(1, (k+1)/warmup);  lr_max = max(lr_max, lr)
      w = (k+1)^r lr_max^weight_lr_power;  W += w;  c = w / W
      v = b2 v + (1-b2) g^2;  d = g / (sqrt(v / (1 - b2^(k+1))) + eps) + wd y
      y = (1-c) y + c z + lr (b1 (1-c) - 1) d;   z = z - lr d
  Evaluate and checkpoint at x = (1/b1) y + (1 - 1/b1) z (the averaged iterate), never at y.
- "adamw": PyTorch AdamW (decoupled decay, bias-corrected moments).
- "sgd": SGD with (PyTorch) momentum and L2 weight decay.

More in docs/internals.md (training/optimizers.py)."""

import math

import numpy as np

from eggnog.kernels.core.placement import kernels_for, to_host
from eggnog.kernels.optim.float_steps import adamw_step_, sf_adamw_eval, sf_adamw_step_, sgd_step_
from eggnog.runtime.errors import BadInput

OPTIMIZERS = ("sf-adamw", "adamw", "sgd")


class Optimizer:
    """What every optimiser is: `step(grad)`, `train_params()` (where gradients are taken),
    `eval_params()`, `state()` and `load_state(arrays, scalars)`. The parameters and state vectors live
    on the backend of the parameters given (host NumPy arrays: the CPU twins; device arrays: the CUDA
    kernels), and every step runs there (kernels/optim/float_steps.py). Gradients given on the host are
    copied to the device first."""

    def _setup(self, params):
        self.ops = kernels_for("cuda" if hasattr(params, "copy_to_host") else "cpu")

    def _copy(self, a):
        if self.ops.name == "cpu":
            return a.copy()
        out = self.ops.empty(a.shape, np.float32)
        out.copy_to_device(a)
        return out

    def _grad(self, grad):
        """The gradient where the parameters are (a host gradient is copied to the device)."""
        return self.ops.to_device(grad)

    def _load(self, target, values):
        if self.ops.name == "cpu":
            target[...] = values
        else:
            target.copy_to_device(np.ascontiguousarray(values, np.float32))

    def _host(self, arrays):
        return {k: to_host(v) for k, v in arrays.items()}


class SfAdamW(Optimizer):
    def __init__(self, params, lr=0.0025, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, warmup_steps=0,
                 r=0.0, weight_lr_power=2.0):
        self._setup(params)
        self.y = params
        self.lr, self.beta1, self.beta2, self.eps = lr, betas[0], betas[1], eps
        self.weight_decay, self.warmup_steps = weight_decay, warmup_steps
        self.r, self.weight_lr_power = r, weight_lr_power
        self.z = self._copy(params)
        self.v = self.ops.zeros(params.shape, np.float32)
        self.k, self.lr_max, self.weight_sum = 0, -1.0, 0.0

    def step(self, grad):
        k = self.k
        lr = self.lr * ((k + 1) / self.warmup_steps if k < self.warmup_steps else 1.0)
        self.lr_max = max(self.lr_max, lr)
        weight = (k + 1) ** self.r * self.lr_max ** self.weight_lr_power
        self.weight_sum += weight
        c = weight / self.weight_sum if self.weight_sum else 0.0
        sf_adamw_step_(self.ops, self.y, self.z, self.v, self._grad(grad), lr, c, self.beta1, self.beta2, self.eps,
                       self.weight_decay, k)
        self.k = k + 1

    def train_params(self):
        return self.y

    def eval_params(self):
        return sf_adamw_eval(self.ops, self.y, self.z, self.beta1)

    def state(self):
        return self._host({"z": self.z, "v": self.v}), {"k": self.k, "lr_max": self.lr_max,
                                                         "weight_sum": self.weight_sum}

    def load_state(self, arrays, scalars):
        self._load(self.z, arrays["z"])
        self._load(self.v, arrays["v"])
        self.k, self.lr_max, self.weight_sum = int(scalars["k"]), float(scalars["lr_max"]), float(scalars["weight_sum"])


class AdamW(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        self._setup(params)
        self.p = params
        self.lr, self.beta1, self.beta2, self.eps, self.weight_decay = lr, betas[0], betas[1], eps, weight_decay
        self.m, self.v = self.ops.zeros(params.shape, np.float32), self.ops.zeros(params.shape, np.float32)
        self.k = 0

    def step(self, grad):
        self.k += 1
        adamw_step_(self.ops, self.p, self.m, self.v, self._grad(grad), self.lr, self.beta1, self.beta2, self.eps,
                    self.weight_decay, self.k)

    def train_params(self):
        return self.p

    def eval_params(self):
        return self._copy(self.p)

    def state(self):
        return self._host({"m": self.m, "v": self.v}), {"k": self.k}

    def load_state(self, arrays, scalars):
        self._load(self.m, arrays["m"])
        self._load(self.v, arrays["v"])
        self.k = int(scalars["k"])


class Sgd(Optimizer):
    def __init__(self, params, lr=0.1, momentum=0.9, weight_decay=0.0):
        self._setup(params)
        self.p, self.lr, self.momentum, self.weight_decay = params, lr, momentum, weight_decay
        self.buf = self.ops.zeros(params.shape, np.float32)
        self.k = 0

    def step(self, grad):
        sgd_step_(self.ops, self.p, self.buf, self._grad(grad), self.lr, self.momentum, self.weight_decay, self.k == 0)
        self.k += 1

    def train_params(self):
        return self.p

    def eval_params(self):
        return self._copy(self.p)

    def state(self):
        return self._host({"buf": self.buf}), {"k": self.k}

    def load_state(self, arrays, scalars):
        self._load(self.buf, arrays["buf"])
        self.k = int(scalars["k"])


CHECKPOINT_PREFIX = "opt_"


def checkpoint_arrays(optimizer):
    """(arrays named for a checkpoint, JSON scalars) of an optimiser's state."""
    arrays, scalars = optimizer.state()
    return {CHECKPOINT_PREFIX + k: v for k, v in arrays.items()}, scalars


def state_from_checkpoint(arrays):
    """The optimiser arrays among a checkpoint's arrays, under their own names."""
    return {k[len(CHECKPOINT_PREFIX):]: v for k, v in arrays.items() if k.startswith(CHECKPOINT_PREFIX)}


def make_optimizer(name, params, lr, beta1=0.9, beta2=0.999, weight_decay=0.0, warmup_steps=0, momentum=0.9):
    """An optimiser updating `params` (flat float32, in place)."""
    if not (lr > 0 and math.isfinite(lr)):
        raise BadInput(f"--lr must be a positive number, got {lr}")
    if not (0 <= beta1 < 1 and 0 <= beta2 < 1):
        raise BadInput(f"betas must lie in [0, 1), got {beta1}, {beta2}")
    if weight_decay < 0 or warmup_steps < 0:
        raise BadInput("weight decay and warmup steps must be non-negative")
    if not 0 <= momentum < 1:
        raise BadInput(f"momentum must lie in [0, 1), got {momentum}")
    if name == "sf-adamw":
        if beta1 == 0:
            raise BadInput("sf-adamw needs beta1 > 0 (its evaluation point divides by beta1)")
        return SfAdamW(params, lr, (beta1, beta2), weight_decay=weight_decay, warmup_steps=warmup_steps)
    if name == "adamw":
        return AdamW(params, lr, (beta1, beta2), weight_decay=weight_decay)
    if name == "sgd":
        return Sgd(params, lr, momentum, weight_decay)
    raise BadInput(f"unknown optimizer {name!r}: choose one of {', '.join(OPTIMIZERS)}")
