"""--precision of the float trainers (kernels/core/registry.py PRECISIONS) against fp32, on a MinGRU step
(loss and gradient of one chunk, weights scaled up so every product matters). Stated tolerances, relative:

    precision   loss     gradient (L2 norm of the difference / norm of the fp32 gradient)
    tf32        2e-4     5e-3        (measured 6.3e-5 and 7.6e-4 on the CPU twins, gradients on TF32 too)
    bf16        1e-3     3e-2        (measured 1.6e-4 and 5.0e-3)

and each mode really rounds: its gradient differs from fp32's by more than a tenth of what it measured.
The step runs on the CPU twins: the kernels agree with them to 1e-5 (tests/test_kernel_ops.py), far inside
these tolerances, and each backend is checked to serve the same ops at each precision.
"""

from functools import cache

import numpy as np
import pytest

from eggnog.kernels.core.placement import PRECISIONS
from eggnog.kernels.core.registry import all_ops, ops_for
from eggnog.models.mingru import MinGruConfig, MinGruModel
from eggnog.runtime.errors import BadInput
from eggnog.training.mingru.bptt import BpttRunConfig

TOLERANCE = {"tf32": (2e-4, 5e-3, 7e-5), "bf16": (1e-3, 3e-2, 6e-4)}  # loss, gradient, least gradient change


@cache  # the fp32 side is shared by both precisions' tests
def loss_and_gradient(precision):
    model = MinGruModel(MinGruConfig(32, 2, 1.5, 2.0))
    tokens = np.random.default_rng(0).integers(0, 256, (2, 9)).astype(np.uint8)
    ops = ops_for("cpu", precision)
    p = model.views(ops.to_device(model.init_params(1) * 20))
    loss, grads, _ = model.loss_and_grad(ops, p, tokens[:, :-1], tokens[:, 1:])
    return loss, np.asarray(ops.to_host(model.flatten_on(grads, ops)), np.float64)


@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_each_precision_stays_within_its_tolerance_of_fp32(precision):
    loss, grad = loss_and_gradient("fp32")
    other_loss, other_grad = loss_and_gradient(precision)
    loss_tol, grad_tol, least = TOLERANCE[precision]
    error = np.linalg.norm(other_grad - grad) / np.linalg.norm(grad)
    assert abs(other_loss - loss) <= loss_tol * abs(loss)
    assert least < error <= grad_tol, error


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_the_products_of_each_precision(backend):
    for precision, replaced in PRECISIONS.items():
        ops = ops_for(backend, precision)
        for name in ("matmul", "matmul_backward"):
            served = all_ops()[name].implementation(backend, precision)
            assert served is getattr(all_ops()[replaced.get(name, name)], backend)
            assert getattr(ops, name).args[0].precision == precision
    with pytest.raises(ValueError, match="unknown precision"):
        ops_for("cpu", "fp16")
    with pytest.raises(BadInput, match="unknown --precision 'fp16'"):
        BpttRunConfig(precision="fp16").resolved().check()
