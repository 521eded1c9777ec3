"""Float EGGROLL for the MinGRU LM: antithetic low-rank Gaussian perturbations, z-scored fitness,
the update through an optimiser of training/optimizers.py.

Member m belongs to pair p = m // 2 with sign s = +1 (even m) or -1 (odd m). For a matrix M
(rows, cols) the pair draws A (rows, r) and B (cols, r) from one counter-based normal stream keyed
(seed, tensor, epoch // noise_reuse, p) (B first, then A) and the member evaluates
M + s sigma A B^T / sqrt(r) without ever forming it (kernels/layers/lowrank.py). Vectors (norm weights,
biases) get full noise s sigma eps, or none with `freeze_vectors`.

All members of a rank are evaluated in one parallel pass per layer: the population is the batch
axis of the model, every member scores its whole `tokens_per_update` window at once through the
parallel scan. Members of one group (`group_size`, even) share a window.

More in docs/internals.md (evolution/float_eggroll.py)."""

import math
from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt

from eggnog.evolution.fitness import check_population
from eggnog.kernels.core.backend import Backend
from eggnog.kernels.core.placement import BackendArray, Kernels, kernels_for, to_host
from eggnog.kernels.layers.elementwise import add_bias, scale_rows
from eggnog.kernels.layers.losses import cross_entropy
from eggnog.kernels.layers.lowrank import lowrank_sum
from eggnog.kernels.layers.weighted_sums import weighted_means
from eggnog.kernels.noise.normal_rows import normal_rows
from eggnog.kernels.noise.scalar_math import prefix_key
from eggnog.models.flat_params import FlatParams
from eggnog.models.mingru import MinGruModel
from eggnog.runtime.errors import BadInput
from eggnog.training.ask_tell import fitness_of
from eggnog.training.optimizers import AdamW, SfAdamW, Sgd

FITNESS_MODES = ("global", "group")
PRECISIONS = ("auto", "tf32", "fp32")
TENSOR_ID_BASE = 1  # noise tensor id of the first model tensor; 0 stays free
FloatOptimizer = AdamW | SfAdamW | Sgd  # what training/optimizers.py makes: step, train_params, state


@dataclass(frozen=True)
class FloatEggrollConfig:
    population: int = 128
    perturbation_rank: int = 1
    sigma: float = 0.01
    noise_reuse: int = 1
    tokens_per_update: int = 128
    group_size: int = 8
    fitness: str = "global"
    freeze_vectors: bool = False
    forward_precision: str = "auto"

    def check(self, ranks: int = 1) -> None:
        if self.perturbation_rank < 1:
            raise BadInput(f"--perturbation-rank must be positive, got {self.perturbation_rank}")
        if self.sigma <= 0 or not math.isfinite(self.sigma):
            raise BadInput(f"--sigma must be a positive number, got {self.sigma}")
        check_population(self.population, self.group_size, ranks)
        if self.tokens_per_update < 1 or self.noise_reuse < 0:
            raise BadInput("tokens per update must be positive and noise reuse non-negative")
        if self.fitness not in FITNESS_MODES:
            raise BadInput(f"unknown fitness {self.fitness!r}: choose one of {', '.join(FITNESS_MODES)}")
        if self.forward_precision not in PRECISIONS:
            raise BadInput(f"unknown --forward-precision {self.forward_precision!r}: choose one of "
                           f"{', '.join(PRECISIONS)}")

    def uses_tf32(self, backend_name: str) -> bool:
        return self.forward_precision == "tf32" or (self.forward_precision == "auto" and backend_name == "cuda")

    def noise_epoch(self, step: int) -> int:
        """The noise key's counter at `step` (nano-egg's epoch): --noise-reuse steps share one."""
        return 0 if self.noise_reuse == 0 else step // self.noise_reuse


def zscore_fitness(losses: npt.ArrayLike, group_size: int, mode: str) -> npt.NDArray[np.float64]:
    """Fitness (higher is better) of every member from its loss: -loss z-scored globally, or with
    each group's mean removed and divided by the global std of the result; zeros when all agree."""
    f = -np.asarray(losses, np.float64)
    if mode == "group":
        f = (f.reshape(-1, group_size) - f.reshape(-1, group_size).mean(axis=1, keepdims=True)).reshape(-1)
    else:
        f = f - f.mean()
    std = f.std()
    return f / std if std > 0 else np.zeros_like(f)


