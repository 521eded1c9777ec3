"""fp32 layers of the float models, forward and backward.

    matmul            ops: linear layers and batched products (SIMT)
    matmul_tf32       op: a linear layer on TF32 tensor cores
    matmul_bf16       ops: a linear layer and its two gradients on bf16 tensor cores
    lowrank           ops: the member-specific part of a low-rank perturbed layer (float EGGROLL)
    elementwise       ops: adds, biases, column sums, per-member affine maps, ...
    activations       ops: GELU, sigmoid, tanh
    norms             ops: RMSNorm and LayerNorm
    softmax_rows      ops: softmax along rows
    losses            op: cross-entropy in bits with its gradient
    embedding         ops: embedding lookup and its scatter-add gradient
    weighted_sums     op: float64 weighted sums of rows
"""
