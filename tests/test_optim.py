"""training.optimizers against hand-written float64 references of the published update rules.

The references below are written out independently of the module, from:
- facebookresearch/schedule_free `AdamWScheduleFree.step` (current release: lr = lr0 * sched, bias correction
  inside the denominator, `exp_avg_sq.div(bias_correction2).sqrt_().add_(eps)`) and `.eval()`
  (x = lerp(y, z, 1 - 1/b1));
- torch.optim.AdamW (single-tensor path) and torch.optim.SGD (momentum, dampening 0, L2 weight decay).
"""

import json
import math

import numpy as np
import pytest

from eggnog.runtime.errors import BadInput
from eggnog.training.optimizers import OPTIMIZERS, AdamW, SfAdamW, Sgd, make_optimizer

P0 = [0.5, -1.25, 2.0]
GRADS = [[0.3, -0.7, 1.1], [-0.2, 0.4, 0.9], [0.05, -1.5, -0.6]]
RTOL, ATOL = 1e-6, 1e-8


def f32(values):
    return np.array(values, dtype=np.float32)


def as64(values):
    """Exact float64 copies of the float32 inputs the module sees."""
    return [float(np.float32(v)) for v in values]


def close(actual, expected):
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64), expected, rtol=RTOL, atol=ATOL)


# ---------------------------------------------------------------- float64 references

def ref_sf_adamw(p0, grads, lr0, b1, b2, eps, wd, warmup, r=0.0, wlp=2.0):
    """Yields (y, z, v, x) after each step, scalar per coordinate, float64. lr0 may be a list (group['lr'] per step)."""
    y, z, v = list(p0), list(p0), [0.0] * len(p0)
    lr_max, weight_sum = -1.0, 0.0
    for k, g in enumerate(grads):
        sched = (k + 1) / warmup if k < warmup else 1.0
        bias_correction2 = 1 - b2 ** (k + 1)
        lr = (lr0[k] if isinstance(lr0, list) else lr0) * sched
        lr_max = max(lr, lr_max)
        weight = (k + 1) ** r * lr_max ** wlp
        weight_sum = weight_sum + weight
        ckp1 = weight / weight_sum if weight_sum else 0.0
        for i in range(len(y)):
            v[i] = v[i] * b2 + (1 - b2) * g[i] * g[i]
            d = g[i] / (math.sqrt(v[i] / bias_correction2) + eps)
            d += wd * y[i]                                   # weight decay at y
            y[i] = y[i] + ckp1 * (z[i] - y[i])               # y.lerp_(end=z, weight=ckp1)
            y[i] = y[i] + lr * (b1 * (1 - ckp1) - 1) * d
            z[i] = z[i] - lr * d
        x = [yi + (1 - 1 / b1) * (zi - yi) for yi, zi in zip(y, z)]  # p.lerp_(end=z, weight=1-1/beta1)
        yield list(y), list(z), list(v), x


def ref_adamw(p0, grads, lr, b1, b2, eps, wd):
    p, m, v = list(p0), [0.0] * len(p0), [0.0] * len(p0)
    for step, g in enumerate(grads, start=1):
        bc1, bc2 = 1 - b1 ** step, 1 - b2 ** step
        for i in range(len(p)):
            p[i] *= 1 - lr * wd
            m[i] = m[i] + (1 - b1) * (g[i] - m[i])           # exp_avg.lerp_(grad, 1 - beta1)
            v[i] = v[i] * b2 + (1 - b2) * g[i] * g[i]
            denom = math.sqrt(v[i]) / math.sqrt(bc2) + eps
            p[i] -= (lr / bc1) * m[i] / denom
        yield list(p), list(m), list(v)


def ref_sgd(p0, grads, lr, momentum, wd):
    p, buf = list(p0), None
    for g in grads:
        d = [g[i] + wd * p[i] for i in range(len(p))]
        buf = list(d) if buf is None else [momentum * buf[i] + d[i] for i in range(len(p))]
        p = [p[i] - lr * buf[i] for i in range(len(p))]
        yield list(p), list(buf)


