"""The EGG forward equals nano-egg's run.py bit for bit (tests/data/egg_nano_egg_L1_D16.npz): the
logits, the state after every byte, each next byte's log-likelihood and their total over 300 bytes,
with the document reset at byte 150, on the NumPy reference and the CPU twins. On the CUDA simulator
(one Python thread per CUDA thread) a few bytes: the first ones from the zero state, and the ones
across the reset from nano-egg's state before them."""

import numpy as np
import pytest

from eggnog.evolution.fitness import bits_per_byte
from eggnog.kernels.core.registry import ops_for
from eggnog.kernels.egg.int_math import EXP2
from eggnog.kernels.egg.member_ops import py_floor_log2_x16
from eggnog.models.egg import EggConfig, EggModel
from tests.reference_data import load

DATA = load("egg_nano_egg_L1_D16")
P = "L1_D16__"
INPUT = DATA["input_bytes"]
LOGITS, STATES, LL = DATA[P + "logits"], DATA[P + "states"], DATA[P + "ll"]
RESET = 150  # the document separator

# this project's tensor names -> nano-egg's (per layer: a leading layer axis there)
GLOBAL_NAMES = {"embedding": "emb", "ln_out": "ln_out.weight", "head": "head"}
LAYER_NAMES = {"ln1": "blocks.ln1.weight", "gru.wf": "blocks.att.Wf", "gru.uf": "blocks.att.Uf",
               "gru.wh": "blocks.att.Wh", "gru.uh": "blocks.att.Uh", "gru.bf": "blocks.att.bf",
               "gru.bh": "blocks.att.bh", "ln2": "blocks.ln2.weight", "mlp.up": "blocks.mlp.0.weight",
               "mlp.down": "blocks.mlp.1.weight"}


def nano_egg_model():
    model = EggModel(EggConfig(int(DATA[P + "n_layer"]), int(DATA[P + "n_embd"])))
    flat = np.zeros(model.n_params, np.int8)
    views = model.views(flat)
    for ours, theirs in GLOBAL_NAMES.items():
        views[ours][...] = DATA[P + "param__" + theirs]
    for layer in range(model.cfg.n_layer):
        for ours, theirs in LAYER_NAMES.items():
            views[f"layers.{layer}.{ours}"][...] = DATA[P + "param__" + theirs][layer]
    return model, flat


def forward(backend, first, last):
    """Bytes first..last-1 of the input, one unperturbed member, from nano-egg's state before byte
    `first`: (logits, states after each byte, log-likelihood of each next byte) on the host."""
    model, flat = nano_egg_model()
    ops = ops_for(backend)
    params, prefixes = model.views(ops.to_device(flat)), model.prefixes(0, 0)
    vectors = model.member_vectors(ops, params, prefixes, 0, 1, 0, False)
    start = STATES[first - 1] if first else np.zeros_like(STATES[0])
    states = [ops.to_device(start[layer][None].copy()) for layer in range(model.cfg.n_layer)]
    logits, after, ll = [], [], []
    for t in range(first, last):
        out = model.step(ops, params, vectors, ops.to_device(INPUT[t:t + 1].copy()), states, prefixes, 0, 0, False)
        logits.append(ops.to_host(out)[0])
        after.append(np.stack([ops.to_host(s)[0] for s in states]))
        if t + 1 < INPUT.size:
            ll.append(ops.to_host(ops.egg_loglik(out, ops.to_device(INPUT[t + 1:t + 2].copy())))[0])
    return np.array(logits), np.array(after), np.array(ll, np.int64)


def test_the_fixture_is_what_it_says():
    assert INPUT.size == 300 and np.flatnonzero(INPUT == 0).tolist() == [RESET]
    assert np.array_equal(DATA["targets"], INPUT[1:])
    assert int(LL.sum()) == int(DATA[P + "ll_total"])


def test_integer_tables_equal_nano_egg_tables():
    """EXP2 and the exact floor(16 log2 S) against the entries of nano-egg's 1 GiB LOG2 table read here."""
    assert np.array_equal(EXP2, DATA["exp2_table"])
    sums = EXP2[LOGITS[:-1].astype(np.int64) + 128].sum(axis=1)
    assert np.array_equal(sums - 1, DATA[P + "log2_index"])
    assert [py_floor_log2_x16(int(s)) - 64 for s in sums] == DATA[P + "log2_value"].tolist()


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_whole_forward_equals_nano_egg(backend):
    logits, states, ll = forward(backend, 0, INPUT.size)
    np.testing.assert_array_equal(logits, LOGITS)
    np.testing.assert_array_equal(states, STATES)
    np.testing.assert_array_equal(ll, LL)
    assert int(ll.sum()) == int(DATA[P + "ll_total"])
    assert bits_per_byte(ll.sum(), ll.size) == float(DATA[P + "bits_per_byte_f64"])
    assert np.float32(bits_per_byte(ll.sum(), ll.size)) == DATA[P + "bits_per_byte_f32"]


@pytest.mark.parametrize("first,last", [(0, 2), (RESET - 1, RESET + 1)], ids=["start", "reset"])
def test_simulated_kernels_equal_nano_egg(first, last):
    logits, states, ll = forward("cuda", first, last)
    np.testing.assert_array_equal(logits, LOGITS[first:last])
    np.testing.assert_array_equal(states, STATES[first:last])
    np.testing.assert_array_equal(ll, LL[first:last])
