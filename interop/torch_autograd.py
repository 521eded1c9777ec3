"""PyTorch autograd over eggnog's kernels: `scan(k, u, h0)` (the MinGRU recurrence), `linear(x, w)`
(x w^T) and `lstm_sequence(table, rows, r, bias, states0)` (the multi-head LSTM over a sequence) run
forward and backward on eggnog's ops and return torch tensors with gradients.

The backend follows the tensors: CPU tensors run on "cpu" (the CPU twins, read through DLPack without a
copy), CUDA tensors on "cuda" (the kernels, through __cuda_array_interface__ without a copy); `backend=`
overrides it ("numpy": the float64 references, what gradcheck needs). Inputs take the backend's float
type (float32, float64 on "numpy"); outputs and gradients come back in the inputs' dtype. CUDA kernels
launch on torch's current stream. Needs PyTorch: `pip install eggnog[torch]`.
"""

import contextlib

import numpy as np

from eggnog.kernels.core.placement import adopt, kernels_for
from eggnog.kernels.core.streams import kernels_on_stream
from eggnog.kernels.layers.matmul import matmul, matmul_backward
from eggnog.kernels.rnn.lstm import lstm_backward, lstm_forward
from eggnog.kernels.rnn.scan import scan_backward, scan_forward
from eggnog.runtime.errors import BadInput
from eggnog.runtime.optional import importable


def _torch():
    torch = importable("torch")
    if torch is None:
        raise BadInput("eggnog.interop.torch_autograd needs PyTorch: pip install eggnog[torch]")
    return torch


torch = _torch()


def backend_of(tensor, backend=None) -> str:
    """The backend a tensor's op runs on: `backend` if given, else "cuda" for CUDA tensors, "cpu" otherwise."""
    if backend is not None:
        kernels_for(backend)  # refuses an unknown name
        return backend
    return "cuda" if tensor.is_cuda else "cpu"


def _taken(tensor, backend):
    """A tensor as the backend's array: detached, in its float type, contiguous, shared without a copy."""
    if tensor is None:
        return None
    if tensor.is_floating_point():
        tensor = tensor.detach().to(torch.float64 if backend == "numpy" else torch.float32)
    return adopt(tensor.detach().contiguous(), backend)


def _tensor(array, like):
    """An op's result as a torch tensor of `like`'s dtype and device (no copy where the dtype fits)."""
    if isinstance(array, np.ndarray):
        out = torch.from_numpy(np.ascontiguousarray(array))
    else:  # a numba device array: torch reads its __cuda_array_interface__
        out = torch.as_tensor(array, device=like.device)
    return out.to(dtype=like.dtype, device=like.device)


def _stream(backend, tensor):
    """Launches on torch's current stream for CUDA tensors."""
    if backend == "cuda" and tensor.is_cuda:
        return kernels_on_stream(torch.cuda.current_stream(tensor.device))
    return contextlib.nullcontext()


class ScanFunction(torch.autograd.Function):
    """h = scan_forward(k, u, h0); gradients by scan_backward."""

    @staticmethod
    def forward(ctx, k, u, h0, backend):
        with _stream(backend, k):
            h = _tensor(scan_forward(backend, _taken(k, backend), _taken(u, backend), _taken(h0, backend)), k)
        ctx.backend, ctx.has_h0 = backend, h0 is not None
        ctx.save_for_backward(k, u, h0, h)
        return h

    @staticmethod
    def backward(ctx, grad_h):
        k, u, h0, h = ctx.saved_tensors
        b = ctx.backend
        with _stream(b, k):
            dk, du, dh0 = scan_backward(b, _taken(grad_h, b), _taken(k, b), _taken(u, b), _taken(h, b), _taken(h0, b))
        return _tensor(dk, k), _tensor(du, u), (_tensor(dh0, h0) if ctx.has_h0 else None), None


class LinearFunction(torch.autograd.Function):
    """y = x w^T by matmul; gradients by matmul_backward."""

    @staticmethod
    def forward(ctx, x, w, backend):
        with _stream(backend, x):
            y = _tensor(matmul(backend, _taken(x, backend), _taken(w, backend)), x)
        ctx.backend = backend
        ctx.save_for_backward(x, w)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        x, w = ctx.saved_tensors
        b = ctx.backend
        with _stream(b, x):
            dx, dw = matmul_backward(b, _taken(grad_y, b), _taken(x, b), _taken(w, b))
        return _tensor(dx, x), _tensor(dw, w), None


class LstmSequenceFunction(torch.autograd.Function):
    """h_1..h_T of the multi-head LSTM (lstm_forward with the states kept); gradients by lstm_backward,
    the table's rows and the bias summed from the gate gradients, states0's over the batch."""

    @staticmethod
    def forward(ctx, table, rows, r, bias, states0, backend):
        b = backend
        with _stream(b, table):
            hs, cs, gates = lstm_forward(b, _taken(table, b), _taken(rows.to(torch.int32), b), _taken(r, b),
                                         _taken(bias, b), _taken(states0, b), True)
        hs, cs, gates = (_tensor(a, table) for a in (hs, cs, gates))
        ctx.backend = b
        ctx.save_for_backward(table, rows, r, bias, states0, hs, cs, gates)
        return hs[1:]

    @staticmethod
    def backward(ctx, grad_h):
        table, rows, r, bias, states0, hs, cs, gates = ctx.saved_tensors
        b = ctx.backend
        with _stream(b, table):
            draw, dr, dh0, dc0 = lstm_backward(b, _taken(grad_h, b), _taken(r, b), _taken(hs, b), _taken(cs, b),
                                               _taken(gates, b))
        draw = _tensor(draw, table)
        gate_rows = draw.reshape(-1, draw.shape[-1])
        dtable = torch.zeros_like(table).index_add_(0, rows.reshape(-1).to(torch.int64), gate_rows)
        dstates0 = torch.stack([_tensor(dh0, states0).sum(0), _tensor(dc0, states0).sum(0)])
        return dtable, None, _tensor(dr, r), gate_rows.sum(0).reshape(bias.shape), dstates0.reshape(states0.shape), None


def scan(k, u, h0=None, backend=None):
    """h (batch, T, channels) of the MinGRU recurrence over k, u (batch, T, channels) from h0 (batch,
    channels; zeros when None), differentiable in k, u and h0."""
    return ScanFunction.apply(k, u, h0, backend_of(k, backend))


def linear(x, w, backend=None):
    """x w^T for x (rows, d_in) and w (d_out, d_in), differentiable in both."""
    return LinearFunction.apply(x, w, backend_of(x, backend))


def lstm_sequence(table, rows, r, bias, states0, backend=None):
    """h_1..h_T (T, batch, heads * size) of the multi-head LSTM (kernels/rnn/lstm.py) reading the input
    projections table[rows] (rows: T x batch integer indices into table's rows), with recurrent weights r
    (4, heads, size, size), bias (4 * heads * size) and states0 (2, heads * size): h and c at the start,
    shared by the batch. Differentiable in table, r, bias and states0."""
    return LstmSequenceFunction.apply(table, rows, r, bias, states0, backend_of(table, backend))