class Perturbation:
    """Per-member noise of one slice of the population, on the backend, as the model asks for it:
    `matrix(name)` -> (A (M, rows, r), B (M, cols, r), coef (M,)), `vector(name)` -> perturbed
    values (M, n), or None for an unperturbed tensor."""

    def __init__(self, ops: Kernels, members: int,
                 matrices: dict[str, tuple[BackendArray, BackendArray, BackendArray]],
                 vectors: dict[str, BackendArray]) -> None:
        self.ops, self.members = ops, members
        self._matrices, self._vectors = matrices, vectors
        self._constants: dict[tuple[tuple[int, ...], float], BackendArray] = {}

    def matrix(self, name: str) -> tuple[BackendArray, BackendArray, BackendArray] | None:
        return self._matrices.get(name)

    def vector(self, name: str) -> BackendArray | None:
        return self._vectors.get(name)

    def _constant(self, shape: tuple[int, ...], value: float) -> BackendArray:
        key = (shape, value)
        if key not in self._constants:
            self._constants[key] = self.ops.to_device(np.full(shape, value, np.float32))
        return self._constants[key]

    def ones(self, n: int) -> BackendArray:
        return self._constant((n,), 1.0)

    def zeros(self, members: int, n: int) -> BackendArray:
        return self._constant((members, n), 0.0)

    def ones_members(self, members: int, n: int) -> BackendArray:
        return self._constant((members, n), 1.0)


