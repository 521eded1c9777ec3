"""Integer EGGROLL on a fitness of your own: ask for members, score them, tell the scores.

    es = IntEggrollSearch(np.zeros(16, np.int8), population=32, seed=0)
    for _ in range(50):
        members = es.ask()                               # (32, 16) int8
        es.tell([score(m) for m in members])             # higher is better
    es.params

The parameters are one int8 vector or named int8 tensors (a dict: 1-D tensors are vectors with their
own noise, 2-D tensors matrices with EGGROLL's rank-1 noise); members are flat, `views(member)` names
their parts. The strategy is `IntEggroll` itself (evolution/eggroll.py): the trainers' update."""

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from eggnog.evolution.eggroll import IntEggroll, IntEggrollConfig
from eggnog.kernels.core.backend import Backend
from eggnog.kernels.noise.scalar_math import EGG_NOISE
from eggnog.models.egg import IntTensorModel
from eggnog.runtime.errors import BadInput
from eggnog.training.ask_tell import named_tensors

SHAPINGS = {"pair_signs": True, "pair_zscores": False}  # shaping -> IntEggrollConfig.fast_fitness


class IntTensors(IntTensorModel):
    """A user's int8 tensors, laid out in one flat buffer in the order given (no forward of its own:
    members are scored by the caller's fitness)."""

    noise_kind = EGG_NOISE
    lr_scale: dict[str, float] = {}
    has_proxy_loss = False
    state_dims = (0, 0)

    def __init__(self, shapes: Mapping[str, tuple[int, ...]]) -> None:
        layout: list[tuple[str, tuple[int, ...], str, int]] = []
        at = 0
        for name, shape in shapes.items():
            layout.append((name, shape, "vector" if len(shape) == 1 else "matrix", at))
            at += int(np.prod(shape))
        super().__init__(layout)


class IntEggrollSearch(IntEggroll):
    """Integer EGGROLL's ask/tell on int8 parameters scored by any fitness.

    params       an int8 vector, or {name: int8 vector or matrix}
    population   members per step, even (antithetic pairs: member 2p adds the noise, 2p + 1 subtracts it)
    seed         the noise key: two searches made with the same seed ask the same members
    shaping      "pair_signs" (sign of each pair's fitness difference, integer EGGROLL's fast fitness) or
                 "pair_zscores" (the differences z-scored over the population)
    sigma_shift  noise scale: a perturbation is (noise product) >> (4 + sigma_shift), noise std 16
    optimizer    "ztest" (nano-egg's z-test gated +-1 step) or "adamw" (d-eggs' quantized AdamW)
    **config     any other IntEggrollConfig field (alpha, alpha_decay_timestep, lr, noise_reuse, ...)

    ask() gives (population, n) int8 members on the host; tell(fitness, maximize=True) takes one
    fitness per member in that order, higher is better (maximize=False when they are losses), and
    returns the fraction of parameters moved. `params` / `host_params()` hold the parameters, `step`
    the steps told; `views(flat)` names the tensors of a flat vector."""

    def __init__(self, params: npt.ArrayLike | Mapping[str, npt.ArrayLike], population: int = 32, seed: int = 0,
                 shaping: str = "pair_signs",
                 sigma_shift: int = 4, optimizer: str = "ztest", backend: Backend | None = None, **config: Any) -> None:
        if shaping not in SHAPINGS:
            raise BadInput(f"unknown shaping {shaping!r}: choose one of {', '.join(SHAPINGS)}")
        tensors = named_tensors(params, np.int8)
        model = IntTensors({name: a.shape for name, a in tensors.items()})
        try:
            cfg = IntEggrollConfig(population=population, sigma_shift=sigma_shift, optimizer=optimizer,
                                   fast_fitness=SHAPINGS[shaping], group_size=2, **config)
        except TypeError as error:
            raise BadInput(f"IntEggrollSearch got an option IntEggrollConfig does not have ({error})") from None
        cfg.check()
        flat = np.concatenate([a.reshape(-1) for a in tensors.values()])
        super().__init__(model, cfg, backend or Backend("cpu"), flat, seed)

    def views(self, flat: npt.ArrayLike) -> dict[str, np.ndarray]:
        """The named tensors of one flat parameter vector (a member from `ask`, or `host_params()`)."""
        return self.model.views(np.asarray(flat))