# ---------------------------------------------------------------- step-by-step checks

@pytest.mark.parametrize("lr0,b1,b2,wd", [(0.05, 0.9, 0.999, 0.1), (0.2, 0.8, 0.95, 0.5)])
def test_sf_adamw_matches_published_steps(lr0, b1, b2, wd):
    params = f32(P0)
    opt = make_optimizer("sf-adamw", params, lr0, beta1=b1, beta2=b2, weight_decay=wd, warmup_steps=2)
    assert isinstance(opt, SfAdamW)
    ref = ref_sf_adamw(as64(P0), [as64(g) for g in GRADS], lr0, b1, b2, 1e-8, wd, warmup=2)
    expected_lr_max = [lr0 / 2, lr0, lr0]
    expected_weight_sum = [(lr0 / 2) ** 2, (lr0 / 2) ** 2 + lr0 ** 2, (lr0 / 2) ** 2 + 2 * lr0 ** 2]
    for k, (g, (y, z, v, x)) in enumerate(zip(GRADS, ref)):
        opt.step(f32(g))
        assert opt.y is params and params.dtype == np.float32
        close(params, y)
        close(opt.z, z)
        close(opt.v, v)
        close(opt.eval_params(), x)
        assert opt.k == k + 1
        assert opt.lr_max == pytest.approx(expected_lr_max[k], rel=1e-12)
        assert opt.weight_sum == pytest.approx(expected_weight_sum[k], rel=1e-12)
    # step 1 has ckp1 = 1, which puts y onto z (so x = y); after more steps the evaluation point must differ from y
    assert not np.allclose(opt.eval_params(), params)


def test_sf_adamw_polynomial_weighting_and_weight_lr_power():
    params = f32(P0)
    opt = SfAdamW(params, lr=0.1, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.05, warmup_steps=3, r=0.5,
                  weight_lr_power=1.0)
    ref = ref_sf_adamw(as64(P0), [as64(g) for g in GRADS], 0.1, 0.9, 0.99, 1e-8, 0.05, warmup=3, r=0.5, wlp=1.0)
    for g, (y, z, v, x) in zip(GRADS, ref):
        opt.step(f32(g))
        close(params, y)
        close(opt.z, z)
        close(opt.v, v)
        close(opt.eval_params(), x)


def test_sf_adamw_lr_max_holds_when_lr_is_lowered():
    """Lowering group['lr'] after warmup: the average keeps weighting by the largest lr seen (lr_max)."""
    lrs = [0.2, 0.2, 0.05, 0.05]
    grads = GRADS + [[0.1, 0.2, -0.3]]
    params = f32(P0)
    opt = make_optimizer("sf-adamw", params, lrs[0], weight_decay=0.1, warmup_steps=2)
    ref = ref_sf_adamw(as64(P0), [as64(g) for g in grads], lrs, 0.9, 0.999, 1e-8, 0.1, warmup=2)
    for k, (g, (y, z, _v, x)) in enumerate(zip(grads, ref)):
        opt.lr = lrs[k]
        opt.step(f32(g))
        close(params, y)
        close(opt.z, z)
        close(opt.eval_params(), x)
    assert opt.lr_max == 0.2
    assert opt.weight_sum == pytest.approx(0.1 ** 2 + 3 * 0.2 ** 2, rel=1e-12)


def test_sf_adamw_eval_params_is_x_and_leaves_y_alone():
    params = f32(P0)
    opt = make_optimizer("sf-adamw", params, 0.05, beta1=0.9, weight_decay=0.1, warmup_steps=2)
    for g in GRADS:
        opt.step(f32(g))
    y_before = params.copy()
    x = opt.eval_params()
    assert x.dtype == np.float32 and x is not params
    np.testing.assert_array_equal(params, y_before)
    y64, z64 = params.astype(np.float64), opt.z.astype(np.float64)
    close(x, (1 / 0.9) * y64 + (1 - 1 / 0.9) * z64)
    # the train()-mode inverse: y = lerp(x, z, 1 - b1)
    close(x.astype(np.float64) + (1 - 0.9) * (z64 - x), y64)


