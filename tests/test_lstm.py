"""The FlashRNN-style multi-head LSTM (kernels/rnn/lstm.py, models/lstm.py) on its three backends
(float64 NumPy reference, fp32 CPU twins, CUDA on the simulator); the kernels' agreement across
backends is tests/test_kernel_ops.py's.

Tolerances: fp32 against float64 within 1e-5 relative to the largest entry, for the loss and the BPTT
gradient (observed ~1e-7 at these sizes); the float64 gradient matches central finite differences
(step 1e-6) to 1e-6 relative to the largest gradient entry, for every parameter of a tiny model, and
the reference step backward matches finite differences of the reference step.
"""

import math

import numpy as np
import pytest

from eggnog.kernels.core.placement import to_host
from eggnog.kernels.rnn import lstm
from eggnog.models.lstm import LstmConfig, LstmModel
from eggnog.runtime.errors import BadInput
from eggnog.zorn.batch import TaskBatch
from tests.helpers import assert_user_error, lstm_inputs, run_script

RNG = np.random.default_rng(5)
TABLE1 = [(240, 12, 150_740), (1600, 32, 1_139_700), (9600, 64, 10_627_700), (66000, 220, 112_606_100),
          (297500, 350, 1_162_045_100)]


def relative(got, ref):
    ref = np.asarray(ref, np.float64)
    return float(np.abs(np.asarray(to_host(got), np.float64) - ref).max() / np.abs(ref).max())


def tiny():
    return LstmModel(LstmConfig(vocab_size=7, input_size=3, hidden_size=4, num_heads=2))


def noisy_params(model, scale=0.3):
    """Initial parameters plus noise, so the zero-initialised b, states0 and b_proj matter too."""
    return (model.init_params(0) + RNG.normal(0, scale, model.n_params)).astype(np.float32)


def make_batch(vocab=7, batch=2, steps=3, mask=None):
    ids = RNG.integers(0, vocab, (batch, steps + 1)).astype(np.uint8)
    mask = np.ones((batch, steps), np.float32) if mask is None else np.asarray(mask, np.float32)
    return TaskBatch(ids[:, :-1], ids[:, 1:], mask)


# ---- sizes --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("hidden,heads,total", TABLE1)
def test_parameter_counts_of_the_table1_configs(hidden, heads, total):
    model = LstmModel(LstmConfig(100, 100, hidden, heads))  # shapes only: nothing is allocated
    v, e, h, n = 100, 100, hidden, heads
    assert model.n_params == v * e + 4 * e * h + 4 * h * h // n + 4 * h + 2 * h + v * h + v == total
    arch = model.architecture()
    assert arch["total_params"] == total and arch["model"] == "lstm"
    assert [t["name"] for t in arch["tensors"]] == ["W_in", "R", "b", "states0", "W_proj", "b_proj", "embed"]
    assert sum(t["params"] for t in arch["tensors"]) == total


def test_print_arch_prints_the_lstm_counts():
    for hidden, heads, total in (TABLE1[0], TABLE1[-1]):
        result = run_script("print_arch.py", "lstm", "--hidden-size", hidden, "--num-heads", heads,
                            "--input-size", 100, "--vocab-size", 100)
        assert result.returncode == 0, result.stderr
        assert f"{total:,}" in result.stdout.splitlines()[-2]
    assert_user_error(run_script("print_arch.py", "lstm", "--hidden-size", 10, "--num-heads", 3), "not divisible")


@pytest.mark.parametrize("cfg,message", [
    (LstmConfig(100, 100, 10, 3), "not divisible by num-heads 3"),
    (LstmConfig(100, 100, 0, 1), "hidden-size must be a positive"),
    (LstmConfig(100, 100, 8, 0), "num-heads must be a positive"),
    (LstmConfig(100, -1, 8, 2), "input-size must be a positive"),
    (LstmConfig(0, 100, 8, 2), "vocab-size must be a positive"),
    (LstmConfig(300, 100, 8, 2), "at most 256"),
])
def test_bad_configs_are_refused(cfg, message):
    with pytest.raises(BadInput, match=message):
        LstmModel(cfg)


