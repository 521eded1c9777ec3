"""Normal noise rows of many members in one launch: the CPU twin equals per-member
`streams.generate(..., backend="cpu")` bit for bit; rows are independent; bad members and slices are
refused. (Reference = twin = simulator is tests/test_kernel_ops.py's.)"""

import numpy as np
import pytest

from eggnog.kernels.core.cuda_api import cuda
from eggnog.kernels.noise import normal_rows, streams
from eggnog.kernels.noise.scalar_math import prefix_key, stream_key


@pytest.mark.parametrize("members,start,count", [([0, 1, 2, 3], 0, 37), ([9, 2**32 - 1, 4], 2**32 - 20, 20)])
def test_rows_are_the_per_member_streams(members, start, count):
    prefix = prefix_key(11, 4, 2)
    rows = normal_rows.cpu_normal_rows(prefix, np.array(members, np.int64), start, count)
    assert rows.shape == (len(members), count)
    for row, member in enumerate(members):
        one = streams.generate("normal_float32", stream_key(11, 4, 2, member), start, count, backend="cpu")
        assert np.array_equal(rows[row], one)


def test_members_get_independent_rows():
    rows = normal_rows.cpu_normal_rows(prefix_key(1, 1, 0), np.arange(64), 0, 512)
    correlation = np.corrcoef(rows)[np.triu_indices(64, 1)]
    assert np.abs(correlation).max() < 0.25 and abs(rows.mean()) < 0.02 and abs(rows.std() - 1) < 0.02


def test_bad_members_and_slices_are_refused():
    with pytest.raises(ValueError, match="members"):
        normal_rows.cpu_normal_rows(prefix_key(1, 1, 0), np.array([-1]), 0, 4)
    with pytest.raises(ValueError):
        normal_rows.cpu_normal_rows(prefix_key(1, 1, 0), np.array([0]), 2**32 - 2, 4)
    with pytest.raises(ValueError, match="int64"):
        normal_rows.cuda_normal_rows(prefix_key(1, 1, 0), cuda.to_device(np.array([0], np.int32)), 0, 4)
