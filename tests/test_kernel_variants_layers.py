"""Every launch variant of the tunable scan and matmul kernels (kernels/core/tuning.py) computes its op:
on the simulator, each variant run on the op's registered cases agrees with the NumPy reference within the
op's tolerance. Cases whose launch would simulate more than MAX_THREADS threads are left to the default
(tests/test_kernel_ops.py): the simulator runs a Python thread per CUDA thread."""

import zlib

import numpy as np
import pytest

from eggnog.kernels.core.cuda_api import SIMULATED, cuda
from eggnog.kernels.core.placement import to_host
from eggnog.kernels.core.registry import all_ops
from eggnog.kernels.core.tuning import TUNABLES
from eggnog.kernels.layers import matmul_tf32
from eggnog.kernels.rnn import scan
from eggnog.kernels.rnn.scan_layout import plan

MAX_THREADS = 4096
OPS = all_ops()


def cases(name):
    entry = OPS[name]
    return entry, list(entry.cases(np.random.default_rng(zlib.crc32(entry.name.encode()))))


def agree(entry, got, ref, where):
    rtol, atol = entry.tolerance
    for k, (g, r) in enumerate(zip(got, ref)):
        g = np.asarray(to_host(g), np.float64)
        assert g.shape == np.shape(r), f"{where} output {k}: shape {g.shape} != {np.shape(r)}"
        np.testing.assert_allclose(g, np.asarray(r, np.float64), rtol=rtol, atol=atol, err_msg=f"{where} output {k}")


def scan_threads(variant, shape):
    threads, groups, segments, _ = plan(*shape, int(variant.removeprefix("slots")))
    return threads * shape[0] * groups * segments


def test_the_tunable_kernels_offer_their_variants():
    assert SIMULATED, "tests run the CUDA kernels on the simulator"
    for kernel in ("scan_forward", "scan_backward", "matmul_tf32"):
        tunable = TUNABLES[kernel]
        assert len(tunable.variants) > 1 and tunable.default in tunable.variants
        assert tunable.choose((2, 130, 3)) == tunable.default  # nothing tuned on the simulator


@pytest.mark.parametrize("variant", scan.VARIANTS)
def test_scan_forward_variants_match_the_reference(variant):
    entry, forward_cases = cases("scan_forward")
    ran = 0
    for i, args in enumerate(forward_cases):
        if scan_threads(variant, args[0].shape) > MAX_THREADS:
            continue
        got = scan.scan_forward_variant(variant, *(cuda.to_device(a) for a in args))
        agree(entry, [got], [scan.reference_scan_forward(*args)], f"scan_forward {variant} case {i}")
        ran += 1
    assert ran >= 4, f"{variant}: only {ran} cases fit the simulator"


@pytest.mark.parametrize("variant", scan.VARIANTS)
def test_scan_backward_variants_match_the_reference(variant):
    entry, backward_cases = cases("scan_backward")
    ran = 0
    for i, args in enumerate(backward_cases):
        if scan_threads(variant, args[1].shape) > MAX_THREADS:
            continue
        got = scan.scan_backward_variant(variant, *(cuda.to_device(a) for a in args))
        agree(entry, got, scan.reference_scan_backward(*args), f"scan_backward {variant} case {i}")
        ran += 1
    assert ran >= 4, f"{variant}: only {ran} cases fit the simulator"


@pytest.mark.parametrize("variant", [v for v in matmul_tf32.VARIANTS if v != matmul_tf32.DEFAULT])
def test_matmul_tf32_variants_match_the_reference(variant):
    """The default is tests/test_kernel_ops.py's (the op's own launcher)."""
    entry, forward_cases = cases("matmul_tf32")
    for i, (x, w) in enumerate(forward_cases):
        got = matmul_tf32.matmul_tf32_variant(variant, cuda.to_device(x), cuda.to_device(w))
        agree(entry, [got], [matmul_tf32.reference_matmul_tf32(x, w)], f"matmul_tf32 {variant} case {i}")
