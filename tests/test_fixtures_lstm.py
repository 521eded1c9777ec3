"""The multi-head LSTM LM equals zero_order_rnn's (tests/data/lstm_zorn_code9.npz: V = E = 100, H = 24
in 4 heads, float64): the logits over all 12 tokens from states0, and the Table 1 batch's loss and the
gradient of every tensor, states0 included, on the NumPy reference and the CPU twins. On the CUDA
simulator (one Python thread per CUDA thread) the logits and loss of the first bytes of one row,
against the reference logits of those positions.

Tolerances, relative to the largest entry of each compared tensor: 1e-6 for the float64 reference
(its gradient comes back as float32; observed 5e-8), 1e-5 for float32 (observed 1e-6). Losses to
1e-6 relative."""

import math

import numpy as np
import pytest

from eggnog.models.lstm import LstmConfig, LstmModel
from eggnog.zorn.batch import TaskBatch
from tests.reference_data import load

DATA = load("lstm_zorn_code9")
NAMES = [str(name) for name in DATA["param_names"]]
TOKENS = DATA["tokens"].astype(np.uint8)
MODEL = LstmModel(LstmConfig(vocab_size=100, input_size=100, hidden_size=24, num_heads=4))
TOLERANCE = {"numpy": 1e-6, "cpu": 1e-5, "cuda": 1e-5}
FIRST_PREDICTED = 2  # the Table 1 batch: x = tokens[:, :2], y = tokens[:, 2:]; token 2 is never predicted
SIM_BYTES = 4


def ours(name):
    return "embed" if name == "embed.weight" else name


def flat_from(prefix, scale=1.0):
    flat = np.zeros(MODEL.n_params)
    views = MODEL.views(flat)
    for name in NAMES:
        view = views[ours(name)]
        view[...] = DATA[prefix + name].reshape(view.shape) * scale  # states0: (2, 1, 1, N, D) there
    return flat


PARAMS = flat_from("param.")
GRAD = flat_from("grad_code9.", 1.0 / math.log(2))  # the model's loss is in bits


def table1_batch():
    """Predictions of tokens[:, 3:] from positions 2..10, as a TaskBatch over all 11 inputs."""
    mask = np.zeros((TOKENS.shape[0], TOKENS.shape[1] - 1), np.float32)
    mask[:, FIRST_PREDICTED:] = 1
    return TaskBatch(TOKENS[:, :-1], TOKENS[:, 1:], mask)


def relative(got, ref):
    return float(np.abs(np.asarray(got, np.float64) - ref).max() / np.abs(ref).max())


def params_for(backend):
    return PARAMS if backend == "numpy" else PARAMS.astype(np.float32)


def test_every_parameter_is_mapped_and_the_batch_has_27_predictions():
    assert sorted(map(ours, NAMES)) == sorted(MODEL.offsets)
    assert sum(DATA["param." + name].size for name in NAMES) == MODEL.n_params
    assert table1_batch().predicted == 27


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_logits_loss_and_gradients_equal_the_reference(backend):
    flat = params_for(backend)
    assert relative(MODEL.logits(backend, flat, TOKENS), DATA["logits"]) <= TOLERANCE[backend]
    loss, grad = MODEL.loss_and_grad(backend, flat, table1_batch())
    assert loss * math.log(2) == pytest.approx(float(DATA["loss_code9"]), rel=1e-6)
    got, ref = MODEL.views(grad), MODEL.views(GRAD)
    for name in MODEL.offsets:
        assert relative(got[name], ref[name]) <= TOLERANCE[backend], name


def test_simulated_kernels_equal_the_reference():
    flat = params_for("cuda")
    inputs, targets = TOKENS[:1, :SIM_BYTES], TOKENS[:1, 1:SIM_BYTES + 1]
    ref = DATA["logits"][0, :SIM_BYTES]
    assert relative(MODEL.logits("cuda", flat, inputs)[0], ref) <= TOLERANCE["cuda"]
    log_p = ref - ref.max(axis=1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(axis=1, keepdims=True))
    ref_bits = float(np.mean(-log_p[np.arange(SIM_BYTES), targets[0]])) / math.log(2)
    loss = MODEL.loss("cuda", flat, TaskBatch(inputs, targets, np.ones(inputs.shape, np.float32)))
    assert loss == pytest.approx(ref_bits, rel=1e-6)
