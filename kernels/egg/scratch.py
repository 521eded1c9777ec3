"""Device memory the fused EGG epoch keeps between calls: its constant tables, uploaded once per model
shape, and its scratch arrays (a pair's noise rows, the members' perturbed vectors: hundreds of MB at
large populations), allocated again only when their size changes. So an epoch launches with no
allocation and no synchronous upload besides its own inputs.

    scratch = Scratch.of(plan)                 # one per (n_layer, dim) in a process
    noise8 = scratch.array("noise", n, np.int8)
    scratch.tables, scratch.gain_off, scratch.exp2
"""

from typing import Any

import numpy as np

from eggnog.kernels.core.cuda_api import cuda


class Scratch:
    _by_shape: dict[tuple[int, ...], Any] = {}

    def __init__(self, plan, exp2):
        self.tables = tuple(cuda.to_device(a) for a in (plan.param_off, plan.noise_off, plan.noise_cnt,
                                                         plan.vec_tensor))
        self.gain_off = cuda.to_device(plan.gain_off)
        self.exp2 = cuda.to_device(exp2)
        self._arrays = {}

    @classmethod
    def of(cls, plan, exp2):
        key = (plan.shape, exp2.dtype.str)
        if key not in cls._by_shape:
            cls._by_shape[key] = cls(plan, exp2)
        return cls._by_shape[key]

    def array(self, name, size, dtype):
        """A device array of `size` elements, the one of the last call under this name if it has that size
        (its contents are whatever that call left)."""
        held = self._arrays.get(name)
        if held is None or held.size != size or held.dtype != np.dtype(dtype):
            self._arrays.pop(name, None)  # free the old one before the new one is allocated
            held = self._arrays[name] = cuda.device_array(size, dtype)
        return held
