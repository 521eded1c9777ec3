"""Normal noise rows of many members in one launch: the CPU twin equals per-member
`rng.generate(..., backend="cpu")` bit for bit; twin and simulator agree with the float64
reference within rng's stated tolerance (4 eps max(|z|, 1)); bad members and slices are refused."""

import numpy as np
import pytest

from eggnog.kernels import noise_rows, rng
from eggnog.kernels.backend import to_host
from eggnog.kernels.noise_math import prefix_key, stream_key

TOLERANCE = 4 * np.finfo(np.float32).eps


@pytest.mark.parametrize("members,start,count", [([0, 1, 2, 3], 0, 37), ([9, 2**32 - 1, 4], 2**32 - 20, 20),
                                                 ([5], 100, 1), ([], 0, 5)])
def test_rows_match_per_member_streams(members, start, count):
    prefix = prefix_key(11, 4, 2)
    members = np.array(members, np.int64)
    ref = noise_rows.reference_normal_rows(prefix, members, start, count)
    cpu = noise_rows.cpu_normal_rows(prefix, members, start, count)
    sim = to_host(noise_rows.cuda_normal_rows(prefix, members, start, count))
    assert cpu.shape == sim.shape == (members.size, count)
    for row, member in enumerate(members):
        one = rng.generate("normal_float32", stream_key(11, 4, 2, int(member)), start, count, backend="cpu")
        assert np.array_equal(cpu[row], one)
    bound = TOLERANCE * np.maximum(np.abs(ref), 1.0)
    assert np.all(np.abs(cpu - ref) <= bound) and np.all(np.abs(sim - ref) <= bound)


def test_members_get_independent_rows():
    rows = noise_rows.cpu_normal_rows(prefix_key(1, 1, 0), np.arange(64), 0, 512)
    correlation = np.corrcoef(rows)[np.triu_indices(64, 1)]
    assert np.abs(correlation).max() < 0.25 and abs(rows.mean()) < 0.02 and abs(rows.std() - 1) < 0.02


def test_bad_members_and_slices_are_refused():
    with pytest.raises(ValueError, match="members"):
        noise_rows.cpu_normal_rows(prefix_key(1, 1, 0), np.array([-1]), 0, 4)
    with pytest.raises(ValueError):
        noise_rows.cpu_normal_rows(prefix_key(1, 1, 0), np.array([0]), 2**32 - 2, 4)
