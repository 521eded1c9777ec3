"""Named tensors laid out in one flat parameter vector, the layout every float model here shares:
specs are (name, shape, ...) in storage order; perturbing, updating, checkpointing and reducing a
model is then one operation on one array."""

import math

import numpy as np


class FlatParams:
    def __init__(self, specs):
        self.specs = specs
        self.offsets, total = {}, 0
        for name, shape, *_ in specs:
            self.offsets[name] = (total, shape)
            total += math.prod(shape)
        self.n_params = total

    def views(self, flat, extra=None):
        """Named tensors over a flat vector (host or device; no copies), plus `extra` named
        (start, shape) ranges."""
        ranges = {**self.offsets, **(extra or {})}
        return {name: flat[start:start + math.prod(shape)].reshape(shape) for name, (start, shape) in ranges.items()}

    def flatten(self, tensors, ops, dtype=np.float32, extra=None):
        """One host vector from named tensors (e.g. gradients) in storage order; tensors not given
        stay zero."""
        ranges = {**self.offsets, **(extra or {})}
        flat = np.zeros(self.n_params, dtype)
        for name, value in tensors.items():
            start, shape = ranges[name]
            flat[start:start + math.prod(shape)] = np.asarray(ops.to_host(value)).reshape(-1)
        return flat

    def flatten_on(self, tensors, ops):
        """`flatten` where the tensors are: one backend vector (a device array on the GPU, with no trip
        through the host)."""
        if ops.name != "cuda":
            return self.flatten(tensors, ops, ops.dtype)
        flat = ops.zeros(self.n_params)
        for name, value in tensors.items():
            start, shape = self.offsets[name]
            size = math.prod(shape)
            value = value if hasattr(value, "copy_to_host") else ops.to_device(np.asarray(value, np.float32))
            flat[start:start + size].copy_to_device(value.reshape(size))
        return flat

    def tensor_table(self):
        """The `tensors` rows of an architecture record."""
        return [{"name": spec[0], "shape": list(spec[1]), **({"kind": spec[2]} if len(spec) > 3 else {}),
                 "params": math.prod(spec[1])} for spec in self.specs]
