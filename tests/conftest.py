"""Test-wide setup. CUDA kernels run on numba's simulator unless a run says otherwise
(NUMBA_ENABLE_CUDASIM=0 for tests/gpu on a real GPU); this must happen before numba is imported."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
os.environ.setdefault("EGGNOG_PROGRESS", "0")

import pytest  # noqa: E402

if os.environ["NUMBA_ENABLE_CUDASIM"] == "1":
    from tests.simulator_threads import install

    install()

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# tests/mpi runs only when named, under mpiexec (`mpiexec -n 4 python -m pytest tests/mpi`): in a
# serial run its rank-count comparisons would all compare one process with itself.
collect_ignore = ["mpi"]


@pytest.fixture
def repo_root():
    return ROOT
