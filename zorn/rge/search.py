"""CD-RGE and FDRAS as ask/tell on any loss, in the style of evosax: the caller scores the members,
`tell` hands the scores to RgeTrainer.tell (zorn/rge/trainer.py), the one update every CD-RGE run
applies.

    opt = RgeSearch(np.zeros(32, np.float32), probes=16, lr=0.05, seed=0)
    for _ in range(200):
        opt.tell([loss(m) for m in opt.ask()], maximize=False)
    opt.params
"""

import numbers
from typing import Any

import numpy as np
import numpy.typing as npt

from eggnog.kernels.core.backend import Backend, current_backend
from eggnog.kernels.core.placement import to_host
from eggnog.runtime.errors import BadInput
from eggnog.training.ask_tell import fitness_of
from eggnog.zorn.rge.trainer import RgeConfig, RgeTrainer

DEFAULTS = RgeConfig()


class RgeSearch:
    """CD-RGE or FDRAS over one flat float32 parameter vector, evaluated by the caller.

    `ask()` returns the members of the current step, an array (population, n) float32:
      solver "cdrge": 2 * probes members; member 2i is theta + eps z_i, member 2i+1 is theta - eps z_i.
      solver "fdras": 1 + probes members; member 0 is theta itself, member 1 + i is theta + eps z_i
                      (with `antithetic`, probes 2j and 2j+1 share z_j: theta + eps z_j, theta - eps z_j).
    z_i comes from the counter-based key (seed, step, i), so two searches with the same seed and
    parameters ask the same members, and asking twice in a step gives the same members.

    `tell(fitness, maximize=True)` takes one number per member, in the order `ask` gave them, higher is
    better; pass `maximize=False` when the numbers are losses (the usual case). It applies the update of
    RgeTrainer (eggnog.zorn.rge.trainer): g = (1/n) sum_i (L+_i - L-_i) / (2 eps) z_i for cdrge,
    (L+_i - L(theta)) / eps z_i for fdras, with L = -fitness, then SGD (theta -= lr g), momentum or
    Adam; `step` advances by one.

    Settings are those of RgeConfig: `sigma` is eps (None: eps = lr, as the authors ran it),
    `optimizer` one of sgd, momentum, adam, `distribution` one of rademacher, normal, uniform.
    `backend` is where theta and the optimiser live (None: the process backend); members come back
    to the host. Readable state: `params`, `step`, `population`, `config`, `seed`."""

    def __init__(self, params: npt.ArrayLike, *, solver: str = DEFAULTS.solver, probes: int = DEFAULTS.probes,
                 lr: float = DEFAULTS.lr, sigma: float | None = DEFAULTS.sigma, optimizer: str = DEFAULTS.optimizer,
                 beta1: float = DEFAULTS.beta1, beta2: float = DEFAULTS.beta2,
                 distribution: str = DEFAULTS.distribution, antithetic: bool = DEFAULTS.antithetic,
                 seed: int = 0, step: int = 0, backend: Backend | None = None) -> None:
        vector = _parameter_vector(params)
        _check_whole("probes", probes, 1, None)
        _check_whole("seed", seed, 0, 1 << 64)
        _check_whole("step", step, 0, 1 << 32)
        for name, value in (("lr", lr), ("sigma", 1.0 if sigma is None else sigma), ("beta1", beta1),
                            ("beta2", beta2)):
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise BadInput(f"{name} must be a number, got {value!r}")
        if backend is not None and not isinstance(backend, Backend):
            raise BadInput(f"backend must be an eggnog Backend or None, got {type(backend).__name__}")
        config = RgeConfig(solver=solver, probes=int(probes), lr=float(lr),
                           sigma=None if sigma is None else float(sigma), optimizer=optimizer, beta1=float(beta1),
                           beta2=float(beta2), distribution=distribution, antithetic=bool(antithetic))
        # the caller evaluates the members, so the trainer holds no model; its tell is the update
        self._trainer = RgeTrainer(None, config, current_backend() if backend is None else backend, vector,
                                   int(seed), int(step))

    @property
    def config(self) -> RgeConfig:
        return self._trainer.cfg

    @property
    def seed(self) -> int:
        return self._trainer.seed

    @property
    def step(self) -> int:
        """Steps told so far; the members of a step are keyed by it."""
        return self._trainer.step

    @property
    def params(self) -> np.ndarray:
        """A host copy of theta (float32, shape (n,))."""
        return self._trainer.host_params()

    @property
    def population(self) -> int:
        """Members `ask` returns: 2 * probes for cdrge, 1 + probes for fdras."""
        probes = self.config.probes
        return 2 * probes if self.config.solver == "cdrge" else 1 + probes

    def optimizer_state(self) -> dict[str, np.ndarray]:
        """Host copies of the optimiser's arrays ({} for plain SGD)."""
        return self._trainer.host_optimizer_state()

    def ask(self) -> np.ndarray:
        """The members of the current step, (population, n) float32, in the order the class docstring
        gives (cdrge: 2i = theta + eps z_i, 2i+1 = theta - eps z_i; fdras: 0 = theta, 1 + i = theta + eps z_i).
        theta and the step are untouched."""
        trainer = self._trainer
        members = np.empty((self.population, trainer.theta.size), np.float32)
        first = 0
        if self.config.solver == "fdras":
            members[0] = to_host(trainer.theta)
            first = 1
        for row, (key, alpha) in enumerate(zip(*trainer.perturbations()), start=first):
            members[row] = to_host(trainer.perturbed(key, alpha))
        return members

    def tell(self, fitness: npt.ArrayLike, maximize: bool = True) -> None:
        """Update theta from one fitness per member of the last `ask`, in its order; higher is better,
        or lower with `maximize=False` (losses). Refuses a wrong count or a non-finite value (BadInput)
        before touching theta; `step` advances by one."""
        losses = -fitness_of(fitness, self.population, maximize)
        probes = self.config.probes
        if self.config.solver == "cdrge":
            plus, minus = losses[0::2], losses[1::2]
        else:
            plus, minus = losses[1:], np.full(probes, losses[0])
        self._trainer.tell(np.stack([np.arange(probes, dtype=np.float64), plus, minus], axis=1))


def _parameter_vector(params: npt.ArrayLike) -> np.ndarray:
    try:
        array = np.asarray(params)
    except (TypeError, ValueError):
        raise BadInput(f"params must be a 1-D array of numbers, got {type(params).__name__}") from None
    if array.ndim != 1 or array.size == 0 or not (np.issubdtype(array.dtype, np.floating)
                                                  or np.issubdtype(array.dtype, np.integer)):
        raise BadInput(f"params must be a non-empty 1-D array of real numbers, got {array.dtype} of shape "
                       f"{array.shape}")
    vector = np.array(array, np.float32)
    if not np.isfinite(vector).all():
        raise BadInput(f"params must be finite in float32, got {vector[~np.isfinite(vector)][0]} at index "
                       f"{int(np.flatnonzero(~np.isfinite(vector))[0])}")
    return vector


def _check_whole(name: str, value: Any, low: int, high: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise BadInput(f"{name} must be a whole number, got {value!r}")
    if int(value) < low or (high is not None and int(value) >= high):
        bound = f"at least {low}" if high is None else f"in [{low}, {high})"
        raise BadInput(f"{name} must be {bound}, got {value}")