def test_adamw_matches_pytorch_steps():
    params = f32(P0)
    opt = make_optimizer("adamw", params, 0.01, beta1=0.9, beta2=0.999, weight_decay=0.1)
    assert isinstance(opt, AdamW)
    ref = ref_adamw(as64(P0), [as64(g) for g in GRADS], 0.01, 0.9, 0.999, 1e-8, 0.1)
    for g, (p, m, v) in zip(GRADS, ref):
        opt.step(f32(g))
        close(params, p)
        close(opt.m, m)
        close(opt.v, v)
        close(opt.eval_params(), p)


def test_sgd_matches_pytorch_steps():
    params = f32(P0)
    opt = make_optimizer("sgd", params, 0.1, momentum=0.9, weight_decay=0.05)
    assert isinstance(opt, Sgd)
    ref = ref_sgd(as64(P0), [as64(g) for g in GRADS], 0.1, 0.9, 0.05)
    for g, (p, buf) in zip(GRADS, ref):
        opt.step(f32(g))
        close(params, p)
        close(opt.buf, buf)
        close(opt.eval_params(), p)


# ---------------------------------------------------------------- resume

@pytest.mark.parametrize("name,kwargs", [
    ("sf-adamw", dict(beta1=0.9, beta2=0.999, weight_decay=0.1, warmup_steps=2)),
    ("sf-adamw", dict(beta1=0.9, beta2=0.999, weight_decay=0.1, warmup_steps=5)),  # resume inside warmup
    ("adamw", dict(weight_decay=0.1)),
    ("sgd", dict(momentum=0.9, weight_decay=0.05)),
])
def test_state_round_trip_continues_bit_identically(name, kwargs):
    rng = np.random.default_rng(0)
    grads = rng.standard_normal((6, 5)).astype(np.float32)
    params = rng.standard_normal(5).astype(np.float32)
    a = make_optimizer(name, params, 0.05, **kwargs)
    for g in grads[:3]:
        a.step(g)
    arrays, scalars = a.state()
    saved_params = params.copy()                         # what a checkpoint of the training point holds
    saved_arrays = {k: v.copy() for k, v in arrays.items()}
    saved_scalars = json.loads(json.dumps(scalars))

    resumed = saved_params.copy()
    b = make_optimizer(name, resumed, 0.05, **kwargs)
    b.load_state(saved_arrays, saved_scalars)
    for g in grads[3:]:
        a.step(g)
        b.step(g)
        np.testing.assert_array_equal(resumed, params)
        np.testing.assert_array_equal(b.eval_params(), a.eval_params())
        arr_a, sc_a = a.state()
        arr_b, sc_b = b.state()
        assert sc_a == sc_b
        for key in arr_a:
            np.testing.assert_array_equal(arr_b[key], arr_a[key])


