"""The one convention of every strategy's `tell`: one fitness per member asked, higher is better.
A caller that scores members by a loss passes `maximize=False`; `fitness_of` is the one place where
that sign flips (DESIGN.md: fitness is "higher is better" inside evolution code)."""

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from eggnog.runtime.errors import BadInput


def fitness_of(values: npt.ArrayLike, members: int, maximize: bool = True) -> npt.NDArray[np.float64]:
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


DEFAULT_NAME = "params"  # the one tensor of a plain vector


def named_tensors(params: npt.ArrayLike | Mapping[str, npt.ArrayLike],
                  dtype: npt.DTypeLike) -> dict[str, np.ndarray]:
    """{name: array} from one vector of `dtype` or a mapping of such vectors and matrices: what a search's
    parameters may be. Refuses an empty mapping, another dtype or rank, an empty array, a non-finite value."""
    dtype = np.dtype(dtype)
    kind = f"{'an' if dtype.name[0] in 'aeiou' else 'a'} {dtype.name}"
    tensors = dict(params) if isinstance(params, dict) else {DEFAULT_NAME: params}
    if not tensors:
        raise BadInput(f"params holds no tensors: give {kind} vector or a dict of {dtype.name} vectors and matrices")
    out = {}
    for name, value in tensors.items():
        array = np.asarray(value)
        if array.dtype != dtype or array.ndim not in (1, 2) or array.size == 0:
            raise BadInput(f"params tensor {name!r} must be a non-empty 1-D or 2-D {dtype.name} array, got "
                           f"{array.ndim}-D {array.dtype}")
        if not np.isfinite(array).all():
            raise BadInput(f"params tensor {name!r} holds a value that is not finite")
        out[str(name)] = array
    return out
