"""The MinGRU LM equals minGRU-pytorch's minLM (tests/data/mingru_lucidrains_chunk1.npz: dim 32,
depth 2, expansion 1.5, ff_mult 4, computed in float64): the logits, the loss in bits and nats and
the gradient of every tensor for a (2, 256) chunk from the zero state, on the NumPy reference and the
CPU twins; on the CUDA simulator (one Python thread per CUDA thread) the logits and loss of the first
bytes of one row, against the minLM logits of those positions.

Tolerances, relative to the largest entry of each compared tensor: 1e-6 for the float64 reference
(the RMSNorm eps is float32's here, float64's in the fixture; observed 2e-7), 1e-5 for float32
(observed 7e-7). Losses to 1e-6 relative."""

import math

import numpy as np
import pytest

from eggnog.kernels.core.registry import ops_for
from eggnog.models.mingru import MinGruConfig, MinGruModel
from tests.reference_data import load

DATA = load("mingru_lucidrains_chunk1")
NAMES = [str(name) for name in DATA["param_names"]]
TOKENS = DATA["chunk1_tokens"]
MODEL = MinGruModel(MinGruConfig(dim=32, depth=2, expansion_factor=1.5, ff_mult=4.0))
INNER = MODEL.cfg.dim_inner
TOLERANCE = {"numpy": 1e-6, "cpu": 1e-5, "cuda": 1e-5}
SIM_BYTES = 4

# minLM block layers: 1 RMSNorm, 2 minGRU, 3 RMSNorm, 4 feed-forward (Linear, GELU, Linear)
BLOCK_NAMES = {"1.weight": "gru_norm", "2.to_out.weight": "gru_out", "3.weight": "ff_norm",
               "4.0.weight": "ff_in", "4.0.bias": "ff_in_bias", "4.2.weight": "ff_out", "4.2.bias": "ff_out_bias"}
GLOBAL_NAMES = {"token_emb.weight": "embed", "norm.weight": "norm", "to_logits.weight": "head"}


def our_tensors(name):
    """(our tensor, rows of the torch tensor) for one minLM parameter name."""
    if not name.startswith("layers."):
        return [(GLOBAL_NAMES[name], slice(None))]
    _, layer, rest = name.split(".", 2)
    block = f"blocks.{layer}."
    if rest == "2.to_hidden_and_gate.weight":
        return [(block + "gru_hidden", slice(0, INNER)), (block + "gru_gate", slice(INNER, None))]
    return [(block + BLOCK_NAMES[rest], slice(None))]


def flat_from(prefix, scale=1.0):
    flat = np.zeros(MODEL.n_params)
    views = MODEL.views(flat)
    for name in NAMES:
        for ours, rows in our_tensors(name):
            views[ours][...] = DATA[prefix + name][rows] * scale
    return flat


PARAMS = flat_from("param.")
# the model's loss is in bits: its gradient is the nats gradient / ln 2
GRADS = MODEL.views(flat_from("chunk1_grad.", 1.0 / math.log(2)))


def relative(got, ref):
    return float(np.abs(np.asarray(got, np.float64) - ref).max() / np.abs(ref).max())


def test_every_parameter_is_mapped_once():
    covered = np.zeros(MODEL.n_params, bool)
    views = MODEL.views(covered)
    for name in NAMES:
        for ours, rows in our_tensors(name):
            assert not views[ours][...].any()
            views[ours][...] = True
            assert views[ours].shape == DATA["param." + name][rows].shape
    assert covered.all()


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_logits_loss_and_gradients_equal_minlm(backend):
    ops = ops_for(backend)
    p = MODEL.views(ops.to_device(PARAMS.astype(ops.dtype)))
    logits, _, _ = MODEL.forward(ops, p, TOKENS[:, :-1])
    logits = ops.to_host(logits).reshape(TOKENS.shape[0], -1, 256)[:, :64]
    assert relative(logits, DATA["chunk1_logits_first64"]) <= TOLERANCE[backend]
    loss, grads, _ = MODEL.loss_and_grad(ops, p, TOKENS[:, :-1], TOKENS[:, 1:])
    assert loss == pytest.approx(float(DATA["chunk1_loss_bits"]), rel=1e-6)
    assert loss * math.log(2) == pytest.approx(float(DATA["chunk1_loss_nats"]), rel=1e-6)
    assert sorted(grads) == sorted(GRADS)
    for name, ref in GRADS.items():
        assert relative(ops.to_host(grads[name]), ref) <= TOLERANCE[backend], name


def test_simulated_kernels_equal_minlm():
    ops = ops_for("cuda")
    p = MODEL.views(ops.to_device(PARAMS.astype(np.float32)))
    inputs, targets = TOKENS[:1, :SIM_BYTES], TOKENS[:1, 1:SIM_BYTES + 1]
    logits, _, _ = MODEL.forward(ops, p, inputs)
    ref = DATA["chunk1_logits_first64"][0, :SIM_BYTES]
    assert relative(ops.to_host(logits), ref) <= TOLERANCE["cuda"]
    bits, _ = ops.cross_entropy(logits, ops.to_device(targets.astype(np.uint8).reshape(-1)))
    log_p = ref - ref.max(axis=1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(axis=1, keepdims=True))
    ref_bits = -log_p[np.arange(SIM_BYTES), targets[0]] / math.log(2)
    assert relative(ops.to_host(bits), ref_bits) <= 1e-6