def test_sf_adamw_resume_from_x_checkpoint_recovers_y():
    """Checkpointing at x (with z) is enough: y = lerp(x, z, 1 - b1) as in the published .train()."""
    rng = np.random.default_rng(1)
    params = rng.standard_normal(4).astype(np.float32)
    a = make_optimizer("sf-adamw", params, 0.05, weight_decay=0.1, warmup_steps=2)
    for _ in range(3):
        a.step(rng.standard_normal(4).astype(np.float32))
    x = a.eval_params().astype(np.float64)
    y = x + (1 - 0.9) * (a.z.astype(np.float64) - x)
    np.testing.assert_allclose(y, params, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- bad inputs

@pytest.mark.parametrize("name,kwargs", [
    ("sf-adamw", dict(lr=0.0)),
    ("adamw", dict(lr=-1e-3)),
    ("sgd", dict(lr=0.0)),
    ("adamw", dict(lr=1e-3, beta1=1.0)),
    ("adamw", dict(lr=1e-3, beta1=-0.1)),
    ("sf-adamw", dict(lr=1e-3, beta2=1.0)),
    ("sf-adamw", dict(lr=1e-3, beta2=1.5)),
    ("sf-adamw", dict(lr=1e-3, beta1=0.0)),
    ("sf-adamw", dict(lr=1e-3, weight_decay=-0.1)),
    ("sf-adamw", dict(lr=1e-3, warmup_steps=-1)),
    ("adam", dict(lr=1e-3)),
    ("SGD", dict(lr=1e-3)),
    ("", dict(lr=1e-3)),
])
def test_make_optimizer_rejects_bad_input(name, kwargs):
    params = f32(P0)
    with pytest.raises(BadInput):
        make_optimizer(name, params, **kwargs)
    np.testing.assert_array_equal(params, f32(P0))


def test_make_optimizer_accepts_beta1_zero_outside_sf_adamw():
    assert isinstance(make_optimizer("adamw", f32(P0), 1e-3, beta1=0.0), AdamW)
    assert isinstance(make_optimizer("sgd", f32(P0), 1e-3, beta1=0.0), Sgd)


# ---------------------------------------------------------------- sanity: a convex quadratic

@pytest.mark.parametrize("name,lr", [("sf-adamw", 0.2), ("adamw", 0.1), ("sgd", 0.05)])
def test_each_optimizer_decreases_a_convex_quadratic(name, lr):
    assert name in OPTIMIZERS
    a = np.array([0.5, 1.0, 2.0, 1.5], dtype=np.float32)
    target = np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32)

    def loss(p):
        return 0.5 * float(np.sum(a.astype(np.float64) * (p.astype(np.float64) - target) ** 2))

    params = np.zeros(4, dtype=np.float32)
    opt = make_optimizer(name, params, lr, weight_decay=0.0)
    start = loss(opt.eval_params())
    for _ in range(50):
        opt.step((a * (params - target)).astype(np.float32))
    end = loss(opt.eval_params())
    assert np.all(np.isfinite(params))
    assert end < 0.01 * start, (name, start, end)


@pytest.mark.parametrize("name,kwargs", [
    ("sf-adamw", dict(beta1=0.9, beta2=0.999, weight_decay=0.1, warmup_steps=2)),
    ("adamw", dict(weight_decay=0.1)),
    ("sgd", dict(momentum=0.9, weight_decay=0.05)),
])
def test_device_parameters_step_on_the_device(name, kwargs):
    """Parameters given as a device array stay there: every step runs the CUDA kernels (on the simulator
    in CI), host gradients are copied over, and the result, state and evaluation point agree with the
    host optimiser (float32; FMA contraction on the GPU: 1e-6 relative); a state saved on the device
    resumes on the host and vice versa."""
    from eggnog.kernels.core.cuda_api import cuda

    rng = np.random.default_rng(1)
    grads = rng.standard_normal((4, 300)).astype(np.float32)
    params = rng.standard_normal(300).astype(np.float32)
    host = make_optimizer(name, params.copy(), 0.05, **kwargs)
    device = make_optimizer(name, cuda.to_device(params), 0.05, **kwargs)
    for i, g in enumerate(grads):
        host.step(g)
        device.step(g if i % 2 else cuda.to_device(g))
    assert hasattr(device.train_params(), "copy_to_host") and hasattr(device.eval_params(), "copy_to_host")
    np.testing.assert_allclose(device.train_params().copy_to_host(), host.train_params(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(device.eval_params().copy_to_host(), host.eval_params(), rtol=1e-6, atol=1e-7)
    arrays, scalars = device.state()
    assert scalars == host.state()[1] and all(isinstance(a, np.ndarray) for a in arrays.values())
    resumed = make_optimizer(name, device.train_params().copy_to_host(), 0.05, **kwargs)
    resumed.load_state(arrays, scalars)
    back = make_optimizer(name, cuda.to_device(resumed.train_params()), 0.05, **kwargs)
    back.load_state(*resumed.state())
    for opt in (resumed, back):
        opt.step(grads[0])
    np.testing.assert_allclose(back.train_params().copy_to_host(), resumed.train_params(), rtol=1e-6, atol=1e-7)