def test_bad_batches_are_refused():
    model, flat = tiny(), None
    with pytest.raises(BadInput, match="outside the LSTM vocabulary"):
        model.loss("numpy", flat, TaskBatch(np.full((1, 2), 9, np.uint8), np.zeros((1, 2), np.uint8),
                                            np.ones((1, 2), np.float32)))
    with pytest.raises(BadInput, match="no position with mask 1"):
        model.loss("numpy", flat, make_batch(mask=np.zeros((2, 3))))
    with pytest.raises(BadInput, match="same"):
        model.loss("numpy", flat, TaskBatch(np.zeros((1, 2), np.uint8), np.zeros((1, 3), np.uint8),
                                            np.ones((1, 2), np.float32)))


def test_initialisation_and_storage_order():
    model = LstmModel(LstmConfig(50, 40, 60, 3))
    flat = model.init_params(3)
    views = model.views(flat)
    assert list(model.offsets) == ["W_in", "R", "b", "states0", "W_proj", "b_proj", "embed"]
    assert views["R"].shape == (4, 3, 20, 20) and views["states0"].shape == (2, 3, 20)
    for name in ("b", "states0", "b_proj"):
        assert not views[name].any()
    assert np.std(views["W_in"]) == pytest.approx(1 / math.sqrt(40), rel=0.05)
    assert np.std(views["R"]) == pytest.approx(1 / math.sqrt(20), rel=0.05)
    assert np.std(views["W_proj"]) == pytest.approx(1 / math.sqrt(20), rel=0.05)
    assert np.std(views["embed"]) == pytest.approx(1.0, rel=0.05)
    assert np.array_equal(flat, model.init_params(3))


# ---- the cell kernels alone ----------------------------------------------------------------------------

def test_recurrent_gradient_is_the_sum_of_outer_products():
    batch, heads, size, steps = 2, 2, 3, 3
    hidden = heads * size
    draw = RNG.normal(0, 1, (steps, batch, 4 * hidden))
    hs = RNG.normal(0, 1, (steps + 1, batch, hidden))
    dr = lstm.reference_lstm_recurrent_grad(draw, hs, heads)
    assert dr.shape == (4, heads, size, size)
    for g in range(4):
        for n in range(heads):
            rows = slice(g * hidden + n * size, g * hidden + (n + 1) * size)
            want = sum(np.outer(draw[t, b, rows], hs[t, b, n * size:(n + 1) * size])
                       for t in range(steps) for b in range(batch))
            assert np.allclose(dr[g, n], want, rtol=1e-12, atol=1e-12)


def test_backward_step_is_the_gradient_of_the_forward_step():
    """Float64 reference: <dh, h> + <dc, c> differentiated numerically through one step."""
    batch, heads, size = 2, 2, 2
    hidden = heads * size
    r, wx = RNG.normal(0, 0.7, (4, heads, size, size)), RNG.normal(0, 1, (batch, 4 * hidden))
    bias = RNG.normal(0, 0.3, 4 * hidden)
    h_prev, c_prev = RNG.normal(0, 1, (batch, hidden)), RNG.normal(0, 1, (batch, hidden))
    dh, dc = RNG.normal(0, 1, (batch, hidden)), RNG.normal(0, 1, (batch, hidden))

    def objective(wx_, h_prev_, c_prev_):
        h, c, _ = lstm.reference_lstm_forward_step(wx_, r, bias, h_prev_, c_prev_)
        return float((dh * h).sum() + (dc * c).sum())

    _, c, gates = lstm.reference_lstm_forward_step(wx, r, bias, h_prev, c_prev)
    draw, dh_prev, dc_prev = lstm.reference_lstm_backward_step(dh, dc, r, gates, c, c_prev)
    for got, arg in ((draw, 0), (dh_prev, 1), (dc_prev, 2)):
        for index in np.ndindex(got.shape):
            args = [wx.copy(), h_prev.copy(), c_prev.copy()]
            args[arg][index] += 1e-6
            up = objective(*args)
            args[arg][index] -= 2e-6
            assert got[index] == pytest.approx((up - objective(*args)) / 2e-6, abs=1e-8)


