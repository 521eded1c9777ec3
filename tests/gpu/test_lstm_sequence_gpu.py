"""On a real GPU: the LSTM sequence kernels in each of their modes at Table 1 head sizes (one launch per
sequence with a head's R in a block, the persistent cooperative grid of two slices a head, a launch
per step), forward and backward, against the CPU twins (fp32 both; FMA contraction and the
approximate reciprocal on the GPU: 1e-4 of the largest value)."""

import numpy as np
import pytest

from eggnog.kernels.core.backend import select_backend
from eggnog.kernels.core.placement import to_host
from eggnog.kernels.rnn import lstm, lstm_sequence_cuda
from tests.helpers import lstm_inputs


def relative(got, ref):
    ref = np.asarray(ref, np.float64)
    return float(np.abs(np.asarray(to_host(got), np.float64) - ref).max() / np.abs(ref).max())


@pytest.mark.parametrize("heads, size, batch, coresident, mode", [
    (12, 20, 256, None, "sequence"),          # Table 1 100k heads
    (8, 150, 64, None, "persistent"),         # 10M's head size, 16 blocks of two slices
    (8, 150, 64, 4, "per step"),              # the same where the grid could not be resident
])
def test_modes_match_the_cpu_twin(monkeypatch, heads, size, batch, coresident, mode):
    assert not select_backend("cuda").simulated
    if coresident is not None:
        monkeypatch.setattr(lstm_sequence_cuda, "coresident_blocks", lambda: coresident)
    steps, hidden = 6, heads * size
    assert lstm_sequence_cuda.plan(heads, size, batch, steps)[2] == mode
    rng = np.random.default_rng(7)
    table, rows, r, bias, states0 = lstm_inputs(rng, steps, batch, heads, size, 40, r_scale=1 / np.sqrt(size))
    want = lstm.cpu_lstm_forward(table, rows, r, bias, states0, keep=True)
    got = lstm.cuda_lstm_forward(*(lstm.cuda.to_device(a) for a in (table, rows, r, bias, states0)), True)
    for g, w in zip(got, want):
        assert relative(g, w) < 1e-4
    dh_out = rng.normal(0, 1, (steps, batch, hidden)).astype(np.float32)
    want = lstm.cpu_lstm_backward(dh_out, r, *want)
    got = lstm.cuda_lstm_backward(lstm.cuda.to_device(dh_out), lstm.cuda.to_device(r), *got)
    for g, w in zip(got, want):
        assert relative(g, w) < 1e-4
