"""CD-RGE (central-difference random gradient estimation) and its one-sided variant FDRAS, series or
split over MPI ranks, on one flat float32 parameter vector.

For probe i with direction z_i (Rademacher, normal or uniform, regenerated from a counter-based key
of (seed, step, i), never stored) and the same batch for every probe:
    cdrge:  g = (1/n) sum_i (L(theta + eps z_i) - L(theta - eps z_i)) / (2 eps) z_i
    fdras:  g = (1/n) sum_i (L(theta + eps z_i) - L(theta)) / eps z_i      (one clean pass per step;
            with `antithetic`, probes come in pairs z, -z)
The step is SGD (theta -= lr g, applied as one fused pass over theta with all n probes), SGD with
momentum, or Adam (on g built the same way into a zeroed buffer). eps is tied to lr unless given,
as the authors ran it (their update theta -= eps g is this one with lr = eps).

More in docs/internals.md (zorn/rge/trainer.py)."""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from eggnog.kernels.core.backend import Backend, packed_to_device
from eggnog.kernels.core.placement import BackendArray, kernels_for, to_host
from eggnog.kernels.noise.perturb import apply_probes_, perturbed_copy
from eggnog.kernels.noise.scalar_math import stream_key
from eggnog.runtime.errors import BadInput
from eggnog.runtime.step_clock import UNTIMED
from eggnog.runtime.world import World, world_without_mpi
from eggnog.training.optimizers import AdamW, Sgd

SOLVERS = ("cdrge", "fdras")
DIST_MODES = ("reduce", "seeds")
DISTRIBUTIONS = ("rademacher", "normal", "uniform")
OPTIMIZERS = ("sgd", "momentum", "adam")
PROBE_TENSOR_ID = 0x50524F42  # "PROB": noise tensor id of CD-RGE probe directions