@pytest.mark.parametrize("batch, heads, size", [(19, 2, 3), (16, 1, 5), (3, 3, 8)])
def test_cpu_sequence_twin_equals_the_step_twin_bit_for_bit(batch, heads, size):
    """Full row tiles, a short last tile (19 = 16 + 3), a tile with one head, head sizes 3..8; the
    input rows repeat and skip table rows."""
    steps = 5
    table, rows, r, bias, states0 = lstm_inputs(RNG, steps, batch, heads, size, 7)
    hs, cs, gates = lstm.cpu_lstm_forward(table, rows, r, bias, states0, keep=True)
    h, c = np.tile(states0[0], (batch, 1)), np.tile(states0[1], (batch, 1))
    for t in range(steps):
        h, c, g = lstm.cpu_lstm_forward_step(table[rows[t]], r, bias, h, c)
        assert np.array_equal(hs[t + 1], h) and np.array_equal(cs[t + 1], c) and np.array_equal(gates[t], g)
    assert np.array_equal(lstm.cpu_lstm_forward(table, rows, r, bias, states0)[0], hs)


@pytest.mark.parametrize("budget, heads, mode", [(None, 2, "sequence"), (16 * 2 * 5, 2, "per step"),
                                                 (16 * 1 * 5, 2, "per step"), (16 * 2 * 5, 1, "persistent")])
def test_cuda_sequence_forward_and_backward_in_every_mode(monkeypatch, budget, heads, mode):
    """The GPU forward with a head's R in one block (one launch), split over blocks of 2 or 1 units (one
    launch per step), and in a cooperative grid (one block on the simulator), then the backward after
    it, against the reference; heads of 4 units, batch 3, 4 steps."""
    from eggnog.kernels.rnn import lstm_sequence_cuda

    if budget is not None:
        monkeypatch.setattr(lstm_sequence_cuda, "SHARED_BUDGET", budget)
    steps, batch, size = 4, 3, 4
    hidden = heads * size
    assert lstm_sequence_cuda.plan(heads, size, batch, steps)[2] == mode
    table, rows, r, bias, states0 = lstm_inputs(RNG, steps, batch, heads, size, 5)
    want = lstm.reference_lstm_forward(table, rows, r, bias, states0, keep=True)
    got = lstm.cuda_lstm_forward(*(lstm.cuda.to_device(a) for a in (table, rows, r, bias, states0)), True)
    for g, w in zip(got, want):
        assert relative(g, w) < 1e-5
    # the backward: one launch with the whole head in a block, else a tiled product per step
    dh_out = RNG.normal(0, 1, (steps, batch, hidden)).astype(np.float32)
    want = lstm.reference_lstm_backward(dh_out, r, *(w.astype(np.float32) for w in want))
    got = lstm.cuda_lstm_backward(lstm.cuda.to_device(dh_out), lstm.cuda.to_device(r), *got)
    for g, w in zip(got, want):
        assert relative(g, w) < 1e-5


def test_tiled_backward_crosses_row_tiles_and_partial_slices(monkeypatch):
    """The backward by tiled products (a head too big for a block: shared budget of two units): batch 130
    over two row tiles of 128 (the second of 2 rows), a head of 9 units (each gate's d in a slice of 8 and
    one of 1; 9 of the 80 columns), 2 steps (the fused and the unfused product), against the reference."""
    from eggnog.kernels.rnn import lstm_sequence_cuda

    monkeypatch.setattr(lstm_sequence_cuda, "SHARED_BUDGET", 16 * 2 * 9)
    steps, batch, heads, size = 2, 130, 1, 9
    assert not lstm_sequence_cuda.backward_fits(heads, size, batch, steps)
    table, rows, r, bias, states0 = lstm_inputs(RNG, steps, batch, heads, size, 5)
    forward = [a.astype(np.float32) for a in lstm.reference_lstm_forward(table, rows, r, bias, states0, keep=True)]
    dh_out = RNG.normal(0, 1, (steps, batch, heads * size)).astype(np.float32)
    want = lstm.reference_lstm_backward(dh_out, r, *forward)
    got = lstm.cuda_lstm_backward(*(lstm.cuda.to_device(a) for a in (dh_out, r, *forward)))
    for g, w in zip(got, want):
        assert relative(g, w) < 1e-5


def test_weight_gradient_splits_fill_the_last_wave():
    """Table 1 10M on an H100: 640 tiles on 132 SMs x 3 leave the second wave mostly idle; splitting the
    11264 rows fills the waves better; small row counts stay whole."""
    from eggnog.kernels.rnn.lstm_backward_cuda import MIN_SPLIT_ROWS, RESIDENT, grad_splits, grad_tiles

    tiles = int(np.prod(grad_tiles(64, 150)))
    splits = grad_splits(64, 150, 11264, 132)
    assert tiles == 640 and splits > 1
    waves = math.ceil(tiles * splits / (132 * RESIDENT))
    assert tiles * splits / (waves * 132 * RESIDENT) > 0.9
    assert grad_splits(64, 150, 2 * MIN_SPLIT_ROWS - 1, 132) == 1


