"""The one convention of every strategy's `tell`: one fitness per member asked, higher is better.
A caller that scores members by a loss passes `maximize=False`; `fitness_of` is the one place where
that sign flips (DESIGN.md: fitness is "higher is better" inside evolution code)."""

import numpy as np

from eggnog.runtime.errors import BadInput


def fitness_of(values, members: int, maximize: bool = True) -> np.ndarray:
    """`values` (one number per member, in the order `ask` gave the members) as float64 fitness, higher
    is better: negated when `maximize` is False (the values are losses). Refuses a count other than
    `members`, and any value that is not finite."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise BadInput(f"tell takes one number per member, got {type(values).__name__}") from None
    if array.ndim != 1 or array.size != members:
        raise BadInput(f"tell takes one fitness per member asked ({members}), got shape {array.shape}")
    if not np.isfinite(array).all():
        bad = int(np.flatnonzero(~np.isfinite(array))[0])
        raise BadInput(f"tell was given a fitness that is not finite ({array[bad]}) for member {bad}")
    return array if maximize else -array
