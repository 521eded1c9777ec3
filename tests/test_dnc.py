"""The DNC (models/dnc.py) and its kernels (kernels/layernorm.py, softmax_rows.py, batched_matmul.py,
dnc_cell.py, dnc_memory.py, dnc_elementwise.py, assembled by dnc_ops.py).

Parameter counts follow the notes' formula (Figure-1 configs from shapes alone); the loss and its
BPTT gradient agree across the float64 reference, the CPU twins and CUDA on the simulator (fp32 vs
float64: 1e-5 relative for the loss, 1e-4 of the largest entry for gradients), and equal central
finite differences of the float64 loss for entries of every tensor. Each new kernel matches its
float64 reference (1e-5 of the largest entry + 1e-6 relative, as tests/test_float_layers.py), and
each reference backward matches finite differences. Simulated launches are kept tiny and few.
"""

import math

import numpy as np
import pytest

from eggnog.kernels import batched_matmul, dnc_cell, dnc_elementwise, dnc_memory, dnc_ops, norms, softmax_rows
from eggnog.kernels.backend import to_host
from eggnog.runtime.errors import BadInput
from eggnog.models.dnc import DncConfig, DncModel, formula_params
from eggnog.zorn.batch import TaskBatch

RNG = np.random.default_rng(5)
# head_size >= 3: a LayerNorm over two features only ever yields (+-1, -+1), which makes key gradients vanish
TINY = DncConfig(vocab_size=7, input_size=3, hidden_size=4, memory_size=3, head_size=3, num_reads=2)


def f32(*shape, scale=1.0):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


def close(got, ref, tol=1e-5):
    got, ref = np.asarray(to_host(got), np.float64), np.asarray(ref, np.float64)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert np.all(np.abs(got - ref) <= tol * np.abs(ref).max() + 1e-6 * np.abs(ref)), np.abs(got - ref).max()


def batch_of(cfg, batch, steps, mask=None):
    inputs = RNG.integers(0, cfg.vocab_size, (batch, steps)).astype(np.uint8)
    targets = RNG.integers(0, cfg.vocab_size, (batch, steps)).astype(np.uint8)
    if mask is None:
        mask = (RNG.random((batch, steps)) < 0.7).astype(np.float32)
        mask[0, -1] = 1.0
    return TaskBatch(inputs, targets, mask)


def noisy_params(model, scale=0.3):
    return (model.init_params(0) + RNG.normal(0, scale, model.n_params)).astype(np.float32)


# ---- model -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("scale,expected", [(8, 12_949_797), (16, 51_062_053)])
def test_figure1_parameter_counts(scale, expected):
    cfg = DncConfig.figure1(scale)
    assert (cfg.hidden_size, cfg.memory_size, cfg.head_size, cfg.num_reads, cfg.input_size, cfg.vocab_size) == \
        (128 * scale, 128 * scale, 128 * scale, 1, 32, 100)
    model = DncModel(cfg)  # shapes only: no parameter vector is allocated
    assert model.n_params == formula_params(cfg) == expected
    arch = model.architecture()
    assert arch["model"] == "dnc" and arch["total_params"] == expected
    assert sum(t["params"] for t in arch["tensors"]) == expected
    assert arch["config"]["hidden_size"] == 128 * scale


@pytest.mark.parametrize("cfg", [TINY, DncConfig(100, 5, 6, 4, 3, 3), DncConfig(11, 2, 3, 9, 4, 1)])
def test_parameter_count_matches_formula(cfg):
    assert DncModel(cfg).n_params == formula_params(cfg)


def test_initialisation():
    model = DncModel(DncConfig(20, 8, 16, 5, 12, 2))
    views = model.views(model.init_params(3))
    for name, shape, init in model.specs:
        v = views[name]
        if init == "xavier":
            bound = math.sqrt(6.0 / (shape[0] + shape[1]))
            assert np.abs(v).max() <= bound and np.abs(v).max() > 0.5 * bound, name
        elif init == "ones":
            assert np.all(v == 1.0), name
        elif init == "zeros":
            assert not v.any(), name
    assert views["embed.weight"].std() == pytest.approx(1.0, rel=0.2)
    # the fused head views are the five head tensors back to back
    rw, w = 24, 12
    heads = views["heads.weight"]
    assert heads.shape == (rw + 3 * w + 1, 16)
    assert np.shares_memory(heads, views["fc_write_strength.weight"])
    assert np.array_equal(heads[rw:rw + w], views["fc_write_keys.weight"])
    assert np.array_equal(heads[-1:], views["fc_write_strength.weight"])