def test_the_persistent_kernel_takes_six_rows_a_thread_and_pads_the_head_to_four(monkeypatch):
    """The cooperative kernel computes a unit for six rows of a group of 6 x lanes rows (10 units: 51
    lanes, groups of 306), k padded from 10 to 12 (three iterations of four): batch 450 has a full group,
    then one whose rows past the first 144 lie past the batch (staged as zeros, computed, never written)."""
    from eggnog.kernels.rnn import lstm_sequence_cuda

    monkeypatch.setattr(lstm_sequence_cuda, "SHARED_BUDGET", 16)
    steps, batch, size = 2, 450, 10
    assert lstm_sequence_cuda.plan(1, size, batch, steps)[:3:2] == (size, "persistent")
    assert lstm_sequence_cuda.row_lanes(size) == 51 and lstm_sequence_cuda.ROWS == 6
    table, rows, r, bias, states0 = lstm_inputs(RNG, steps, batch, 1, size, 7)
    want = lstm.reference_lstm_forward(table, rows, r, bias, states0, keep=True)
    got = lstm.cuda_lstm_forward(*(lstm.cuda.to_device(a) for a in (table, rows, r, bias, states0)), True)
    for g, w in zip(got, want):
        assert relative(g, w) < 1e-5


def test_the_gpu_plan_keeps_lstm_traffic_near_the_on_chip_minimum():
    """Static target: per-step traffic at most 2x the on-chip minimum at Table 1 100k, 1M (a head's R in
    one block, one launch) and 10M (R of a head 360 KB: two slices a head in a cooperative grid of 128
    blocks on an H100's 132 SMs); a GPU with fewer SMs falls back to a launch per step."""
    from eggnog.kernels.rnn.lstm_sequence_cuda import H100_SMS, plan, step_traffic

    for hidden, heads, mode in ((240, 12, "sequence"), (1600, 32, "sequence"), (9600, 64, "persistent")):
        size = hidden // heads
        assert plan(heads, size, 1024, 11, H100_SMS)[2] == mode
        moved, minimum = step_traffic(heads, size, 1024, 11)
        assert moved <= 2 * minimum, (hidden, moved / minimum)
    assert plan(64, 150, 1024, 11, 100)[2] == "per step"


def test_bad_input_rows_are_refused():
    r, bias = np.zeros((4, 1, 2, 2), np.float32), np.zeros(8, np.float32)
    table, states0 = np.zeros((3, 8), np.float32), np.zeros((2, 2), np.float32)
    for rows, message in ((np.array([[0, 3]], np.int32), "outside the table of 3 rows"),
                          (np.array([[0, -1]], np.int32), "outside the table"),
                          (np.array([0, 1], np.int32), "int32 array"), (np.array([[0, 1]], np.int64), "int32 array")):
        for forward in (lstm.reference_lstm_forward, lstm.cpu_lstm_forward):
            with pytest.raises(BadInput, match=message):
                forward(table, rows, r, bias, states0)


# ---- the model -------------------------------------------------------------------------------------------

def test_forward_and_gradients_agree_on_all_backends():
    model = tiny()
    flat = noisy_params(model)
    batch = make_batch(mask=[[1, 1, 0], [0, 1, 1]])
    ref_loss, ref_grad = model.loss_and_grad("numpy", flat.astype(np.float64), batch)
    assert ref_loss == model.loss("numpy", flat.astype(np.float64), batch)
    ref_logits = model.logits("numpy", flat.astype(np.float64), batch.inputs)
    for backend in ("cpu", "cuda"):
        loss, grad = model.loss_and_grad(backend, flat, batch)
        assert grad.dtype == np.float32 and grad.shape == (model.n_params,)
        assert loss == pytest.approx(ref_loss, rel=1e-5)
        assert model.loss(backend, flat, batch) == pytest.approx(ref_loss, rel=1e-5)
        assert relative(grad, ref_grad) <= 1e-5, backend
        for name, (start, shape) in model.offsets.items():  # every tensor gets gradient, and the right one
            ref_part = ref_grad[start:start + math.prod(shape)]
            assert np.abs(ref_part).max() > 1e-4, name
            assert relative(grad[start:start + math.prod(shape)], ref_part) <= 1e-4, name
        assert relative(model.logits(backend, flat, batch.inputs), ref_logits) <= 1e-5
    from eggnog.kernels.core.cuda_api import cuda

    on_device = model.loss("cuda", cuda.to_device(flat), batch)  # a device-resident flat vector
    assert on_device == pytest.approx(ref_loss, rel=1e-5)