@dataclass(frozen=True)
class RgeConfig:
    solver: str = "cdrge"
    probes: int = 32
    lr: float = 0.1
    sigma: float | None = None
    optimizer: str = "sgd"
    beta1: float = 0.9
    beta2: float = 0.999
    distribution: str = "rademacher"
    antithetic: bool = False
    dist_mode: str = "seeds"
    probe_batch: int = 0  # the same step either way, up to fp32 summation order

    @property
    def eps(self) -> float:
        return self.lr if self.sigma is None else self.sigma

    def check(self, ranks: int = 1) -> None:
        for name, value, choices in (("solver", self.solver, SOLVERS), ("dist-mode", self.dist_mode, DIST_MODES),
                                     ("distribution", self.distribution, DISTRIBUTIONS),
                                     ("optimizer", self.optimizer, OPTIMIZERS)):
            if value not in choices:
                raise BadInput(f"unknown --{name} {value!r}: choose one of {', '.join(choices)}")
        if self.probes < 1:
            raise BadInput(f"--probes must be positive, got {self.probes}")
        if self.probe_batch < 0:
            raise BadInput(f"--probe-batch must be 0 (chosen by the run) or positive, got {self.probe_batch}")
        if self.probes % ranks:
            raise BadInput(f"--probes {self.probes} cannot be split evenly over {ranks} ranks")
        if self.antithetic and (self.probes // ranks) % 2:
            raise BadInput(f"antithetic probes come in pairs: each of {ranks} rank(s) needs an even share of "
                           f"--probes {self.probes}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise BadInput(f"--lr must be a positive number, got {self.lr}")
        if not (self.eps > 0 and math.isfinite(self.eps)):
            raise BadInput(f"--sigma must be a positive number, got {self.eps}")
        if not (0 <= self.beta1 < 1 and 0 <= self.beta2 < 1):
            raise BadInput(f"betas must lie in [0, 1), got {self.beta1}, {self.beta2}")


def step_optimizer(cfg: RgeConfig, params: BackendArray) -> AdamW | Sgd:
    """The optimiser of --optimizer over `params` (updated in place where they live, host or device):
    SGD (with momentum beta1 for "momentum"), or Adam without weight decay."""
    if cfg.optimizer == "adam":
        return AdamW(params, cfg.lr, (cfg.beta1, cfg.beta2), weight_decay=0.0)
    return Sgd(params, cfg.lr, cfg.beta1 if cfg.optimizer == "momentum" else 0.0)


class NonFiniteLoss(Exception):
    """A probe loss was NaN or infinite; the parameters are still those before the step."""

    def __init__(self, step: int) -> None:
        super().__init__(f"non-finite loss at step {step}")
        self.step = step


def probe_keys(seed: int, step: int, probes: np.ndarray) -> np.ndarray:
    """(n, 2) int64 stream keys of the given probe indices at a step."""
    return np.array([stream_key(seed, PROBE_TENSOR_ID, step, int(i)) for i in probes], np.int64).reshape(-1, 2)


def probe_functions(model: Any, backend_name: str, cfg: RgeConfig,
                    batch: Any) -> tuple[Callable[[BackendArray], float], Callable[..., Any] | None]:
    """(loss_fn, probes_fn) of a step on `batch`: `loss_fn(theta)` the loss of one parameter vector,
    `probes_fn(theta, keys, alphas, out)` many perturbations' losses in one pass where the model can
    (None where it cannot); the batch is put on the backend once for all of them where the model can."""
    if hasattr(model, "prepare"):
        batch = model.prepare(backend_name, batch, max(cfg.probe_batch, 1))  # 0: not chosen yet, one copy
    probes_fn = None
    if hasattr(model, "probe_losses"):
        def probes_fn(theta: BackendArray, keys: BackendArray, alphas: BackendArray, out: BackendArray) -> BackendArray:
            return model.probe_losses(backend_name, theta, keys, alphas, cfg.distribution, batch, out)
    return (lambda p: model.loss(backend_name, p, batch)), probes_fn


class RgeTrainer:
    """The strategy (training/strategy.py) of CD-RGE and FDRAS: `evaluate(batch)` gives this rank's
    (probe, L+, L-) rows of the current step, `tell(rows of every rank)` updates the parameters and
    returns the mean probe loss (as the authors report it); `train_step` does both with the gather.
    Holds the master parameters (`theta`, on the backend), a work copy and the optimiser (None for
    plain SGD, fused into the probe pass). `model` may be None where the caller evaluates the
    perturbations itself (zorn/rge/search.py: ask/tell on any loss); `tell` is then the one update."""

    def __init__(self, model: Any, cfg: RgeConfig, backend: Backend, params: np.ndarray, seed: int, step: int = 0,
                 world: World | None = None) -> None:
        world = world_without_mpi() if world is None else world
        cfg.check(world.size)
        self.model, self.cfg, self.backend, self.world, self.seed, self.step = model, cfg, backend, world, seed, step
        self.ops = kernels_for(backend.name)
        self.theta = backend.to_device(np.array(params, np.float32))
        self.work = backend.empty(self.theta.shape, np.float32)
        self.per_rank = cfg.probes // world.size
        self.mine = np.arange(world.rank * self.per_rank, (world.rank + 1) * self.per_rank)
        # plain SGD is fused into the probe pass; momentum and Adam keep their state beside theta (in
        # "reduce" mode on the host of rank 0, which steps and broadcasts)
        self.optimizer = None
        if cfg.optimizer != "sgd":
            self.optimizer = step_optimizer(cfg, self.theta if cfg.dist_mode == "seeds" else
                                            np.array(params, np.float32))

    def host_params(self) -> np.ndarray:
        return to_host(self.theta).copy()

    def host_optimizer_state(self) -> dict[str, np.ndarray]:
        if self.optimizer is None:
            return {}
        return {name: np.array(to_host(a), np.float32) for name, a in self.optimizer.state()[0].items()}

    def _signed_keys(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        """Keys of this rank's probes and the sign each direction carries (antithetic pairs share a key)."""
        cfg = self.cfg
        if not cfg.antithetic:
            return probe_keys(self.seed, step, self.mine), np.ones(self.mine.size, np.float32)
        keys = probe_keys(self.seed, step, self.mine // 2)
        return keys, np.where(self.mine % 2 == 0, 1.0, -1.0).astype(np.float32)

    def evaluate(self, batch: Any) -> np.ndarray:
        """This rank's (probe, L+, L-) rows of the current step on `batch`: L- is L(theta - eps z)
        (cdrge) or the clean L(theta) (fdras). A model that evaluates many perturbations in one pass
        (`probe_losses`) takes them in passes of --probe-batch when it is above 1."""
        loss_fn, probes_fn = probe_functions(self.model, self.backend.name, self.cfg, batch)
        plus, minus = self._losses(loss_fn, probes_fn)
        return np.stack([self.mine.astype(np.float64), plus, minus], axis=1)

    def _losses(self, loss_fn: Callable[[BackendArray], float],
                probes_fn: Callable[..., Any] | None) -> tuple[np.ndarray, np.ndarray]:
        cfg = self.cfg
        clean = loss_fn(self.theta) if cfg.solver == "fdras" else None
        if probes_fn is not None and cfg.probe_batch > 1:
            return self._losses_batched(probes_fn, clean)
        losses = np.array([loss_fn(self.perturbed(key, alpha)) for key, alpha in zip(*self.perturbations())],
                          np.float64)
        return self._plus_minus(losses, clean)

    def perturbations(self) -> tuple[np.ndarray, np.ndarray]:
        """Keys (m, 2) and float32 alphas (m,) of this rank's perturbed evaluations at the current step,
        each theta + alpha z(key), in the order they are evaluated: cdrge probe i's +eps then -eps
        (evaluations 2i and 2i+1), fdras probe i alone (antithetic members carry their sign in alpha)."""
        keys, signs = self._signed_keys(self.step)
        alphas = signs * np.float32(self.cfg.eps)
        if self.cfg.solver == "cdrge":
            keys, alphas = np.repeat(keys, 2, axis=0), np.stack([alphas, -alphas], axis=1).reshape(-1)
        return keys, alphas.astype(np.float32)

    def perturbed(self, key: np.ndarray, alpha: float) -> BackendArray:
        """The work copy set to theta + alpha z(key) (alpha one of `perturbations`); theta untouched."""
        perturbed_copy(self.ops, self.theta, self.work, key, float(alpha), self.cfg.distribution)
        return self.work

    def _losses_batched(self, probes_fn: Callable[..., Any], clean: float | None) -> tuple[np.ndarray, np.ndarray]:
        """The same (L+, L-) with the perturbed evaluations (`perturbations`) in passes of --probe-batch:
        every alpha is the float32 that perturbed_copy would be given. The keys and alphas go to the
        backend in one upload, every pass writes its losses into one vector there, and that vector comes
        back in one copy."""
        cfg = self.cfg
        keys, alphas = packed_to_device(self.backend.to_device, *self.perturbations())
        losses = self.backend.empty(len(alphas), np.float64)
        for i in range(0, len(alphas), cfg.probe_batch):
            j = i + cfg.probe_batch
            probes_fn(self.theta, keys[i:j], alphas[i:j], losses[i:j])
        return self._plus_minus(to_host(losses), clean)

    @staticmethod
    def _plus_minus(losses: np.ndarray, clean: float | None) -> tuple[np.ndarray, np.ndarray]:
        """(L+, L-) per probe from the losses of `perturbations` in order, and the clean loss (fdras)."""
        if clean is None:
            return losses[0::2], losses[1::2]
        return losses, np.full(losses.size, clean)

    def coefficients(self, plus: np.ndarray, minus: np.ndarray, signs: np.ndarray) -> np.ndarray:
        """c_i with g = sum_i c_i z_i (sign of antithetic members folded in)."""
        cfg = self.cfg
        scale = 2.0 * cfg.eps if cfg.solver == "cdrge" else cfg.eps
        return ((plus - minus) / (scale * cfg.probes) * signs).astype(np.float32)

    def train_step(self, batch: Any, clock: Any = UNTIMED) -> float:
        """One training step on `batch`: evaluate, gather every rank's rows, tell. Raises NonFiniteLoss
        before touching the parameters when any probe loss is NaN or infinite. `clock` times its phases:
        the probes (eval), the collectives (exchange), the rest (update)."""
        with clock.phase("eval"):
            mine = self.evaluate(batch)
        with clock.phase("exchange"):
            table = self.world.allgather_array(mine)
        return self.tell(table, clock)

    def tell(self, table: np.ndarray, clock: Any = UNTIMED) -> float:
        """Update from the (probe, L+, L-) rows of every rank, in rank order as gathered; returns the
        mean probe loss."""
        cfg, world, ops = self.cfg, self.world, self.ops
        if not np.isfinite(table[:, 1:]).all():
            raise NonFiniteLoss(self.step)
        if cfg.dist_mode == "seeds":
            with clock.phase("update"):
                self._update(*self._all_probes(table, self.step))
        else:
            mine = table[world.rank * self.per_rank:(world.rank + 1) * self.per_rank]
            with clock.phase("update"):
                keys, signs = self._signed_keys(self.step)
                partial = self.backend.zeros(self.theta.shape, np.float32)
                apply_probes_(ops, partial, keys, self.coefficients(mine[:, 1], mine[:, 2], signs), cfg.distribution)
                partial = to_host(partial)
            with clock.phase("exchange"):
                total = world.reduce_sum(partial)
            with clock.phase("update"):
                host = self.host_params() if world.is_root else np.empty(self.theta.shape, np.float32)
                if world.is_root:
                    if self.optimizer is None:
                        host -= np.float32(cfg.lr) * total
                    else:
                        self.optimizer.step(total)
                        host = self.optimizer.train_params()
            with clock.phase("exchange"):
                world.bcast_array(host)
            with clock.phase("update"):
                if self.optimizer is not None and not world.is_root:
                    self.optimizer.train_params()[...] = host
                self.theta = self.backend.to_device(host)
        self.step += 1
        losses = table[:, 1:] if cfg.solver == "cdrge" else table[:, 1]
        return float(losses.mean())

    def _all_probes(self, table: np.ndarray, step: int) -> tuple[np.ndarray, np.ndarray]:
        """Keys and coefficients of every probe from the gathered (probe, L+, L-) table."""
        probes = table[:, 0].astype(np.int64)
        signs = np.where(probes % 2 == 0, 1.0, -1.0).astype(np.float32) if self.cfg.antithetic else \
            np.ones(probes.size, np.float32)
        keys = probe_keys(self.seed, step, probes // 2 if self.cfg.antithetic else probes)
        return keys, self.coefficients(table[:, 1], table[:, 2], signs)

    def estimate(self, batch: Any) -> np.ndarray:
        """The gradient estimate g of all probes at the current step (host float32), parameters and
        step untouched."""
        table = self.world.allgather_array(self.evaluate(batch))
        keys, coefs = self._all_probes(table, self.step)
        grad = self.backend.zeros(self.theta.shape, np.float32)
        apply_probes_(self.ops, grad, keys, coefs, self.cfg.distribution)
        return to_host(grad)

    def _update(self, keys: np.ndarray, coefs: np.ndarray) -> None:
        """theta -= lr * sum_i c_i z_i (fused), or the optimiser's step on that sum."""
        cfg, ops = self.cfg, self.ops
        if self.optimizer is None:
            keys, coefs = packed_to_device(self.backend.to_device, keys, (-cfg.lr * coefs).astype(np.float32))
            apply_probes_(ops, self.theta, keys, coefs, cfg.distribution)
            return
        grad = self.backend.zeros(self.theta.shape, np.float32)
        apply_probes_(ops, grad, keys, coefs, cfg.distribution)
        self.optimizer.step(grad)  # theta, in place, on the backend
