"""Every launch variant of the bf16 matmul kernels (kernels/core/tuning.py) computes its op: on the
simulator, each block shape run on the op's registered cases agrees with the NumPy reference within the
op's tolerance, forward and both gradients, and so does one whole block of the shape (its vector path:
two full 16-deep slices and a tail), which no registered case fills for 256 x 128. The default is
tests/test_kernel_ops.py's (the ops' own launchers)."""

import zlib

import numpy as np
import pytest

from eggnog.kernels.core.cuda_api import SIMULATED, cuda
from eggnog.kernels.core.placement import to_host
from eggnog.kernels.core.registry import all_ops, normal32
from eggnog.kernels.core.tuning import TUNABLES
from eggnog.kernels.layers import matmul_bf16

OTHERS = [v for v in matmul_bf16.VARIANTS if v != matmul_bf16.DEFAULT]


def cases(name, variant):
    """The op's registered cases, then the case whose products each fill one block of `variant`."""
    entry = all_ops()[name]
    rng = np.random.default_rng(zlib.crc32(entry.name.encode()))
    registered = list(entry.cases(rng))
    block_m, block_n = (int(n) for n in variant.split("x"))
    if name == "matmul_bf16":
        whole = [(normal32(rng, block_m, 40), normal32(rng, block_n, 40))]  # y: block_m x block_n
    else:  # dx: block_m x block_n; dW: (block_m, block_n) too, 40 rows deep
        whole = [(normal32(rng, block_m, 40), normal32(rng, block_m, block_n), normal32(rng, 40, block_n)),
                 (normal32(rng, 40, block_m), normal32(rng, 40, block_n), normal32(rng, block_m, block_n))]
    return entry, registered + whole


def agree(entry, got, ref, where):
    rtol, atol = entry.tolerance
    for k, (g, r) in enumerate(zip(got, ref)):
        g = np.asarray(to_host(g), np.float64)
        assert g.shape == np.shape(r), f"{where} output {k}: shape {g.shape} != {np.shape(r)}"
        np.testing.assert_allclose(g, np.asarray(r, np.float64), rtol=rtol, atol=atol, err_msg=f"{where} output {k}")


def test_the_bf16_products_offer_their_variants():
    assert SIMULATED, "tests run the CUDA kernels on the simulator"
    for kernel in ("matmul_bf16", "matmul_bf16_dx", "matmul_bf16_dw"):
        tunable = TUNABLES[kernel]
        assert tunable.variants == matmul_bf16.VARIANTS and tunable.default == "128x256"
        assert tunable.choose((17, 33, 15)) == tunable.default  # nothing tuned on the simulator


@pytest.mark.parametrize("variant", OTHERS)
def test_matmul_bf16_variants_match_the_reference(variant):
    entry, forward_cases = cases("matmul_bf16", variant)
    for i, (x, w) in enumerate(forward_cases):
        got = matmul_bf16.matmul_bf16_variant(variant, cuda.to_device(x), cuda.to_device(w))
        agree(entry, [got], [matmul_bf16.reference_matmul_bf16(x, w)], f"matmul_bf16 {variant} case {i}")


@pytest.mark.parametrize("variant", OTHERS)
def test_matmul_backward_bf16_variants_match_the_reference(variant):
    entry, backward_cases = cases("matmul_backward_bf16", variant)
    for i, args in enumerate(backward_cases):
        got = matmul_bf16.matmul_backward_bf16_variants(variant, variant, *(cuda.to_device(a) for a in args))
        agree(entry, got, matmul_bf16.reference_matmul_backward_bf16(*args), f"matmul_backward_bf16 {variant} case {i}")
