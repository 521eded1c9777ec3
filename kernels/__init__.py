'''Hand-written kernels, a sub-package per family:

    core          shared machinery, no ops: the registry, numba.cuda and launch helpers, the backend,
                  block reductions, tensor-core products (mma), vector loads, CPU loop helpers
    checks        the node's self-check ops and the PTX compile check
    noise         counter-based noise streams, noise gains, CD-RGE perturbations
    egg           the int8 EGG model: its layout, integer ops, matmul, update and fused epoch
    transformer   d-eggs' integer transformer: its layout, tables, epoch and sampler
    rnn           the MinGRU scan, the multi-head LSTM, the DNC's cell, memory and addressing
    layers        fp32 layers: matmuls (SIMT and TF32), low-rank products, norms, activations, losses
    optim         optimiser steps on the device (SGD, AdamW, Schedule-Free AdamW, d-eggs' quantized AdamW)

Families import core and build on one another one way only (tests/test_import_cycles.py). A family's
layout (tensor order, offsets, constants) sits in a module of its own, `layout.py`, that its reference,
CPU and CUDA halves import, so no family imports in a circle; a big op keeps its halves beside it as
`<op>_cpu.py` and `<op>_cuda.py`.

Every operation has three implementations under one name, recorded in one registry
(`eggnog.kernels.core.registry`; it imports every module of every family, so every op is found):

    reference_<op>   NumPy, plain and obviously right (float64 where that helps)
    cpu_<op>         the CPU twin (numba.njit, prange where it pays; `cpu_jit.parallel_jit` runs a
                     small call's loops serially): what runs without a GPU
    cuda_<op>        the launcher of the CUDA kernel(s) defined beside it with `cuda_api.kernel`

All three take the same arguments and return the same things (or write the same arguments in place).
`@op` records each; on the reference it also takes the cases the generated tests run
(tests/test_kernel_ops.py: reference = twin = simulator, for every op) and the tolerance of a float op
(none: bit-identical). `registry.ops_for("numpy" | "cpu" | "cuda")` gives every op of one backend by
name. `numba.cuda` and the launch helpers (signature types, `blocks`, `grid2`, `f64`) come from
`core.cuda_api`; block reductions from `core.reductions`. Adding an op is writing these three functions
in one module of a family and naming the op in that module's row of the kernel table of docs/kernels.md
(tests/test_docs.py checks it); no other code is touched. A complete example:

    import numba
    import numpy as np

    from eggnog.kernels.core.cuda_api import F32_1D, blocks, cuda, f64, kernel
    from eggnog.kernels.core.registry import op


    def _scale_cases(rng):  # 1 element, a partial block, several blocks
        for n in (1, 255, 700):
            yield rng.normal(size=n).astype(np.float32), np.float32(0.5)


    @op(cases=_scale_cases, tolerance=(1e-6, 0.0))
    def reference_scale(x, a):
        return f64(x) * float(a)


    @op
    @numba.njit(parallel=True, cache=True)
    def cpu_scale(x, a):
        out = np.empty_like(x)
        for i in numba.prange(x.size):
            out[i] = x[i] * a
        return out


    @kernel((F32_1D, numba.float32, F32_1D))
    def scale_cuda(x, a, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = x[i] * a


    @op
    def cuda_scale(x, a):
        out = cuda.device_array_like(x)
        scale_cuda[blocks(x.size)](x, np.float32(a), out)
        return out

Reuse a kernel from your own code with `from eggnog.kernels.rnn.scan import cpu_scan_forward` (or
`ops_for(...)`); arrays may be NumPy arrays, numba device arrays or anything with
`__cuda_array_interface__`.
'''

import os

# numba's OpenMP pool otherwise spins after every parallel loop on the cores that the next loop and the
# product threads need (MinGRU BPTT, 256 x 4 on 2 cores: 1.10 -> 0.96 s a step); libgomp reads this
# when numba first loads it. A policy the user set is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from eggnog.kernels.core.compile_cache import use_compile_cache  # noqa: E402  (after the wait policy)

use_compile_cache()
