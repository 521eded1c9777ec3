"""The int8 EGG model (nano-egg) over a population: integer ops, bit-identical on every backend.

    layout            the parameter layout: tensors in tensor-id order, shapes, offsets
    int_math          integer scalar math (clip, shifts, the exact log-likelihood), CPU and GPU
    member_ops        ops: the element- and row-wise steps of the model per member
    int_matmul        op: int8 matmul with the EGGROLL rank-1 perturbation fused in
    int_update        ops: the integer EGGROLL update and d-eggs' vote
    changed           op: how many parameters an update moved, counted on the device
    epoch             op: a whole evaluation epoch in one call (reference, dispatch)
    epoch_cpu         its CPU twin: prange over member tiles, bytes and layers inside
    epoch_cuda        its CUDA kernel: a block carries a member tile through the window on int8 tensor cores
"""
