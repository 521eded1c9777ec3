"""Validation of a MinGRU LM: mean bits/byte of the unperturbed model over a fixed sample of the
validation split, each row read from a zero state in one parallel pass; rows shared over ranks."""

from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from eggnog.kernels.core.placement import Kernels
from eggnog.kernels.layers.losses import cross_entropy
from eggnog.kernels.layers.weighted_sums import weighted_row_sums
from eggnog.models.validation_sample import sample_shape

if TYPE_CHECKING:
    from eggnog.models.mingru import MinGruModel


class ByteSplit(Protocol):
    """A corpus split as validation reads it: a memory map, an array or a block reader."""

    def __len__(self) -> int: ...

    def __getitem__(self, item: slice) -> npt.ArrayLike: ...


class Ranks(Protocol):
    """What validation asks of the process group (runtime/world.py's World)."""

    rank: int
    size: int

    def allgather_array(self, local: np.ndarray) -> np.ndarray: ...


def val_windows(val: ByteSplit, rows: int, tokens: int) -> npt.NDArray[np.uint8]:
    """`rows` consecutive windows of tokens + 1 bytes from the start of the validation split, fewer
    (and at most the split long) where it is small (models/validation_sample.py)."""
    rows, tokens = sample_shape(len(val), rows, tokens)
    length = tokens + 1
    return np.stack([np.asarray(val[r * length:(r + 1) * length], np.uint8) for r in range(rows)])


def val_bpb(model: "MinGruModel", ops: Kernels, flat_params: npt.ArrayLike, windows: np.ndarray, world: Ranks) -> float:
    mine = np.array_split(np.arange(windows.shape[0]), world.size)[world.rank]
    total = 0.0
    if mine.size:
        p = model.views(ops.to_device(flat_params))
        rows = windows[mine]
        logits, _, _ = model.forward(ops, p, rows[:, :-1])
        loss, _ = cross_entropy(ops, logits, ops.to_device(np.ascontiguousarray(rows[:, 1:]).reshape(-1)))
        ones = np.ones(loss.size, np.float32)
        total = float(ops.to_host(weighted_row_sums(ops, loss.reshape(1, loss.size), ones))[0])
    total = float(world.allgather_array(np.array([total])).sum())
    return total / (windows.shape[0] * (windows.shape[1] - 1))
