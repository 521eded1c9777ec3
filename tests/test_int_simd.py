"""The four-lane integer helpers (kernels/core/int_simd.py) and the 32-bit global loads and stores at a byte offset
(kernels/core/loads.py) on the simulator, against NumPy over words with every byte value, 0x80 included;
on a GPU the EGG epoch tests (tests/gpu) run them inside the fused kernel."""

import numpy as np
import pytest

from eggnog.kernels.core.cuda_api import SIMULATED, cuda
from eggnog.kernels.core.int_simd import abs_sum4, byte_of, dp4a, pack4, sar32
from eggnog.kernels.core.loads import load_global_s32, simulated_load_s32, simulated_store_s32, store_global_s32


@cuda.jit  # probes, not registered kernels: the registry's checks are about the package's own
def _words_probe(a, b, out):
    i = cuda.threadIdx.x
    out[8 * i] = abs_sum4(a[i], 7)
    out[8 * i + 1] = dp4a(a[i], b[i], 3)
    out[8 * i + 2] = pack4(byte_of(a[i], 0), byte_of(a[i], 1), byte_of(a[i], 2), byte_of(a[i], 3))
    out[8 * i + 3] = byte_of(a[i], 3)
    out[8 * i + 4] = sar32(a[i], i % 32)


@cuda.jit
def _words_at_probe(source, target):
    i = cuda.threadIdx.x
    store_global_s32(target, np.int64(4), np.int32(4 * i), load_global_s32(source, np.int64(0), np.int32(4 * i)))


def _signed_bytes(words):
    return words.view(np.int8).reshape(-1, 4).astype(np.int64)


def test_word_helpers_equal_numpy():
    assert SIMULATED
    rng = np.random.default_rng(5)
    a = rng.integers(-2**31, 2**31, 128, dtype=np.int64).astype(np.int32)
    b = rng.integers(-2**31, 2**31, 128, dtype=np.int64).astype(np.int32)
    a[:4] = [0, -1, 0x7F80017F, np.int32(-0x7F7F7F80)]  # all 0x80, 0xFF, 0x7F bytes appear
    out = np.zeros(8 * a.size, np.int32)
    _words_probe[1, a.size](a, b, out)
    got = out.reshape(-1, 8)
    x, y = _signed_bytes(a), _signed_bytes(b)
    np.testing.assert_array_equal(got[:, 0], np.abs(x).sum(axis=1) + 7)
    np.testing.assert_array_equal(got[:, 1], (x * y).sum(axis=1) + 3)
    np.testing.assert_array_equal(got[:, 2], a)
    np.testing.assert_array_equal(got[:, 3], x[:, 3])
    np.testing.assert_array_equal(got[:, 4], a.astype(np.int64) >> (np.arange(a.size) % 32))


def test_32_bit_loads_and_stores_move_four_bytes_at_a_byte_offset():
    source = np.arange(-128, 128, dtype=np.int64).astype(np.int8)  # every byte value, 0x80 and 0xFF included
    target = np.zeros(source.size + 4, np.int8)
    _words_at_probe[1, source.size // 4](source, target)
    np.testing.assert_array_equal(target[4:], source)
    np.testing.assert_array_equal(target[:4], 0)


def test_a_misaligned_32_bit_access_is_refused_as_on_the_gpu():
    bytes_ = np.zeros(8, np.int8)
    with pytest.raises(AssertionError, match="aligned"):
        simulated_load_s32(bytes_, np.int64(0), np.int32(2))
    with pytest.raises(AssertionError, match="aligned"):
        simulated_store_s32(bytes_, np.int64(1), np.int32(0), np.int32(7))
