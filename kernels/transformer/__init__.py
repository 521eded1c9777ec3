"""d-eggs' integer transformer over a population.

    layout            tensors in tensor-id order, the spec array, per-member buffer offsets
    tables            RoPE, exp and GELU look-up tables, built once on the host
    epoch             ops: the epoch over a population's windows, and the logits it ends with (reference, dispatch)
    epoch_cpu         their CPU twin (tiles of members on int8 panels), and transformer_decode's
    epoch_cuda        their CUDA kernel (128-row tiles of members' windows on int8 tensor cores)
    decode            op: generation's step, new tokens after a KV cache (reference, dispatch)
    decode_cuda       its CUDA kernel (one block, the cache kept on the device)
    sampler           op: d-eggs' integer sampler (temperature, min-p, presence penalty)
"""
