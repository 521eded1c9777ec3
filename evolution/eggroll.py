"""Integer EGGROLL (nano-egg): antithetic rank-1 int8 perturbations, sign fitness, z-test gated
+-1 updates. The strategy (training/strategy.py) is explicit state (parameters, step, seed) and
ask/tell, with `tell(fitness) = update(shape(fitness))`. The trainers evaluate through the fused
kernels, shape each rank's scores into pair signs, gather them, and apply the same update everywhere:

    scores = strategy.evaluate(windows, states)   # this rank's slice; states (n_layer, members, D)
    strategy.update(gathered(strategy.shape(scores)))

The update is an optimiser object (evolution/int_optimizers.py): nano-egg's z-test gated +-1 step or
d-eggs' quantized AdamW on the vote. With `--adaptive-noise` the forward's noise is scaled by d-eggs'
per row / column / element overlay (evolution/noise_overlay.py), updated after every step that moved.

Member g belongs to pair g // 2 and carries sign +1 (even g) or -1 (odd g); noise of tensor t at
epoch e is keyed by (seed, t, e // noise_reuse, pair), so any rank can regenerate any member's.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import cast

import numpy as np
import numpy.typing as npt

from eggnog.evolution.fitness import Z_SCALE, check_population, pair_signs, pair_zscores
from eggnog.evolution.int_members import perturbed_members
from eggnog.evolution.int_optimizers import INT_OPTIMIZERS, OPTIMIZER_ARRAYS, QuantizedAdamW, ZTestUpdate
from eggnog.evolution.noise_overlay import check_overlay, gains_of, initial_overlay, updated_overlay
from eggnog.kernels.core.backend import Backend
from eggnog.kernels.core.placement import BackendArray, kernels_for, to_host
from eggnog.kernels.egg.changed import count_changed
from eggnog.models.egg import IntTensorModel
from eggnog.runtime.errors import BadInput
from eggnog.training.ask_tell import fitness_of

MAX_ALPHA = 64
WARM_UP = 200  # adamw: d-eggs' 4x and 2x learning-rate steps end here


@dataclass(frozen=True)
class IntEggrollConfig:
    population: int = 1024
    sigma_shift: int = 4
    alpha: float = 4.0
    alpha_decay_timestep: int = 1000
    use_clt: bool = True
    fast_fitness: bool = True
    noise_reuse: int = 1
    tokens_per_update: int = 100
    group_size: int = 2
    perturbation_rank: int = 1
    optimizer: str = "ztest"
    lr: float = 0.125
    beta1: float = 0.9
    beta2: float = 0.95
    weight_decay: float = 0.01
    lr_decay: str = "none"
    adaptive_noise: bool = False

    def check(self, ranks: int = 1) -> None:
        if self.perturbation_rank != 1:
            raise BadInput("integer EGGROLL uses rank-1 perturbations (as nano-egg); got --perturbation-rank "
                           f"{self.perturbation_rank}")
        check_population(self.population, self.group_size, ranks)
        if self.tokens_per_update < 1 or self.noise_reuse < 0 or self.alpha <= 0 or self.alpha_decay_timestep < 1:
            raise BadInput("tokens per update and alpha decay timestep must be positive, alpha > 0, noise reuse >= 0")
        if self.alpha > MAX_ALPHA:
            raise BadInput(f"--alpha must be at most {MAX_ALPHA} (the z-test level falls as 1 / 2^alpha), got "
                           f"{self.alpha}")
        if not 0 <= self.sigma_shift <= 20:
            raise BadInput(f"sigma shift must be in [0, 20], got {self.sigma_shift}")
        if self.lr_decay not in ("none", "linear"):
            raise BadInput(f"unknown --lr-decay {self.lr_decay!r}: choose none or linear")
        if self.optimizer not in ("ztest", "adamw"):
            raise BadInput(f"unknown --optimizer {self.optimizer!r} for the EGG: choose ztest or adamw")
        if self.lr <= 0 or self.weight_decay < 0 or not (0 <= self.beta1 < 1 and 0 <= self.beta2 < 1):
            raise BadInput("--lr must be positive, --weight-decay >= 0 and --beta1, --beta2 in [0, 1)")

    def lr_at(self, step: int) -> float:
        warm = self.lr * (4 if step < 100 else 2 if step < 200 else 1)
        last = getattr(self, "steps", 0)
        if self.lr_decay == "none" or step < WARM_UP or last <= WARM_UP:
            return warm
        return warm * max(0.0, (last - step) / (last - WARM_UP))

    def alpha_at(self, step: int) -> float:
        """alpha < 1: constant z-test level; alpha >= 1: 1 / ((2^alpha - 1) t / decay + 1)."""
        if self.alpha < 1:
            return self.alpha
        return 1.0 / ((2.0**self.alpha - 1.0) * step / self.alpha_decay_timestep + 1.0)

    def threshold_at(self, step: int) -> int:
        """int(16 * Phi^-1(1 - alpha_t / 2)), times the fitness scale (16 for z-scored fitness)."""
        level = self.alpha_at(step)
        thr = int(NormalDist().inv_cdf(1.0 - level / 2.0) * 16) if level < 1 else 0
        return thr * (1 if self.fast_fitness else Z_SCALE)

    def noise_epoch(self, step: int) -> int:
        """The noise key's counter at `step` (nano-egg's epoch): --noise-reuse steps share one."""
        return 0 if self.noise_reuse == 0 else step // self.noise_reuse


OVERLAY_ARRAY = "noise_overlay"  # adaptive noise: int8, laid out as the gains (kernels/noise/gains.py)
STATE_ARRAYS = OPTIMIZER_ARRAYS + (OVERLAY_ARRAY,)  # what a strategy carries besides its parameters


def state_layout(cfg: IntEggrollConfig, model: IntTensorModel) -> list[tuple[str, type[np.generic], int]]:
    """(name, dtype, length) of each state array a strategy of `cfg` carries, in STATE_ARRAYS order."""
    arrays = [(name, np.float32, model.n_params) for name in OPTIMIZER_ARRAYS if cfg.optimizer == "adamw"]
    return arrays + ([(OVERLAY_ARRAY, np.int8, initial_overlay(model).size)] if cfg.adaptive_noise else [])


def full_state(cfg: IntEggrollConfig, model: IntTensorModel,
               state: Mapping[str, npt.ArrayLike]) -> dict[str, np.ndarray]:
    """`state` with adamw's arrays, which a strategy makes at its first update, as zeros before it."""
    return {name: np.asarray(state[name]) if name in state else np.zeros(n, dtype)
            for name, dtype, n in state_layout(cfg, model)}