def test_bptt_gradient_matches_finite_differences_in_every_parameter():
    model = tiny()
    flat = noisy_params(model).astype(np.float64)
    batch = make_batch(batch=2, steps=4, mask=[[1, 0, 1, 1], [1, 1, 1, 0]])
    _, grad = model.loss_and_grad("numpy", flat, batch)
    numeric = np.empty(model.n_params)
    for i in range(model.n_params):
        step = np.zeros_like(flat)
        step[i] = 1e-6
        numeric[i] = (model.loss("numpy", flat + step, batch) - model.loss("numpy", flat - step, batch)) / 2e-6
    scale = np.abs(numeric).max()
    for name, (start, shape) in model.offsets.items():
        part = slice(start, start + math.prod(shape))
        assert np.abs(grad[part] - numeric[part]).max() <= 1e-6 * scale, name
    start, _ = model.offsets["states0"]
    assert np.abs(numeric[start:start + 4]).max() > 1e-3 and np.abs(numeric[start + 4:start + 8]).max() > 1e-3


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_masked_positions_change_neither_loss_nor_gradient(backend):
    model = tiny()
    flat = noisy_params(model)
    mask = np.array([[1, 0, 1], [1, 1, 0]], np.float32)
    batch = make_batch(mask=mask)
    loss, grad = model.loss_and_grad(backend, flat, batch)
    targets = batch.targets.copy()
    targets[0, 1] = (targets[0, 1] + 3) % 7
    targets[1, 2] = (targets[1, 2] + 1) % 7
    inputs = batch.inputs.copy()
    inputs[1, 2] = (inputs[1, 2] + 2) % 7  # the last input only feeds a masked prediction
    other_loss, other_grad = model.loss_and_grad(backend, flat, TaskBatch(inputs, targets, mask))
    assert other_loss == loss and np.array_equal(other_grad, grad)
    # and the loss is the mean over the predicted positions only
    logits = model.logits("numpy", flat.astype(np.float64), batch.inputs)
    log_p = logits - np.log(np.exp(logits).sum(axis=2, keepdims=True))
    bits = -np.take_along_axis(log_p, batch.targets[..., None].astype(np.int64), axis=2)[..., 0] / math.log(2)
    assert loss == pytest.approx(float((bits * mask).sum() / mask.sum()), rel=1e-5)


@pytest.mark.parametrize("backend", ["numpy", "cpu", "cuda"])
def test_probes_as_extra_heads_give_each_perturbed_vectors_loss(backend):
    """probe_losses (P probes as P N heads of one LSTM) against `loss` of each perturbed copy."""
    from eggnog.kernels.core.registry import ops_for
    from eggnog.zorn.rge.trainer import probe_keys

    model = LstmModel(LstmConfig(7, 5, 6, 2))
    theta = model.init_params(0) + RNG.normal(0, 0.1, model.n_params).astype(np.float32)
    inputs, targets = (RNG.integers(0, 7, (3, 4)).astype(np.uint8) for _ in range(2))
    batch = TaskBatch(inputs, targets, (RNG.random((3, 4)) > 0.3).astype(np.float32))
    keys, alphas = probe_keys(1, 0, range(3)), [0.1, -0.1, 0.05]
    got = model.probe_losses(backend, theta, keys, alphas, "normal", batch)
    want = []
    for key, alpha in zip(keys, alphas):
        perturbed = np.empty_like(theta)
        ops_for("cpu").perturbed_copy(theta, perturbed, (int(key[0]), int(key[1])), alpha, "normal")
        want.append(model.loss(backend, perturbed, batch))
    np.testing.assert_allclose(got, want, rtol=2e-6)
    assert len(set(np.round(got, 6))) == 3  # three different perturbations, not one repeated