class FloatEggroll:
    """The strategy (training/strategy.py) of float EGGROLL over a flat float32 model of named tensors.

    ask()                this rank's members at the current step: (members, n) float32 on the host
    tell(fitness)        one fitness per member of the population, higher is better (`maximize=False`
                         for losses); = update(shape(fitness))
    shape(fitness)       z-scored fitness per member (float64): over the population (`cfg.fitness`
                         "global") or with each group's mean removed ("group")
    update(shaped)       one step of the optimiser along the ES gradient estimate; `step` advances
    evaluate(windows)    this rank's members' losses through the model's low-rank forward

    Randomness is explicit: pair p's noise is keyed by (seed, tensor, noise epoch of `step`, p), so two
    strategies made with the same seed ask the same members. The optimiser owns the flat float32
    parameters on the backend (`params`); `host_params()` is a host copy."""

    def __init__(self, model: FlatParams, cfg: FloatEggrollConfig, backend: Backend | Kernels, params: FloatOptimizer,
                 seed: int, step: int = 0, first_member: int = 0, members: int | None = None) -> None:
        self.model, self.cfg, self.seed = model, cfg, seed
        self.ops = kernels_for(backend.name)
        self.optimizer = params  # an optimiser that owns the flat float32 parameters (on the backend)
        self.step, self.first_member = step, first_member
        self.members = cfg.population if members is None else members
        # the population forward's products: TF32 moves member losses by well under their spread
        # (bench/gpu/tf32_fitness.py); gradients, validation and sampling keep fp32
        self.forward_ops = kernels_for(backend.name, "tf32") if cfg.uses_tf32(backend.name) else self.ops
        self.tensor_ids = {name: TENSOR_ID_BASE + i for i, (name, _, _, _) in enumerate(model.specs)}
        self.kinds = {name: (shape, kind) for name, shape, kind, _ in model.specs}

    @property
    def params(self) -> BackendArray:
        return self.optimizer.train_params()

    def host_params(self) -> np.ndarray:
        return np.array(to_host(self.params), np.float32)

    def host_optimizer_state(self) -> dict[str, np.ndarray]:
        return {name: np.array(to_host(a), np.float32) for name, a in self.optimizer.state()[0].items()}

    def pair_noise(self, name: str, pairs: npt.ArrayLike) -> BackendArray:
        """Unit noise of tensor `name` for the given pairs (a pair may repeat), on the backend: (A, B)
        for a matrix, eps (P, n) for a vector. Each pair's stream is keyed by the pair alone, so a slice
        of the population sees the noise of the whole one; the GPU draws it within 4 eps of the CPU."""
        shape, kind = self.kinds[name]
        r = self.cfg.perturbation_rank
        prefix = prefix_key(self.seed, self.tensor_ids[name], self.cfg.noise_epoch(self.step))
        pairs = np.asarray(pairs, np.int64)
        if kind != "matrix":
            return normal_rows(self.ops, prefix, pairs, 0, shape[0])
        # a pair's stream holds B, then A: two draws at their offsets give both contiguous
        b = normal_rows(self.ops, prefix, pairs, 0, shape[1] * r).reshape(len(pairs), shape[1], r)
        a = normal_rows(self.ops, prefix, pairs, shape[1] * r, shape[0] * r).reshape(len(pairs), shape[0], r)
        return a, b

    def perturbation(self) -> Perturbation:
        """The Perturbation of this rank's members at the current step, built on the backend."""
        cfg, ops = self.cfg, self.ops
        member_pairs = np.arange(self.first_member, self.first_member + self.members) // 2
        signs = np.tile(np.array([1.0, -1.0], np.float32), self.members // 2)
        coef = ops.to_device((signs * cfg.sigma / math.sqrt(cfg.perturbation_rank)).astype(np.float32))
        scale = ops.to_device((signs * np.float32(cfg.sigma)).astype(np.float32))
        views = self.model.views(self.params)
        matrices: dict[str, tuple[BackendArray, BackendArray, BackendArray]] = {}
        vectors: dict[str, BackendArray] = {}
        for name, (_shape, kind) in self.kinds.items():
            if kind == "matrix":
                a, b = self.pair_noise(name, member_pairs)
                matrices[name] = (a, b, coef)
            elif not cfg.freeze_vectors:
                eps = self.pair_noise(name, member_pairs)
                vectors[name] = add_bias(ops, scale_rows(ops, eps, scale), views[name])
        return Perturbation(ops, self.members, matrices, vectors)

    def evaluate(self, windows: npt.ArrayLike) -> np.ndarray:
        """Mean loss (bits/byte) of each member of this slice over its (T + 1)-byte window, every
        member from a zero state, all tokens of all members in one pass per layer."""
        ops = self.ops
        windows = np.ascontiguousarray(windows, np.uint8)
        model = cast(MinGruModel, self.model)  # evaluating takes a model with a forward: the MinGRU LM
        p = model.views(ops.to_device(self.params))
        logits, _, _ = model.forward(self.forward_ops, p, windows[:, :-1], perturbation=self.perturbation())
        loss, _ = cross_entropy(ops, logits, ops.to_device(np.ascontiguousarray(windows[:, 1:]).reshape(-1)))
        return weighted_means(ops, loss, np.ones(loss.size // windows.shape[0]), windows.shape[0])

    def ask(self) -> np.ndarray:
        """The parameters of this rank's members at the current step, (members, n) float32 on the host,
        in member order (member m: pair m // 2, sign + for even m). A vector's member is exactly the one
        the forward uses; a matrix's is M + s sigma A B^T / sqrt(r), formed here in float64 and rounded
        once, where the forward adds the low-rank term to each product instead."""
        perturbation = self.perturbation()
        views = self.model.views(to_host(self.params))
        out = np.empty((self.members, self.model.n_params), np.float32)
        for name, (shape, kind) in self.kinds.items():
            start, size = self.model.offsets[name][0], math.prod(shape)
            base = np.asarray(views[name], np.float64).reshape(size)
            if kind == "matrix":
                a, b, coef = (np.asarray(to_host(x), np.float64) for x in cast(tuple, perturbation.matrix(name)))
                value = base + (coef[:, None, None] * np.einsum("mor,mir->moi", a, b)).reshape(self.members, size)
            else:
                vector = perturbation.vector(name)
                value = base if vector is None else np.asarray(to_host(vector)).reshape(self.members, size)
            out[:, start:start + size] = value  # a vector's member as the forward has it; a matrix's rounded once
        return out

    def shape(self, fitness: npt.ArrayLike, maximize: bool = True) -> np.ndarray:
        """Shaped fitness (float64, one per member of the population, mean 0 and std 1 or all 0) from one
        fitness per member, higher is better (`maximize=False`: the values are losses)."""
        fitness = fitness_of(fitness, self.cfg.population, maximize)
        return zscore_fitness(-fitness, self.cfg.group_size, self.cfg.fitness)  # z-scores -(losses) = fitness

    def gradient_of(self, shaped: npt.ArrayLike) -> BackendArray:
        """The ES estimate of the loss gradient (flat float32, on the backend) from every member's shaped
        fitness: only the per-pair weights travel to the device."""
        cfg, ops = self.cfg, self.ops
        shaped = np.asarray(shaped, np.float64)
        if shaped.size != cfg.population:
            raise BadInput(f"update takes one shaped fitness per member ({cfg.population}), got {shaped.size}")
        weight = -(shaped[0::2] - shaped[1::2]) / (cfg.population * cfg.sigma)  # per pair, sign folded in
        pairs = np.arange(cfg.population // 2)
        matrix_weight = ops.to_device((weight / math.sqrt(cfg.perturbation_rank)).astype(np.float32))
        vector_weight = ops.to_device(weight.astype(np.float32))
        ones = ops.to_device(np.ones((pairs.size, 1, 1), np.float32))  # a vector's update: eps as B, A = 1
        grads = {}
        for name, (shape, kind) in self.kinds.items():
            if kind == "matrix":
                a, b = self.pair_noise(name, pairs)
                grads[name] = lowrank_sum(ops, matrix_weight, a, b)
            elif not cfg.freeze_vectors:
                eps = self.pair_noise(name, pairs)
                grads[name] = lowrank_sum(ops, vector_weight, ones, eps.reshape(pairs.size, shape[0], 1))
        return self.model.flatten_on(grads, ops)

    def gradient(self, losses: npt.ArrayLike) -> BackendArray:
        """The ES estimate of the loss gradient from every member's loss (gradient_of(shape(losses)))."""
        return self.gradient_of(self.shape(losses, maximize=False))

    def tell(self, fitness: npt.ArrayLike, maximize: bool = True) -> None:
        """update(shape(fitness)): one fitness per member of the population (identical on every rank),
        higher is better unless `maximize` is False (the trainers pass their losses that way)."""
        self.update(self.shape(fitness, maximize))

    def update(self, shaped: npt.ArrayLike) -> None:
        """One optimiser step from every member's shaped fitness (`shape`'s output); `step` advances."""
        self.optimizer.step(self.gradient_of(shaped))
        self.step += 1