@pytest.mark.parametrize("backend,batch_size,steps", [("cpu", 2, 4), ("cuda", 1, 2)])
def test_loss_and_gradients_agree_on_all_backends(backend, batch_size, steps):
    model = DncModel(TINY)
    flat = noisy_params(model)
    batch = batch_of(TINY, batch_size, steps)
    ref_loss, ref_grad = model.loss_and_grad("numpy", flat.astype(np.float64), batch, np.float64)
    assert model.loss("numpy", flat.astype(np.float64), batch) == pytest.approx(ref_loss, rel=1e-12)
    if backend == "cpu":
        assert model.loss("cpu", flat, batch) == pytest.approx(ref_loss, rel=1e-5)
    loss, grad = model.loss_and_grad(backend, flat, batch)  # once per backend: the simulator is slow
    assert grad.dtype == np.float32 and grad.shape == (model.n_params,)
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    assert np.abs(grad - ref_grad).max() <= 1e-4 * np.abs(ref_grad).max()


@pytest.mark.parametrize("random_memory", [False, True])
def test_bptt_gradients_match_finite_differences_in_every_tensor(random_memory):
    model = DncModel(TINY)
    flat = noisy_params(model).astype(np.float64)
    batch = batch_of(TINY, 2, 4)
    memory0 = RNG.normal(size=(2, TINY.memory_size, TINY.head_size)) if random_memory else None
    _, grad = model.loss_and_grad("numpy", flat, batch, np.float64, memory0=memory0)
    checked = 0
    for name, (start, shape) in model.offsets.items():
        for index in RNG.choice(math.prod(shape), min(2, math.prod(shape)), replace=False):
            i = start + int(index)
            step = np.zeros_like(flat)
            step[i] = 1e-6
            numeric = (model.loss("numpy", flat + step, batch, memory0)
                       - model.loss("numpy", flat - step, batch, memory0)) / 2e-6
            assert grad[i] == pytest.approx(numeric, rel=1e-5, abs=1e-8), name
            checked += 1
    assert checked >= 2 * len(model.offsets) - 2
    views = model.views(grad)
    # memory_norm.bias shifts every row's score by the same key . bias: softmax-invariant, zero gradient
    assert np.abs(views["memory_norm.bias"]).max() <= 1e-12 * np.abs(grad).max()
    scale = np.abs(grad).max()
    for name in ("fc_erase_vector.weight", "fc_add_vector.weight", "fc_write_strength.weight"):
        assert np.abs(views[name]).max() > 1e-6 * scale, name
    keys = ("fc_read_keys.weight", "fc_write_keys.weight", "read_keys_norm.weight", "write_keys_norm.weight",
            "memory_norm.weight")
    for name in keys:
        if random_memory:  # content addressing is live
            assert np.abs(views[name]).max() > 1e-6 * scale, name
        else:  # from the zero memory all rows stay identical: addressing is uniform, keys get no gradient
            assert np.abs(views[name]).max() <= 1e-12 * scale, name


def test_masked_positions_do_not_count():
    model = DncModel(TINY)
    flat = noisy_params(model)
    batch = batch_of(TINY, 1, 3, mask=np.array([[0, 1, 0]], np.float32))
    other = TaskBatch(batch.inputs, batch.targets.copy(), batch.mask)
    other.targets[0, 0] = (other.targets[0, 0] + 1) % TINY.vocab_size
    other.targets[0, 2] = (other.targets[0, 2] + 1) % TINY.vocab_size
    assert model.loss("cpu", flat, batch) == model.loss("cpu", flat, other)
    # the last step's prediction cannot influence earlier ones, so with only the middle position
    # counted the loss equals that of the first two steps alone
    short = TaskBatch(batch.inputs[:, :2], batch.targets[:, :2], batch.mask[:, :2])
    assert model.loss("numpy", flat, short) == pytest.approx(model.loss("numpy", flat, batch), rel=1e-12)


@pytest.mark.parametrize("kwargs", [dict(hidden_size=0), dict(memory_size=-1), dict(head_size=0),
                                    dict(num_reads=0), dict(input_size=0), dict(vocab_size=0)])
def test_non_positive_sizes_are_refused(kwargs):
    cfg = DncConfig(**{**TINY.__dict__, **kwargs})
    with pytest.raises(BadInput, match="must be positive integers") as info:
        DncModel(cfg)
    message = str(info.value)
    assert message.count(". ") == 0 and "\n" not in message


