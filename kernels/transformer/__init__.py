"""d-eggs' integer transformer over a population.

    layout            tensors in tensor-id order, the spec array, per-member buffer offsets
    tables            RoPE, exp and GELU look-up tables, built once on the host
    epoch             ops: the epoch over a window, and the last logits of a context (reference, dispatch)
    epoch_cpu         their CPU twin
    epoch_cuda        their CUDA kernel (a block per member)
    sampler           op: d-eggs' integer sampler (temperature, min-p, presence penalty)
"""
