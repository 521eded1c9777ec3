"""The interface every training strategy shares (integer EGGROLL: evolution/eggroll.py, float EGGROLL:
evolution/float_eggroll.py, CD-RGE and FDRAS: zorn/rge/trainer.py), in the spirit of evosax's
init / ask / tell. A strategy is made from (model, cfg, backend, params, seed, step), the same six
arguments in the same order for all three; its noise is keyed by (seed, step), so two made alike ask
the same members. EGGROLL's `ask()` gives one row of parameters per member; `tell(fitness)` takes one
fitness per member in that order, higher is better (`maximize=False` for losses), and is
`update(shape(fitness))`: `shape` makes what the update consumes (pair signs or z-scores), `update`
applies the optimiser. Trainers evaluate this rank's members, shape what is local, gather, update:

    results = strategy.evaluate(*batch)                  # this rank's results at strategy.step
    strategy.update(gathered(strategy.shape(results)))   # integer EGGROLL (pair signs are local)
    strategy.tell(gathered(results), maximize=False)     # float EGGROLL (losses, shaped over all)
"""

from typing import Any, Protocol, runtime_checkable

import numpy as np

# the leading parameters of every strategy's constructor; `params` is the flat parameter vector, or
# the optimiser object that owns it (float EGGROLL)
STRATEGY_ARGUMENTS = ("model", "cfg", "backend", "params", "seed", "step")


@runtime_checkable
class Strategy(Protocol):
    step: int  # steps told; the noise of a step is keyed by it

    def evaluate(self, *batch: Any) -> np.ndarray:
        """This rank's results for the current step: scores, losses or (probe, L+, L-) rows."""

    def tell(self, results: Any) -> object:
        """Update from every rank's results of the current step and advance `step` (EGGROLL: one
        fitness per member, higher is better, `maximize=False` for losses)."""

    def host_params(self) -> np.ndarray:
        """A host copy of the flat parameters."""

    def host_optimizer_state(self) -> dict[str, np.ndarray]:
        """Host copies of the optimiser's arrays ({} for a stateless update)."""
