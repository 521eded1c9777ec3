"""What every kernel family shares; no ops of its own.

    compile_cache     numba's on-disk cache in a folder keyed by the sources (set when kernels are imported)
    registry          @op and `registered`, the family discovery, `ops_for` for the tests
    placement         `Kernels`: where ops run (backend, precision) and arrays live; `to_host`
    cuda_api          numba.cuda for the kernels, `kernel` (signatures, launch traits), grid helpers
    backend           the process's backend (cpu / cuda), chosen once; BLAS thread caps
    numpy_compat      numpy names numba-cuda still uses, put back before its first compile
    reductions        block-wide sums and maxima of the row kernels (device functions)
    mma               warp tensor-core products (int8 m16n8k32, TF32 m16n8k8), simulated off-GPU
    loads             128-bit / 64-bit vector loads and stores (device functions)
    cuda_fast_math    approximate fp32 device arithmetic (rcp.approx)
    cpu_vector_math   branch-free fp32 exp / sigmoid / tanh that LLVM vectorises in the CPU twins
    cpu_jit, cpu_products   parallel CPU loops (serial when small); the twins' fp32 matrix products
    flat_layout       tensors laid end to end in one flat buffer (the models' layouts)
"""
