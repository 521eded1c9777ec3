"""The EGG model's parameter layout, shared by the model, the epoch's reference, CPU twin and CUDA kernel:
its tensors in tensor-id order (the id is also the tensor's noise stream), their shapes, kinds and offsets
in the flat int8 buffer.
"""

from eggnog.kernels.core.flat_layout import with_offsets

VOCAB = 256
# Per-layer tensors, in tensor-id order after the embedding; ln_out and head follow the last layer.
LAYER_TENSORS = (("ln1", "vector", (1,)), ("gru.wf", "matrix", (1, 1)), ("gru.uf", "matrix", (1, 1)),
                 ("gru.wh", "matrix", (1, 1)), ("gru.uh", "matrix", (1, 1)), ("gru.bf", "vector", (1,)),
                 ("gru.bh", "vector", (1,)), ("ln2", "vector", (1,)), ("mlp.up", "matrix", (4, 1)),
                 ("mlp.down", "matrix", (1, 4)))
LN1, WF, UF, WH, UH, BF, BH, LN2, UP, DOWN = range(1, 11)  # offsets of a layer's tensor ids from 1 + 10 * layer


def egg_layout(n_layer, dim):
    """(name, shape, kind, offset) of every tensor, in tensor-id order."""
    specs: list[tuple[str, tuple[int, ...], str]] = [("embedding", (VOCAB, dim), "embedding")]
    for layer in range(n_layer):
        specs += [(f"layers.{layer}.{name}", tuple(m * dim for m in mult), kind) for name, kind, mult in LAYER_TENSORS]
    specs += [("ln_out", (dim,), "vector"), ("head", (VOCAB, dim), "matrix")]
    return with_offsets(specs)


def layer_tensor(layer, which):
    """Tensor id of a layer's tensor (which: LN1 ... DOWN)."""
    return 10 * layer + which


def head_tensors(n_layer):
    """Tensor ids of ln_out and head."""
    return 10 * n_layer + 1, 10 * n_layer + 2
