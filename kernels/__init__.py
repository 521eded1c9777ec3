"""Hand-written kernels, a sub-package per family: `core` (shared machinery, no ops), `checks`,
`noise`, `egg`, `transformer`, `rnn`, `layers` and `optim` (docs/kernels.md has the table of every
family, module and op).

Every op has three implementations in one module of a family: `reference_<op>` (NumPy),
`cpu_<op>` (the CPU twin) and `cuda_<op>` (the launcher of its CUDA kernel), recorded by `@op` in
one registry (core/registry.py), which the generated tests read. Call an op by its name, imported
from its module, with the `Kernels` it runs on first:

    from eggnog.kernels.core.placement import kernels_for
    from eggnog.kernels.layers.matmul import matmul

    y = matmul(kernels_for("cpu"), x, w)   # "numpy", "cpu" or "cuda"; precision "fp32", "tf32", "bf16"

Importing this package points numba's compile cache at eggnog's folder (core/compile_cache.py)."""

import os

# numba's OpenMP pool otherwise spins after every parallel loop on the cores that the next loop and the
# product threads need (MinGRU BPTT, 256 x 4 on 2 cores: 1.10 -> 0.96 s a step); libgomp reads this
# when numba first loads it. A policy the user set is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from eggnog.kernels.core.compile_cache import use_compile_cache  # noqa: E402  (after the wait policy)

use_compile_cache()
