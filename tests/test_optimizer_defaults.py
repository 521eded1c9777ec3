"""The optimisers' defaults and edges: each constructor's defaults are the published ones (Schedule-Free's
AdamWScheduleFree, torch.optim.AdamW; SGD with momentum 0.9 and lr 0.1, eggnog's own), make_optimizer's
defaults and the closed ends of its ranges, a zero learning rate that moves nothing, and host parameters
stepped on the host with no kernel launched."""

import numpy as np
import pytest

from eggnog.kernels.core.device_counts import counting
from eggnog.runtime.errors import BadInput
from eggnog.training.optimizers import AdamW, SfAdamW, Sgd, make_optimizer
from tests.test_optim import GRADS, P0, as64, close, f32, ref_adamw, ref_sf_adamw, ref_sgd


def steps(opt, params, reference):
    for g, expected in zip(GRADS, reference):
        opt.step(f32(g))
        close(params, expected[0])


def test_schedule_free_defaults_are_the_published_ones():
    params = f32(P0)
    steps(SfAdamW(params), params, ref_sf_adamw(as64(P0), [as64(g) for g in GRADS], 0.0025, 0.9, 0.999, 1e-8, 0.0, 0))


def test_adamw_defaults_are_torchs():
    params = f32(P0)
    steps(AdamW(params), params, ref_adamw(as64(P0), [as64(g) for g in GRADS], 1e-3, 0.9, 0.999, 1e-8, 0.01))


def test_sgd_defaults():
    params = f32(P0)
    steps(Sgd(params), params, ref_sgd(as64(P0), [as64(g) for g in GRADS], 0.1, 0.9, 0.0))


@pytest.mark.parametrize("name, reference", [
    ("sf-adamw", lambda grads: ref_sf_adamw(as64(P0), grads, 0.01, 0.9, 0.999, 1e-8, 0.0, 0)),
    ("adamw", lambda grads: ref_adamw(as64(P0), grads, 0.01, 0.9, 0.999, 1e-8, 0.0)),
    ("sgd", lambda grads: ref_sgd(as64(P0), grads, 0.01, 0.9, 0.0)),
])
def test_make_optimizer_defaults(name, reference):
    params = f32(P0)
    steps(make_optimizer(name, params, 0.01), params, reference([as64(g) for g in GRADS]))


def test_the_closed_ends_of_the_ranges_are_accepted():
    params = f32(P0)
    steps(make_optimizer("adamw", params, 0.01, beta1=0.0, beta2=0.0), params,
          ref_adamw(as64(P0), [as64(g) for g in GRADS], 0.01, 0.0, 0.0, 1e-8, 0.0))
    params = f32(P0)
    steps(make_optimizer("sgd", params, 0.01, momentum=0.0), params,
          ref_sgd(as64(P0), [as64(g) for g in GRADS], 0.01, 0.0, 0.0))


def test_a_zero_learning_rate_moves_nothing_even_from_a_loaded_state():
    params = f32(P0)
    opt = SfAdamW(params, lr=0.0)
    opt.load_state({"z": f32([1.0, 2.0, 3.0]), "v": f32([0.0, 0.0, 0.0])}, {"k": 0, "lr_max": -1.0, "weight_sum": 0.0})
    opt.step(f32(GRADS[0]))
    np.testing.assert_array_equal(params, f32(P0))


@pytest.mark.parametrize("name", ["sf-adamw", "adamw", "sgd"])
def test_host_parameters_step_on_the_host(name):
    params = f32(P0)
    opt = make_optimizer(name, params, 0.01)
    with counting() as counts:
        opt.step(f32(GRADS[0]))
    assert counts.launches == 0 and not np.array_equal(params, f32(P0))


@pytest.mark.parametrize("kwargs", [dict(momentum=1.0), dict(beta1=1.0), dict(beta2=1.0)])
def test_the_open_ends_are_refused(kwargs):
    with pytest.raises(BadInput, match="lie in \\[0, 1\\)"):
        make_optimizer("sgd", f32(P0), 0.01, **kwargs)


@pytest.mark.parametrize("name", ["sf-adamw", "adamw", "sgd"])
def test_the_state_counts_the_steps_taken(name):
    opt = make_optimizer(name, f32(P0), 0.01)
    assert opt.state()[1]["k"] == 0
    for g in GRADS:
        opt.step(f32(g))
    assert opt.state()[1]["k"] == len(GRADS)


TINY = [[1e-9, -2e-9, 3e-9], [2e-9, 1e-9, -1e-9], [-3e-9, 2e-9, 1e-9]]


@pytest.mark.parametrize("name", ["sf-adamw", "adamw"])
def test_eps_matters_where_gradients_are_tiny(name):
    """Gradients of 1e-9: sqrt(v) is about 1e-9 after bias correction, so eps (1e-8) dominates the denominator."""
    params, grads = f32(P0), [as64(g) for g in TINY]
    opt = make_optimizer(name, params, 0.01)
    reference = (ref_sf_adamw(as64(P0), grads, 0.01, 0.9, 0.999, 1e-8, 0.0, 0) if name == "sf-adamw" else
                 ref_adamw(as64(P0), grads, 0.01, 0.9, 0.999, 1e-8, 0.0))
    for g, expected in zip(TINY, reference):
        opt.step(f32(g))
        close(params, expected[0])


def test_a_weight_decay_of_one():
    params, grads = f32(P0), [as64(g) for g in GRADS]
    steps(make_optimizer("sf-adamw", params, 0.01, weight_decay=1.0), params,
          ref_sf_adamw(as64(P0), grads, 0.01, 0.9, 0.999, 1e-8, 1.0, 0))
    params = f32(P0)
    steps(make_optimizer("sgd", params, 0.01, weight_decay=1.0), params, ref_sgd(as64(P0), grads, 0.01, 0.9, 1.0))


def test_checkpoint_arrays_carry_the_state_under_a_prefix_and_come_back():
    from eggnog.training.optimizers import checkpoint_arrays, state_from_checkpoint

    opt = make_optimizer("sf-adamw", f32(P0), 0.01)
    opt.step(f32(GRADS[0]))
    arrays, scalars = checkpoint_arrays(opt)
    assert sorted(arrays) == ["opt_v", "opt_z"] and scalars["k"] == 1
    back = state_from_checkpoint({**arrays, "params": f32(P0)})
    assert sorted(back) == ["v", "z"] and np.array_equal(back["z"], opt.state()[0]["z"])