def snapshot_bytes(cfg: IntEggrollConfig, model: IntTensorModel, params: npt.ArrayLike,
                   state: Mapping[str, npt.ArrayLike]) -> bytes:
    """A strategy's parameters and state (full_state's arrays) as one byte string: what a
    coordinator's worker sends at a snapshot and a worker joining late loads."""
    parts = [np.asarray(params, np.int8)] + list(full_state(cfg, model, state).values())
    return b"".join(np.ascontiguousarray(p).tobytes() for p in parts)


def snapshot_arrays(cfg: IntEggrollConfig, model: IntTensorModel,
                    body: bytes | bytearray | memoryview) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(params, state) from `snapshot_bytes`' layout; ValueError when `body` has another size."""
    data = np.frombuffer(bytes(body), np.uint8)
    layout = [("params", np.int8, model.n_params)] + list(state_layout(cfg, model))
    expected = sum(n * np.dtype(dtype).itemsize for _, dtype, n in layout)
    if data.size != expected:
        raise ValueError(f"a snapshot of {data.size} bytes where this model's takes {expected}")
    arrays: dict[str, np.ndarray] = {}
    at = 0
    for name, dtype, n in layout:
        size = n * np.dtype(dtype).itemsize
        arrays[name] = data[at:at + size].view(dtype).copy()
        at += size
    return arrays.pop("params"), arrays


