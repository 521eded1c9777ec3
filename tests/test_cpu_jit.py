"""parallel_jit: small calls run the serial copy, large ones the parallel one, with the same results."""

import numba
import numpy as np

from eggnog.kernels.core.cpu_jit import SERIAL_BELOW, parallel_jit


@parallel_jit
def _row_sums(x, out):
    for i in numba.prange(x.shape[0]):
        acc = np.float32(0.0)
        for j in range(x.shape[1]):
            acc += x[i, j]
        out[i] = acc


def test_small_calls_run_serially_and_large_ones_in_parallel():
    rng = np.random.default_rng(0)
    small = rng.normal(size=(8, 16)).astype(np.float32)
    large = rng.normal(size=(SERIAL_BELOW // 16, 16)).astype(np.float32)
    out_small, out_large = np.empty(8, np.float32), np.empty(large.shape[0], np.float32)
    _row_sums(small, out_small)
    assert len(_row_sums.serial.signatures) == 1 and not _row_sums.parallel.signatures
    _row_sums(large, out_large)
    assert len(_row_sums.parallel.signatures) == 1
    check = np.empty_like(out_large)
    _row_sums.serial(large, check)
    assert np.array_equal(out_large, check)  # each row is one iteration: the same sums either way
    assert np.allclose(out_small, small.sum(axis=1), rtol=1e-5)


def test_the_wrapper_keeps_the_name_the_registry_reads():
    assert _row_sums.__name__ == "_row_sums" and _row_sums.__wrapped__.__name__ == "_row_sums"
