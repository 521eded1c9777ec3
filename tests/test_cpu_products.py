"""The CPU twins' products split over the cores equal one BLAS call's result (fp32 accumulation order
aside), for the layouts the twins pass: plain, transposed views, shapes that do not divide evenly."""

import os
import subprocess
import sys

import numpy as np
import pytest

from eggnog.kernels.core import cpu_products
from eggnog.kernels.core.cpu_products import SPLIT_MACS, batched_product, product


@pytest.fixture
def split_in_three(monkeypatch):
    monkeypatch.setattr(cpu_products, "_parts", 3)


@pytest.mark.parametrize("rows, inner, cols", [(1001, 129, 67), (7, 3000, 900), (5, 4, 3)])
@pytest.mark.parametrize("transpose_a, transpose_b", [(False, False), (False, True), (True, False)])
def test_split_product_equals_the_float64_product(split_in_three, rows, inner, cols, transpose_a, transpose_b):
    rng = np.random.default_rng(rows + cols)
    a = rng.normal(size=(inner, rows) if transpose_a else (rows, inner)).astype(np.float32)
    b = rng.normal(size=(cols, inner) if transpose_b else (inner, cols)).astype(np.float32)
    a, b = (a.T if transpose_a else a), (b.T if transpose_b else b)
    got = product(a, b)
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert got.dtype == np.float32 and got.flags.c_contiguous and got.shape == (rows, cols)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.sqrt(inner))


@pytest.mark.parametrize("batch", [1, 2, 7])
def test_split_batched_product_equals_the_float64_product(split_in_three, batch):
    rng = np.random.default_rng(batch)
    a = rng.normal(size=(batch, 300, 70)).astype(np.float32)
    b = np.swapaxes(rng.normal(size=(batch, 90, 70)).astype(np.float32), 1, 2)
    got = batched_product(a, b)
    assert got.shape == (batch, 300, 90) and got.flags.c_contiguous
    np.testing.assert_allclose(got, np.matmul(a.astype(np.float64), b.astype(np.float64)), rtol=1e-5, atol=1e-4)


def test_every_block_of_a_split_product_is_written(split_in_three):
    a = np.ones((3 * 1024 + 2, 1024), np.float32)
    b = np.ones((1024, 2), np.float32)
    assert a.shape[0] * 1024 * 2 >= SPLIT_MACS
    assert np.all(product(a, b) == 1024.0)


@pytest.mark.parametrize("env, parts", [({}, None), ({"EGGNOG_BLAS_THREADS": "2"}, 1),
                                        ({"OPENBLAS_NUM_THREADS": "2"}, 1)])
def test_products_are_split_only_while_blas_is_on_one_thread(env, parts):
    clean = {k: v for k, v in os.environ.items()
             if k not in ("EGGNOG_BLAS_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                          "OMP_NUM_THREADS", "NUMBA_NUM_THREADS")}
    probe = "from eggnog.kernels.core.cpu_products import parts; print(parts())"
    out = subprocess.run([sys.executable, "-c", probe], env={**clean, **env, "NUMBA_NUM_THREADS": "2"},
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == (parts or 2)