class IntEggroll:
    """The strategy (training/strategy.py) of integer EGGROLL over an int8 model of named tensors.

    ask()                  this rank's members at the current step: (members, n) int8 on the host
    tell(fitness)          one fitness per member asked, higher is better (`maximize=False` for
                           losses); = update(shape(fitness)); returns the fraction of parameters moved
    shape(fitness)         pair fitness, int8: sign(f_even - f_odd) per antithetic pair with
                           `cfg.fast_fitness` (a rank's own members suffice), else the pair
                           differences z-scored over the whole population (all members needed)
    update(pair_fitness)   the optimiser the config names (z-test gated +-1 or quantized AdamW)
                           from every pair's shaped fitness; `step` advances by one
    evaluate(windows, states)  this rank's members' log-likelihood sums through the fused kernels

    Randomness is explicit: member g's noise is keyed by (seed, tensor, noise epoch of `step`, g // 2),
    so two strategies made with the same seed ask the same members. `params` are the flat parameters
    on the backend, `host_params()` a host copy."""

    def __init__(self, model: IntTensorModel, cfg: IntEggrollConfig, backend: Backend, params: npt.ArrayLike, seed: int,
                 step: int = 0, first_member: int = 0, members: int | None = None,
                 optimizer_state: Mapping[str, npt.ArrayLike] | None = None) -> None:
        """optimizer_state: {STATE_ARRAYS name: array} to continue from: adamw's (zeros, made at the
        first update, when absent: an evaluation-only copy holds no state) and the adaptive-noise overlay
        (64 everywhere when absent)."""
        self.model, self.cfg, self.seed, self.step = model, cfg, seed, step
        self.backend = backend  # kernels.backend.Backend
        self.ops = kernels_for(backend.name)
        self.first_member = first_member
        self.members = cfg.population if members is None else members
        self.params = backend.to_device(np.array(params, dtype=np.int8))  # flat, on the backend
        state = optimizer_state or {}
        optimizer = cast(type[ZTestUpdate | QuantizedAdamW], INT_OPTIMIZERS[cfg.optimizer])
        self.optimizer = optimizer(cfg, model, backend, self.ops, state)
        self.overlay: npt.NDArray[np.int8] | None = None  # host int8
        self.gains: BackendArray | None = None  # device uint8
        self.proxy_sum: int | None = None  # the last evaluate's summed d-eggs proxy loss, for a model that has one
        if cfg.adaptive_noise:
            overlay = np.asarray(state.get(OVERLAY_ARRAY, initial_overlay(model)))
            if not check_overlay(overlay, model):
                raise BadInput("the stored noise overlay does not fit this model")
            self.set_overlay(overlay)

    def set_overlay(self, overlay: npt.ArrayLike) -> None:
        self.overlay = np.array(overlay, dtype=np.int8)
        self.gains = self.backend.to_device(gains_of(self.overlay))

    def host_params(self) -> np.ndarray:
        return to_host(self.params).copy()

    def host_optimizer_state(self) -> dict[str, np.ndarray]:
        state = {name: to_host(a).copy() for name, a in self.optimizer.state.items()}
        if self.overlay is not None:
            state[OVERLAY_ARRAY] = self.overlay.copy()
        return state

    def evaluate(self, windows: npt.ArrayLike, states: BackendArray, perturbed: bool = True) -> np.ndarray:
        """Sum of log-likelihoods (1/16 bit) of each member of this slice over a (members, T + 1)
        token window, as int64 on the host (and `proxy_sum` for a model with a proxy loss); `states`
        ((layers, members, width) int8 on the backend, the model's state_dims) carry over and are
        updated in place. One fused call (the EGG's `egg_epoch`, the transformer's `transformer_epoch`):
        every token and layer of every member runs inside it, and only the sums leave the device."""
        prefixes = self.model.prefixes(self.seed, self.cfg.noise_epoch(self.step))
        by_id = np.array([prefixes[t.name] for t in self.model.tensors], dtype=np.int64)  # tensors are in id order
        windows = self.backend.to_device(np.ascontiguousarray(windows, dtype=self.model.token_dtype))
        scores = self.model.population_scores(self.ops, self.params, windows, states, self.backend.to_device(by_id),
                                              self.first_member, self.cfg, perturbed,
                                              self.gains if perturbed else None)
        scores = to_host(scores)
        if self.model.has_proxy_loss:
            self.proxy_sum = int(scores[:, 1].sum())
            return np.ascontiguousarray(scores[:, 0])
        return scores

    def ask(self) -> np.ndarray:
        """The parameters of this rank's members at the current step, (members, n) int8 on the host, in
        member order (member g: pair g // 2, sign + for even g). A vector's member is exactly the
        kernels' (egg_vector); a matrix's is W + (sign A_p B_p^T) >> (4 + sigma_shift), clipped, with
        the kernels' A_p, B_p (int_members.py says where the fused matmul rounds otherwise)."""
        prefixes = self.model.prefixes(self.seed, self.cfg.noise_epoch(self.step))
        gains = None if self.overlay is None else gains_of(self.overlay)
        return perturbed_members(self.model, self.host_params(), prefixes, self.first_member, self.members,
                                 self.cfg.sigma_shift, gains)

    def shape(self, fitness: npt.ArrayLike, maximize: bool = True) -> np.ndarray:
        """Pair fitness (int8, one per antithetic pair) from one fitness per member, higher is better
        (`maximize=False`: the values are losses). Pair signs (`cfg.fast_fitness`) take this rank's
        members; pair z-scores (16 = one standard deviation) take the whole population."""
        if self.cfg.fast_fitness:
            return pair_signs(fitness_of(fitness, self.members, maximize))
        return pair_zscores(fitness_of(fitness, self.cfg.population, maximize))

    def tell(self, fitness: npt.ArrayLike, maximize: bool = True) -> float:
        """update(shape(fitness)): one fitness per member asked (the whole population), higher is better
        unless `maximize` is False; returns the fraction of parameters that moved."""
        return self.update(self.shape(fitness, maximize))

    def update(self, fitness: npt.ArrayLike) -> float:
        """Apply the update from the shaped fitness of every pair of the population (`shape`'s output,
        gathered over ranks); returns the fraction of parameters that moved. Identical on every rank
        given identical fitness."""
        if np.size(fitness) != self.cfg.population // 2:
            raise BadInput(f"update takes one shaped fitness per pair ({self.cfg.population // 2}), got "
                           f"{np.size(fitness)}")
        prefixes = self.model.prefixes(self.seed, self.cfg.noise_epoch(self.step))
        device_fitness = self.backend.to_device(np.asarray(fitness, dtype=np.int8))
        # the adaptive-noise overlay is updated on the host; without it, the moved count stays on the device
        before = self.host_params() if self.overlay is not None else self.backend.copy(self.params)
        self.optimizer.update(self.params, self.model.views(self.params), device_fitness, prefixes, self.step)
        self.step += 1
        if self.overlay is None:
            return count_changed(self.ops, before, self.params) / self.model.n_params
        after = self.host_params()
        self.set_overlay(updated_overlay(self.overlay, self.model, before, after))
        return np.count_nonzero(after != before) / self.model.n_params
