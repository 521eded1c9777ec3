"""The DNC (models/dnc.py): parameter counts follow `formula_params` (Figure-1 configs from shapes
alone); the loss and its BPTT gradient agree across the float64 reference, the CPU twins and CUDA on
the simulator (fp32 vs float64: 1e-5 relative for the loss, 1e-4 of the largest entry for gradients),
and equal central finite differences of the float64 loss for entries of every tensor. The reference
backward of each kernel the DNC uses (kernels/layers/norms.py, softmax_rows.py, activations.py;
kernels/rnn/lstm_cell.py, dnc_memory.py) matches finite differences; the window helpers
(models/dnc_windows.py) compose copy_window the same way on every backend. The kernels' agreement across backends is
tests/test_kernel_ops.py's. Simulated launches are kept tiny and few.
"""

import math

import numpy as np
import pytest

from eggnog.kernels.core.placement import to_host
from eggnog.kernels.core.registry import ops_for
from eggnog.kernels.layers import activations, norms, softmax_rows
from eggnog.kernels.layers.activations import SIGMOID, TANH
from eggnog.kernels.rnn import dnc_memory, lstm_cell
from eggnog.models.dnc import DncConfig, DncModel, formula_params
from eggnog.models.dnc_windows import concat_columns, put_rows, take_columns, take_rows
from eggnog.runtime.errors import BadInput
from eggnog.zorn.batch import TaskBatch

RNG = np.random.default_rng(5)
# head_size >= 3: a LayerNorm over two features only ever yields (+-1, -+1), which makes key gradients vanish
TINY = DncConfig(vocab_size=7, input_size=3, hidden_size=4, memory_size=3, head_size=3, num_reads=2)


def f32(*shape):
    return RNG.normal(size=shape).astype(np.float32)


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


def test_layernorm_backward_matches_finite_differences():
    x, w, b, dy = (RNG.normal(size=shape) for shape in ((2, 5), (5,), (5,), (2, 5)))
    x = 2.0 * x + 1.0
    _, mean, rstd = norms.reference_layernorm(x, w, b)
    fd_check(lambda: float((norms.reference_layernorm(x, w, b)[0] * dy).sum()), [x, w, b],
             norms.reference_layernorm_backward(dy, x, w, mean, rstd))


def test_softmax_rows_backward_matches_finite_differences():
    x, dp = 3.0 * RNG.normal(size=(2, 6)), RNG.normal(size=(2, 6))
    fd_check(lambda: float((softmax_rows.reference_softmax_rows(x) * dp).sum()), [x],
             [softmax_rows.reference_softmax_rows_backward(dp, softmax_rows.reference_softmax_rows(x))])


def test_lstm_cell_backward_matches_finite_differences():
    gates, c_prev, dh, dc = 2.0 * RNG.normal(size=(2, 12)), *(RNG.normal(size=(2, 3)) for _ in range(3))

    def loss():
        h, c = lstm_cell.reference_lstm_cell(gates, c_prev)
        return float((h * dh).sum() + (c * dc).sum())

    c = lstm_cell.reference_lstm_cell(gates, c_prev)[1]
    fd_check(loss, [gates, c_prev], lstm_cell.reference_lstm_cell_backward(dh, dc, gates, c_prev, c), indices=4)


def test_memory_write_backward_matches_finite_differences():
    mem, p, s = RNG.normal(size=(2, 5, 3)), softmax_rows.reference_softmax_rows(RNG.normal(size=(2, 5))), \
        RNG.normal(size=2) ** 2
    e, a, dout = RNG.normal(size=(2, 3)) ** 2, np.tanh(RNG.normal(size=(2, 3))), RNG.normal(size=(2, 5, 3))
    args = [mem, p, s, e, a]
    fd_check(lambda: float((dnc_memory.reference_memory_write(*args) * dout).sum()), args,
             dnc_memory.reference_memory_write_backward(dout, *args))


@pytest.mark.parametrize("kind", [SIGMOID, TANH])
def test_activation_backward_matches_finite_differences(kind):
    x, dy = 2.0 * RNG.normal(size=(3, 7)), RNG.normal(size=(3, 7))
    fd_check(lambda: float((activations.reference_activation(x, kind) * dy).sum()), [x],
             [activations.reference_activation_backward(dy, activations.reference_activation(x, kind), kind)])


@pytest.mark.parametrize("backend", ["numpy", "cpu", "cuda"])
def test_windows_compose_copy_window(backend):
    ops = ops_for(backend)
    src, parts = f32(4, 6), [f32(2, 3), f32(2, 1)]

    def same(got, want):  # copies are exact
        assert np.array_equal(to_host(got), want)

    same(concat_columns(ops, [ops.to_device(q) for q in parts]), np.concatenate(parts, axis=1))
    same(take_columns(ops, ops.to_device(src), 2, 3), src[:, 2:5])
    same(take_rows(ops, ops.to_device(src), 1, 2), src[1:3])
    dst = ops.zeros((5, 6))
    put_rows(ops, dst, 2, ops.to_device(src[:3]))
    want = np.zeros((5, 6))
    want[2:5] = src[:3]
    same(dst, want)
