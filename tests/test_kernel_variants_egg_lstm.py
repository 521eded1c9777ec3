"""Launch variants of the persistent LSTM (rows a thread): each variant, chosen through the tuning file
as a tuned GPU would choose it, launches its own kernel and agrees with the NumPy reference within the
op's tolerance on the op's cases that take the persistent path; every variant is registered for the PTX
check under its own name, and its Tunable runs on the simulator's small sizes."""

import numpy as np
import pytest

from eggnog.kernels.core.cuda_api import KERNELS, SIMULATED, cuda
from eggnog.kernels.rnn import lstm, lstm_sequence_cuda
from tests.variant_helpers import Spy, own_tuning_file

pytestmark = pytest.mark.skipif(not SIMULATED, reason="variants are compared on the CUDA simulator")
LSTM = lstm_sequence_cuda.PERSISTENT_TUNABLE


@pytest.fixture
def tuned(tmp_path, monkeypatch):
    """record(kernel, problem, variant) into a tuning file of this test's own, which launches then read."""
    return own_tuning_file(tmp_path, monkeypatch)


def _persistent_cases(monkeypatch):
    """The lstm_forward op's cases whose plan on this device is the persistent kernel (one row of one
    lane), then a head of 10 units made persistent by a 16-byte budget: 51 lanes, and a batch of 300 that
    fills every row of each lane for every variant (4 rows: a group of 204, then one of 96)."""
    from tests.test_kernel_ops import OPS, cases_of

    cases = [c for c in cases_of(OPS["lstm_forward"])
             if lstm_sequence_cuda.plan(c[2].shape[1], c[2].shape[2], c[1].shape[1], c[1].shape[0])[2]
             == "persistent"]
    monkeypatch.setattr(lstm_sequence_cuda, "SHARED_BUDGET", 16)
    rng = np.random.default_rng(61)
    steps, batch, size = 2, 300, 10
    r = (rng.normal(0, 0.3, (4, 1, size, size))).astype(np.float32)
    cases.append((rng.normal(0, 1, (7, 4 * size)).astype(np.float32),
                  rng.integers(0, 7, (steps, batch)).astype(np.int32), r,
                  rng.normal(0, 0.1, 4 * size).astype(np.float32), rng.normal(0, 1, (2, size)).astype(np.float32),
                  True))
    return cases


@pytest.mark.parametrize("variant", LSTM.variants)
def test_every_persistent_lstm_variant_matches_the_reference(variant, tuned, monkeypatch):
    seen = []
    for rows, compiled in list(lstm_sequence_cuda.PERSISTENT.items()):
        name = lstm_sequence_cuda.persistent_name(rows)
        monkeypatch.setitem(lstm_sequence_cuda.PERSISTENT, rows, Spy(name, compiled, seen))
    cases = _persistent_cases(monkeypatch)
    assert cases, "no case of lstm_forward takes the persistent kernel"
    for table, rows, r, bias, states0, keep in cases:
        tuned(LSTM.kernel, LSTM.problem((r.shape[1], r.shape[2], rows.shape[1])), variant)
        want = lstm.reference_lstm_forward(table, rows, r, bias, states0, keep)
        got = lstm.cuda_lstm_forward(*(cuda.to_device(a) for a in (table, rows, r, bias, states0)), keep)
        for g, w in zip(got, want):
            if w is not None:
                np.testing.assert_allclose(g.copy_to_host(), w, *lstm.TOLERANCE)
    per_thread = int(variant.removeprefix("rows"))
    assert seen == [lstm_sequence_cuda.persistent_name(per_thread)] * len(cases)


def test_the_default_is_six_rows_and_each_variant_is_registered_for_the_ptx_check():
    assert LSTM.default == "rows6" == lstm_sequence_cuda.rows_variant(lstm_sequence_cuda.ROWS)
    names = {spec.name: spec for spec in KERNELS}
    for rows in lstm_sequence_cuda.ROW_VARIANTS:
        spec = names[f"{lstm_sequence_cuda.__name__}.{lstm_sequence_cuda.persistent_name(rows)}"]
        assert spec.launch_bounds == lstm_sequence_cuda.MAX_THREADS and len(spec.signatures) == 1
    assert "eggnog.kernels.rnn.lstm_sequence_cuda.forward_persistent_cuda" in names  # the report's name


def test_rows_a_thread_size_the_staged_rows():
    """Fewer rows a thread stage fewer rows of h: the plan's shared memory follows the variant."""
    size, units = 150, 75
    lanes = lstm_sequence_cuda.row_lanes(units)
    r_bytes = 16 * units * (152 | 1)
    for rows in lstm_sequence_cuda.ROW_VARIANTS:
        assert lstm_sequence_cuda.persistent_bytes(size, units, rows) == r_bytes + 4 * rows * lanes * 152
    assert lstm_sequence_cuda.plan(64, size, 1024, 11, coresident=132, rows=4)[::2] == (75, "persistent")


@pytest.mark.parametrize("variant", LSTM.variants)
def test_the_tuner_can_launch_every_variant_at_the_small_size(variant):
    for sizes in LSTM.small:
        LSTM.run(variant, sizes)()
    assert LSTM.problems and all(len(sizes) == 3 for _, sizes in LSTM.problems)
