"""Float EGGROLL on a fitness of your own: ask for members, score them, tell the scores.

    es = FloatEggrollSearch(np.zeros(8, np.float32), population=32, seed=0, sigma=0.1, lr=0.05)
    for _ in range(100):
        members = es.ask()                               # (32, 8) float32
        es.tell([loss(m) for m in members], maximize=False)
    es.host_params()

The parameters are one float32 vector or named float32 tensors (a dict: 1-D tensors are vectors with
full noise, 2-D tensors matrices with EGGROLL's low-rank noise); members are flat, `views(member)`
names their parts. The strategy is `FloatEggroll` itself (evolution/float_eggroll.py): the trainers'
update, with an optimiser of training/optimizers.py."""

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from eggnog.evolution.float_eggroll import FloatEggroll, FloatEggrollConfig
from eggnog.kernels.core.backend import Backend
from eggnog.models.flat_params import FlatParams
from eggnog.runtime.errors import BadInput
from eggnog.training.ask_tell import named_tensors
from eggnog.training.optimizers import make_optimizer

SHAPINGS = {"zscore": "global", "group_zscore": "group"}  # shaping -> FloatEggrollConfig.fitness


class FloatEggrollSearch(FloatEggroll):
    """Float EGGROLL's ask/tell on float32 parameters scored by any fitness.

    params       a float32 vector, or {name: float32 vector or matrix}
    population   members per step, even (antithetic pairs: member 2p adds the noise, 2p + 1 subtracts it)
    seed         the noise key: two searches made with the same seed ask the same members
    sigma        the noise scale: vectors move by sigma eps, matrices by sigma A B^T / sqrt(rank)
    lr           the optimiser's learning rate; optimizer "sgd" (with `momentum`), "adamw" or "sf-adamw"
    shaping      "zscore" (fitness z-scored over the population) or "group_zscore" (each group's mean
                 removed first; `group_size` members a group)
    rank         the rank r of a matrix's perturbation
    **config     any other FloatEggrollConfig field (noise_reuse, freeze_vectors, ...)

    ask() gives (population, n) float32 members on the host; tell(fitness, maximize=True) takes one
    fitness per member in that order, higher is better (maximize=False when they are losses).
    `params` / `host_params()` hold the parameters, `step` the steps told; `views(flat)` names the
    tensors of a flat vector."""

    def __init__(self, params: npt.ArrayLike | Mapping[str, npt.ArrayLike], population: int = 32, seed: int = 0,
                 sigma: float = 0.1, lr: float = 0.05,
                 optimizer: str = "sgd", momentum: float = 0.0, shaping: str = "zscore", rank: int = 1,
                 group_size: int = 2, backend: Backend | None = None, **config: Any) -> None:
        if shaping not in SHAPINGS:
            raise BadInput(f"unknown shaping {shaping!r}: choose one of {', '.join(SHAPINGS)}")
        tensors = named_tensors(params, np.float32)
        model = FlatParams([(name, a.shape, "vector" if a.ndim == 1 else "matrix", None)
                            for name, a in tensors.items()])
        try:
            cfg = FloatEggrollConfig(population=population, sigma=sigma, perturbation_rank=rank,
                                     group_size=group_size, fitness=SHAPINGS[shaping], **config)
        except TypeError as error:
            raise BadInput(f"FloatEggrollSearch got an option FloatEggrollConfig does not have ({error})") from None
        cfg.check()
        backend = backend or Backend("cpu")
        flat = np.concatenate([a.reshape(-1) for a in tensors.values()])
        super().__init__(model, cfg, backend, make_optimizer(optimizer, backend.to_device(flat), lr,
                                                             momentum=momentum), seed)

    def views(self, flat: npt.ArrayLike) -> dict[str, np.ndarray]:
        """The named tensors of one flat parameter vector (a member from `ask`, or `host_params()`)."""
        return self.model.views(np.asarray(flat))
