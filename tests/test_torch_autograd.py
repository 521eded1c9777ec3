"""PyTorch autograd over eggnog's kernels (interop/torch_autograd.py), on CPU tensors: forward values
and gradients of `scan`, `linear` and `lstm_sequence` equal torch's own autograd of the same math
written in torch, on the "cpu" backend (float32 kernels: rtol 1e-4, atol 1e-5) and the "numpy" one
(float64 references, checked by torch.autograd.gradcheck)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from eggnog.interop.torch_autograd import backend_of, linear, lstm_sequence, scan  # noqa: E402
from eggnog.runtime.errors import BadInput  # noqa: E402

FLOAT32 = {"rtol": 1e-4, "atol": 1e-5}


def torch_scan(k, u, h0=None):
    """The MinGRU recurrence of kernels/rnn/scan.py in torch: z = sigmoid(k), g(u) = u + 0.5 for u >= 0,
    sigmoid(u) otherwise; h_t = (1 - z_t) h_{t-1} + z_t g(u_t)."""
    z = torch.sigmoid(k)
    g = torch.where(u >= 0, u + 0.5, torch.sigmoid(u))
    state = torch.zeros_like(k[:, 0]) if h0 is None else h0
    out = []
    for t in range(k.shape[1]):
        state = (1 - z[:, t]) * state + z[:, t] * g[:, t]
        out.append(state)
    return torch.stack(out, 1)


def torch_lstm(table, rows, r, bias, states0):
    """The multi-head LSTM of kernels/rnn/lstm.py in torch (gates i, f, z, o; R block-diagonal by head)."""
    _, heads, size, _ = r.shape
    hidden = heads * size
    batch = rows.shape[1]
    h, c = states0[0].expand(batch, hidden), states0[1].expand(batch, hidden)
    out = []
    for t in range(rows.shape[0]):
        rec = torch.einsum("gndk,bnk->bgnd", r, h.reshape(batch, heads, size)).reshape(batch, 4 * hidden)
        raw = (table[rows[t].long()] + rec + bias).reshape(batch, 4, hidden)
        i, f, z, o = torch.sigmoid(raw[:, 0]), torch.sigmoid(raw[:, 1]), torch.tanh(raw[:, 2]), torch.sigmoid(raw[:, 3])
        c = f * c + i * z
        h = o * torch.tanh(c)
        out.append(h)
    return torch.stack(out)


def leaves(*arrays, dtype):
    return [torch.tensor(a, dtype=dtype, requires_grad=True) for a in arrays]


def gradients(fn, inputs, seed=0):
    """(value, gradients of a random projection of it) of fn(*inputs)."""
    for x in inputs:
        x.grad = None
    out = fn(*inputs)
    weight = torch.as_tensor(np.random.default_rng(seed).normal(size=tuple(out.shape)), dtype=out.dtype)
    (out * weight).sum().backward()
    return out.detach(), [x.grad.clone() for x in inputs]


def assert_same(ours, theirs, **tolerance):
    (value, grads), (ref_value, ref_grads) = ours, theirs
    torch.testing.assert_close(value, ref_value, **tolerance)
    for got, ref in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(got, ref, **tolerance)


RNG = np.random.default_rng(11)
K, U, H0 = RNG.normal(size=(2, 7, 3)), RNG.normal(size=(2, 7, 3)), np.abs(RNG.normal(size=(2, 3)))


@pytest.mark.parametrize("with_h0", [False, True])
def test_scan_matches_torch_on_the_cpu_backend(with_h0):
    inputs = leaves(K, U, *([H0] if with_h0 else []), dtype=torch.float32)
    ours = gradients(lambda *a: scan(*a), inputs)
    assert ours[0].dtype == torch.float32 and backend_of(inputs[0]) == "cpu"
    assert_same(ours, gradients(torch_scan, inputs), **FLOAT32)


def test_scan_passes_gradcheck_on_the_references():
    k, u, h0 = leaves(K[:, :4], U[:, :4], H0, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda *a: scan(*a, backend="numpy"), (k, u, h0))


X, W = RNG.normal(size=(5, 4)), RNG.normal(size=(3, 4))


def test_linear_matches_torch_on_the_cpu_backend():
    inputs = leaves(X, W, dtype=torch.float32)
    assert_same(gradients(linear, inputs), gradients(lambda x, w: x @ w.T, inputs), **FLOAT32)


def test_linear_passes_gradcheck_on_the_references():
    assert torch.autograd.gradcheck(lambda x, w: linear(x, w, backend="numpy"), leaves(X, W, dtype=torch.float64))


STEPS, BATCH, HEADS, SIZE, TABLE_ROWS = 3, 2, 2, 3, 5
HIDDEN = HEADS * SIZE
LSTM = (RNG.normal(size=(TABLE_ROWS, 4 * HIDDEN)), 0.6 * RNG.normal(size=(4, HEADS, SIZE, SIZE)),
        0.3 * RNG.normal(size=4 * HIDDEN), RNG.normal(size=(2, HIDDEN)))
ROWS = torch.as_tensor(RNG.integers(0, TABLE_ROWS, size=(STEPS, BATCH)), dtype=torch.int32)  # repeats included


def test_lstm_sequence_matches_torch_on_the_cpu_backend():
    table, r, bias, states0 = leaves(*LSTM, dtype=torch.float32)
    ours = gradients(lambda t, r_, b, s: lstm_sequence(t, ROWS, r_, b, s), [table, r, bias, states0])
    theirs = gradients(lambda t, r_, b, s: torch_lstm(t, ROWS, r_, b, s), [table, r, bias, states0])
    assert ours[0].shape == (STEPS, BATCH, HIDDEN)
    assert_same(ours, theirs, **FLOAT32)


def test_lstm_sequence_passes_gradcheck_on_the_references():
    inputs = leaves(*LSTM, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda t, r_, b, s: lstm_sequence(t, ROWS, r_, b, s, backend="numpy"), inputs)


def test_an_unknown_backend_is_refused():
    with pytest.raises((BadInput, ValueError), match="unknown kernel backend 'tpu'"):
        linear(*leaves(X, W, dtype=torch.float32), backend="tpu")