def test_bad_batches_are_refused():
    model = DncModel(TINY)
    flat = model.init_params(0)
    good = batch_of(TINY, 1, 2)
    with pytest.raises(BadInput, match="below the DNC vocab_size"):
        model.loss("numpy", flat, TaskBatch(good.inputs + 50, good.targets, good.mask))
    with pytest.raises(BadInput, match="selects no predictions"):
        model.loss("numpy", flat, TaskBatch(good.inputs, good.targets, np.zeros_like(good.mask)))
    with pytest.raises(BadInput, match="parameters"):
        model.loss("numpy", flat[:-1], good)


# ---- kernels -----------------------------------------------------------------------------------------

def fd_check(loss, arrays, grads, indices=2):
    """Central differences of a scalar function of float64 arrays against analytic gradients."""
    for k, (array, grad) in enumerate(zip(arrays, grads)):
        for flat_index in RNG.choice(array.size, min(indices, array.size), replace=False):
            index = np.unravel_index(flat_index, array.shape)
            old = array[index]
            array[index] = old + 1e-6
            plus = loss()
            array[index] = old - 1e-6
            minus = loss()
            array[index] = old
            assert grad[index] == pytest.approx((plus - minus) / 2e-6, rel=1e-5, abs=1e-8), (k, index)


def test_layernorm():
    x, w, b, dy = f32(3, 40, scale=2.0) + 1.0, f32(40), f32(40), f32(3, 40)
    y, mean, rstd = norms.reference_layernorm(x, w, b)
    dx, dw, db = norms.reference_layernorm_backward(dy, x, w, mean, rstd)
    for forward, backward in ((norms.cpu_layernorm, norms.cpu_layernorm_backward),
                              (norms.cuda_layernorm, norms.cuda_layernorm_backward)):
        got = forward(x, w, b)
        for g, r in zip(got, (y, mean, rstd)):
            close(g, r)
        for g, r in zip(backward(dy, x, w, mean.astype(np.float32), rstd.astype(np.float32)), (dx, dw, db)):
            close(g, r)
    x64, w64, b64, dy64 = (a[:2, :5].astype(np.float64) if a.ndim == 2 else a[:5].astype(np.float64)
                           for a in (x, w, b, dy))
    _, m64, r64 = norms.reference_layernorm(x64, w64, b64)
    fd_check(lambda: float((norms.reference_layernorm(x64, w64, b64)[0] * dy64).sum()), [x64, w64, b64],
             norms.reference_layernorm_backward(dy64, x64, w64, m64, r64))


def test_softmax_rows():
    x, dp = f32(3, 37, scale=3.0), f32(3, 37)
    p = softmax_rows.reference_softmax_rows(x)
    dx = softmax_rows.reference_softmax_rows_backward(dp, p)
    for forward, backward in ((softmax_rows.cpu_softmax_rows, softmax_rows.cpu_softmax_rows_backward),
                              (softmax_rows.cuda_softmax_rows, softmax_rows.cuda_softmax_rows_backward)):
        close(forward(x), p)
        close(backward(dp, p.astype(np.float32)), dx)
    x64, dp64 = x[:2, :6].astype(np.float64), dp[:2, :6].astype(np.float64)
    fd_check(lambda: float((softmax_rows.reference_softmax_rows(x64) * dp64).sum()), [x64],
             [softmax_rows.reference_softmax_rows_backward(dp64, softmax_rows.reference_softmax_rows(x64))])


@pytest.mark.parametrize("transpose_a,transpose_b", [(False, True), (True, False)])
def test_bmm(transpose_a, transpose_b):
    a = f32(2, 5, 3) if transpose_a else f32(2, 3, 5)
    b = f32(2, 4, 5) if transpose_b else f32(2, 5, 4)
    ref = batched_matmul.reference_bmm(a, b, transpose_a, transpose_b)
    assert ref.shape == (2, 3, 4)
    close(batched_matmul.cpu_bmm(a, b, transpose_a, transpose_b), ref)
    close(batched_matmul.cuda_bmm(a, b, transpose_a, transpose_b), ref)


