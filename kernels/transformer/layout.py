"""The integer transformer's layout, shared by the model, the epoch's reference, CPU twin and CUDA kernel:
its tensors in tensor-id order (the id is also the tensor's noise stream), the spec array of sizes and
shifts every backend reads, and where each tensor's noise and perturbed vector sit in a member's buffers.
"""

from types import SimpleNamespace

import numpy as np

from eggnog.kernels.core.flat_layout import with_offsets
from eggnog.kernels.noise.scalar_math import DEGGS_GAUSSIAN, DEGGS_UNIFORM

SPEC_FIELDS = ("n_layer", "dim", "head_dim", "vocab", "shift_attn", "shift_qkv", "shift_out", "shift_logit",
               "shift_mlp_up", "shift_mlp_down", "sigma_shift", "vector_shift", "noise_kind")
NOISE_KINDS = {"uniform": DEGGS_UNIFORM, "gaussian": DEGGS_GAUSSIAN}  # scalar_math.member_noise kinds
EMBEDDING, EMBEDDING_BIAS, INIT_MLP = 0, 1, 2  # tensor ids; an MLP block is 6 tensors from its first
LN_W, LN_B, UP, UP_BIAS, DOWN, DOWN_BIAS = range(6)  # within an MLP block
LN1_W, LN1_B, Q, K, V, O, LAYER_MLP = range(7)  # noqa: E741 (O: the output projection, beside Q, K, V)  # within a layer (12 tensors from 8 + 12 * layer)
TENSORS_PER_LAYER = 12
FIRST_LAYER = 8
MAX_UNIT = 127
MLP_TENSORS = (("ln.weight", "vector", (1,)), ("ln.bias", "vector", (1,)), ("up", "matrix", (4, 1)),
               ("up_bias", "vector", (4,)), ("down", "matrix", (1, 4)), ("down_bias", "vector", (1,)))
ATTENTION_TENSORS = (("ln1.weight", "vector", (1,)), ("ln1.bias", "vector", (1,)), ("q", "matrix", (1, 1)),
                     ("k", "matrix", (1, 1)), ("v", "matrix", (1, 1)), ("o", "matrix", (1, 1)))


def make_spec(cfg, sigma_shift=3, vector_shift=4, noise="uniform"):
    """The spec array of a TransformerConfig and the noise settings."""
    return np.array([cfg.n_layer, cfg.dim, cfg.head_dim, cfg.vocab, *cfg.shifts(), sigma_shift, vector_shift,
                     NOISE_KINDS[noise]], np.int64)


def transformer_layout(cfg):
    """(name, shape, kind, offset) of every tensor, in tensor-id order."""
    d = cfg.dim
    specs = [("embedding", (cfg.vocab, d), "embedding"), ("embedding_bias", (d,), "vector")]
    specs += [(f"init_mlp.{name}", tuple(m * d for m in mult), kind) for name, kind, mult in MLP_TENSORS]
    for layer in range(cfg.n_layer):
        specs += [(f"layers.{layer}.{name}", tuple(m * d for m in mult), kind)
                  for name, kind, mult in ATTENTION_TENSORS]
        specs += [(f"layers.{layer}.mlp.{name}", tuple(m * d for m in mult), kind)
                  for name, kind, mult in MLP_TENSORS]
    specs += [("ln_f.weight", (d,), "vector"), ("ln_f.bias", (d,), "vector")]
    return with_offsets(specs)


def layer_tensor(layer, which):
    return FIRST_LAYER + TENSORS_PER_LAYER * layer + which


def tensor_table(spec):
    """int64 (n_tensors, 3): offset in params, d_in (a vector's n), d_out (0 for a vector)."""
    n_layer, dim, _, vocab = (int(v) for v in spec[:4])
    layout = transformer_layout(SimpleNamespace(n_layer=n_layer, dim=dim, vocab=vocab))
    return np.array([(offset, shape[-1], shape[0] if kind != "vector" else 0) for _, shape, kind, offset in layout],
                    np.int64)


def offsets(table):
    """Each tensor's offset in a member's noise row (2n for a vector, d_in + d_out otherwise) and in
    its vector buffer (vectors only), with both totals."""
    widths = np.where(table[:, 2] == 0, 2 * table[:, 1], table[:, 1] + table[:, 2])
    vec_widths = np.where(table[:, 2] == 0, table[:, 1], 0)
    noise_at = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(np.int64)
    vec_at = np.concatenate([[0], np.cumsum(vec_widths)[:-1]]).astype(np.int64)
    return noise_at, vec_at, int(widths.sum()), int(vec_widths.sum())
