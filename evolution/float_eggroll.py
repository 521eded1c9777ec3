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

import numpy as np

from eggnog.evolution.fitness import check_population
from eggnog.kernels.core.backend import Backend
from eggnog.kernels.core.placement import kernels_for, to_host
from eggnog.kernels.layers.elementwise import add_bias, scale_rows
from eggnog.kernels.layers.losses import cross_entropy
from eggnog.kernels.layers.lowrank import lowrank_sum
from eggnog.kernels.layers.weighted_sums import weighted_means
from eggnog.kernels.noise.normal_rows import normal_rows
from eggnog.kernels.noise.scalar_math import prefix_key
from eggnog.models.mingru import MinGruModel
from eggnog.runtime.errors import BadInput
from eggnog.training.optimizers import Optimizer

FITNESS_MODES = ("global", "group")
PRECISIONS = ("auto", "tf32", "fp32")
TENSOR_ID_BASE = 1  # noise tensor id of the first model tensor; 0 stays free


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

    def check(self, ranks=1):
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

    def uses_tf32(self, backend_name):
        return self.forward_precision == "tf32" or (self.forward_precision == "auto" and backend_name == "cuda")

    def noise_epoch(self, step):
        """The noise key's counter at `step` (nano-egg's epoch): --noise-reuse steps share one."""
        return 0 if self.noise_reuse == 0 else step // self.noise_reuse


def zscore_fitness(losses, group_size, mode):
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

    def __init__(self, ops, members, matrices, vectors):
        self.ops, self.members = ops, members
        self._matrices, self._vectors = matrices, vectors
        self._constants = {}

    def matrix(self, name):
        return self._matrices.get(name)

    def vector(self, name):
        return self._vectors.get(name)

    def _constant(self, shape, value):
        key = (shape, value)
        if key not in self._constants:
            self._constants[key] = self.ops.to_device(np.full(shape, value, np.float32))
        return self._constants[key]

    def ones(self, n):
        return self._constant((n,), 1.0)

    def zeros(self, members, n):
        return self._constant((members, n), 0.0)

    def ones_members(self, members, n):
        return self._constant((members, n), 1.0)


class FloatEggroll:
    """The strategy (training/strategy.py) of float EGGROLL: `evaluate(windows)` scores this rank's
    slice of the population, `tell(losses)` takes every member's loss (identical on all ranks) and
    steps the optimiser, which owns the flat float32 parameters on the backend."""

    def __init__(self, model: MinGruModel, cfg: FloatEggrollConfig, backend: Backend, params: Optimizer, seed: int,
                 step: int = 0, first_member: int = 0, members: int | None = None):
        self.model, self.cfg, self.seed = model, cfg, seed
        self.ops = kernels_for(backend.name)
        self.optimizer = params  # an optimiser that owns the flat float32 parameters (on the backend)
        self.step, self.first_member = step, first_member
        self.members = cfg.population if members is None else members
        # the population forward's products: TF32 moves member losses by well under their spread
        # (bench/tf32_fitness.py); gradients, validation and sampling keep fp32
        self.forward_ops = kernels_for(backend.name, "tf32") if cfg.uses_tf32(backend.name) else self.ops
        self.tensor_ids = {name: TENSOR_ID_BASE + i for i, (name, _, _, _) in enumerate(model.specs)}
        self.kinds = {name: (shape, kind) for name, shape, kind, _ in model.specs}

    @property
    def params(self):
        return self.optimizer.train_params()

    def host_params(self) -> np.ndarray:
        return np.array(to_host(self.params), np.float32)

    def host_optimizer_state(self) -> dict[str, np.ndarray]:
        return {name: np.array(to_host(a), np.float32) for name, a in self.optimizer.state()[0].items()}

    def pair_noise(self, name, pairs):
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

    def perturbation(self):
        """The Perturbation of this rank's members at the current step, built on the backend."""
        cfg, ops = self.cfg, self.ops
        member_pairs = np.arange(self.first_member, self.first_member + self.members) // 2
        signs = np.tile(np.array([1.0, -1.0], np.float32), self.members // 2)
        coef = ops.to_device((signs * cfg.sigma / math.sqrt(cfg.perturbation_rank)).astype(np.float32))
        scale = ops.to_device((signs * np.float32(cfg.sigma)).astype(np.float32))
        views = self.model.views(self.params)
        matrices, vectors = {}, {}
        for name, (_shape, kind) in self.kinds.items():
            if kind == "matrix":
                a, b = self.pair_noise(name, member_pairs)
                matrices[name] = (a, b, coef)
            elif not cfg.freeze_vectors:
                eps = self.pair_noise(name, member_pairs)
                vectors[name] = add_bias(ops, scale_rows(ops, eps, scale), views[name])
        return Perturbation(ops, self.members, matrices, vectors)

    def evaluate(self, windows: np.ndarray) -> np.ndarray:
        """Mean loss (bits/byte) of each member of this slice over its (T + 1)-byte window, every
        member from a zero state, all tokens of all members in one pass per layer."""
        ops = self.ops
        windows = np.ascontiguousarray(windows, np.uint8)
        p = self.model.views(ops.to_device(self.params))
        logits, _, _ = self.model.forward(self.forward_ops, p, windows[:, :-1], perturbation=self.perturbation())
        loss, _ = cross_entropy(ops, logits, ops.to_device(np.ascontiguousarray(windows[:, 1:]).reshape(-1)))
        return weighted_means(ops, loss, np.ones(loss.size // windows.shape[0]), windows.shape[0])

    def gradient(self, losses):
        """The ES estimate of the loss gradient (flat float32, on the backend) from every member's loss:
        only the per-pair weights travel to the device."""
        cfg, ops = self.cfg, self.ops
        losses = np.asarray(losses, np.float64)
        if losses.size != cfg.population:
            raise ValueError(f"expected {cfg.population} member losses, got {losses.size}")
        fitness = zscore_fitness(losses, cfg.group_size, cfg.fitness)
        weight = -(fitness[0::2] - fitness[1::2]) / (cfg.population * cfg.sigma)  # per pair, sign folded in
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

    def tell(self, losses: np.ndarray) -> None:
        """One optimiser step from the losses of the whole population (identical on every rank)."""
        self.optimizer.step(self.gradient(losses))
        self.step += 1