def test_lstm_cell():
    gates, c_prev, dh, dc = f32(2, 12, scale=2.0), f32(2, 3), f32(2, 3), f32(2, 3)
    h, c = dnc_cell.reference_lstm_cell(gates, c_prev)
    dgates, dc_prev = dnc_cell.reference_lstm_cell_backward(dh, dc, gates, c_prev, c)
    for forward, backward in ((dnc_cell.cpu_lstm_cell, dnc_cell.cpu_lstm_cell_backward),
                              (dnc_cell.cuda_lstm_cell, dnc_cell.cuda_lstm_cell_backward)):
        got_h, got_c = forward(gates, c_prev)
        close(got_h, h)
        close(got_c, c)
        got_dg, got_dc = backward(dh, dc, gates, c_prev, c.astype(np.float32))
        close(got_dg, dgates)
        close(got_dc, dc_prev)
    g64, c64, dh64, dc64 = (a.astype(np.float64) for a in (gates, c_prev, dh, dc))

    def loss():
        h_, c_ = dnc_cell.reference_lstm_cell(g64, c64)
        return float((h_ * dh64).sum() + (c_ * dc64).sum())

    fd_check(loss, [g64, c64], dnc_cell.reference_lstm_cell_backward(dh64, dc64, g64, c64,
                                                               dnc_cell.reference_lstm_cell(g64, c64)[1]), indices=4)


def test_memory_write():
    mem, p, s = f32(2, 5, 3), softmax_rows.reference_softmax_rows(f32(2, 5)).astype(np.float32), f32(2) ** 2
    e, a, dout = f32(2, 3) ** 2, np.tanh(f32(2, 3)), f32(2, 5, 3)
    ref = dnc_memory.reference_memory_write(mem, p, s, e, a)
    ref_grads = dnc_memory.reference_memory_write_backward(dout, mem, p, s, e, a)
    for forward, backward in ((dnc_memory.cpu_memory_write, dnc_memory.cpu_memory_write_backward),
                              (dnc_memory.cuda_memory_write, dnc_memory.cuda_memory_write_backward)):
        close(forward(mem, p, s, e, a), ref)
        for got, want in zip(backward(dout, mem, p, s, e, a), ref_grads):
            close(got, want)
    args = [v.astype(np.float64) for v in (mem, p, s, e, a)]
    fd_check(lambda: float((dnc_memory.reference_memory_write(*args) * dout).sum()), args,
             dnc_memory.reference_memory_write_backward(dout, *args))


@pytest.mark.parametrize("kind", [dnc_elementwise.SIGMOID, dnc_elementwise.TANH])
def test_activation(kind):
    x, dy = f32(3, 7, scale=2.0), f32(3, 7)
    y = dnc_elementwise.reference_activation(x, kind)
    dx = dnc_elementwise.reference_activation_backward(dy, y, kind)
    for forward, backward in ((dnc_elementwise.cpu_activation, dnc_elementwise.cpu_activation_backward),
                              (dnc_elementwise.cuda_activation, dnc_elementwise.cuda_activation_backward)):
        close(forward(x, kind), y)
        close(backward(dy, y.astype(np.float32), kind), dx)
    x64 = x.astype(np.float64)
    fd_check(lambda: float((dnc_elementwise.reference_activation(x64, kind) * dy).sum()), [x64],
             [dnc_elementwise.reference_activation_backward(dy, dnc_elementwise.reference_activation(x64, kind), kind)])


def test_window_copy_scale_rows_and_accumulate():
    src, dst = f32(4, 6), f32(5, 7)
    want = dst.astype(np.float64)
    want[1:4, 2:6] = src[0:3, 1:5]
    for backend in ("cpu", "cuda"):
        ops = dnc_ops.ops_for(backend)
        d = ops.to_device(dst.copy())
        ops.copy_window(ops.to_device(src), d, 0, 1, 1, 2, 3, 4)
        close(d, want)
    x, s = f32(3, 4), f32(3)
    ref = dnc_ops.ops_for("numpy")
    for backend in ("cpu", "cuda"):  # scale_rows is kernels/lstm_cell.py's
        close(dnc_ops.ops_for(backend).scale_rows(x, s), ref.scale_rows(x, s))
    ops = dnc_ops.ops_for("cuda")
    acc = ops.to_device(x.copy())
    ops.accumulate(acc, ops.to_device(x))
    close(acc, 2.0 * x.astype(np.float64))
    # the column/row helpers compose copy_window the same way on every backend
    cpu = dnc_ops.ops_for("cpu")
    parts = [f32(2, 3), f32(2, 1)]
    close(cpu.concat_columns(parts), ref.concat_columns(parts))
    close(cpu.take_columns(src, 2, 3), src[:, 2:5].astype(np.float64))
    close(cpu.take_rows(src, 1, 2), src[1:3].astype(np.float64))
