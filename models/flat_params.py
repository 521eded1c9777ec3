"""Named tensors laid out in one flat parameter vector, the layout every float model here shares:
specs are (name, shape, ...) in storage order; perturbing, updating, checkpointing and reducing a
model is then one operation on one array."""

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from eggnog.kernels.core.placement import BackendArray, Kernels

# a spec: (name, shape, ...) with the model's own trailing fields (kind, init)
Spec = tuple[Any, ...]
# extra named ranges of a flat vector: {name: (start, shape)}
Ranges = Mapping[str, tuple[int, tuple[int, ...]]]


class FlatParams:
    def __init__(self, specs: Sequence[Spec]) -> None:
        self.specs = specs
        self.offsets: dict[str, tuple[int, tuple[int, ...]]] = {}
        total = 0
        for name, shape, *_ in specs:
            self.offsets[name] = (total, shape)
            total += math.prod(shape)
        self.n_params = total

    def views(self, flat: BackendArray, extra: Ranges | None = None) -> dict[str, BackendArray]:
        """Named tensors over a flat vector (host or device; no copies), plus `extra` named
        (start, shape) ranges."""
        ranges = {**self.offsets, **(extra or {})}
        return {name: flat[start:start + math.prod(shape)].reshape(shape) for name, (start, shape) in ranges.items()}

    def flatten(self, tensors: Mapping[str, Any], ops: Kernels, dtype: npt.DTypeLike = np.float32,
                extra: Ranges | None = None) -> np.ndarray:
        """One host vector from named tensors (e.g. gradients) in storage order; tensors not given
        stay zero, and a tensor given as a tuple of parts fills its range part after part."""
        ranges = {**self.offsets, **(extra or {})}
        flat = np.zeros(self.n_params, dtype)
        for name, value in tensors.items():
            start, shape = ranges[name]
            parts = value if isinstance(value, tuple) else (value,)
            flat[start:start + math.prod(shape)] = np.concatenate([np.asarray(ops.to_host(v)).reshape(-1)
                                                                   for v in parts])
        return flat

    def flatten_on(self, tensors: Mapping[str, Any], ops: Kernels, extra: Ranges | None = None) -> BackendArray:
        """`flatten` where the tensors are: one backend vector (a device array on the GPU, with no trip
        through the host)."""
        if ops.name != "cuda":
            return FlatParams.flatten(self, tensors, ops, ops.dtype, extra)  # subclasses bind their own extra
        ranges = {**self.offsets, **(extra or {})}
        flat = ops.zeros(self.n_params)
        for name, value in tensors.items():
            at = ranges[name][0]
            for part in value if isinstance(value, tuple) else (value,):
                part = part if hasattr(part, "copy_to_host") else ops.to_device(np.asarray(part, np.float32))
                flat[at:at + part.size].copy_to_device(part.reshape(part.size))
                at += part.size
        return flat

    def tensor_table(self) -> list[dict[str, Any]]:
        """The `tensors` rows of an architecture record."""
        return [{"name": spec[0], "shape": list(spec[1]), **({"kind": spec[2]} if len(spec) > 3 else {}),
                 "params": math.prod(spec[1])} for spec in self.specs]
