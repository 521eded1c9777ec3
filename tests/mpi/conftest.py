"""MPI tests run as `mpiexec -n 4 python -m pytest tests/mpi`; the serial run does not collect them.

Every test first checks that the world has the size it was launched with (EGGNOG_MPI_RANKS, 4 when
unset): an mpiexec from another MPI than mpi4py's starts four worlds of one rank each, in which every
comparison across rank counts would compare a run with itself and pass.

Each rank gets its own pytest temp directory; only rank 0 reports in full. Assertions that guard
a collective must be collective (`parallel_assert`), or one failing rank hangs the others.
"""

import os
import shutil
import tempfile

import pytest


def pytest_configure(config):
    from mpi4py import MPI

    rank, size = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    if size > 1 and not config.option.basetemp:
        config.option.basetemp = os.path.join(tempfile.gettempdir(), f"pytest-mpi-{os.getppid()}-rank{rank}")
    if rank != 0:
        config.option.verbose = -2


@pytest.fixture(scope="session")
def world():
    from eggnog.runtime.world import init_world

    return init_world()


RANKS_VAR = "EGGNOG_MPI_RANKS"


@pytest.fixture(scope="session", autouse=True)
def launched_size(world):
    """The world size every test needs, asserted on every rank before the test runs."""
    from eggnog.runtime.world import launcher_size

    expected = int(os.environ.get(RANKS_VAR, "4"))
    assert world.all_true(world.size == expected), (
        f"MPI world of {world.size} rank(s), expected {expected} ({RANKS_VAR}); the launcher started "
        f"{launcher_size()}: launch with the mpiexec of the MPI that mpi4py loads")
    return expected


@pytest.fixture
def parallel_assert(world):
    def check(condition, message=""):
        assert world.all_true(bool(condition)), message

    return check


@pytest.fixture
def shared_dir(world):
    """One temporary directory seen by every rank (they share a file system here)."""
    path = world.bcast_json(tempfile.mkdtemp(prefix="eggnog-mpi-") if world.is_root else None)
    yield path
    world.barrier()
    if world.is_root:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def across_rank_counts(world, shared_dir):
    """Run `train(group, run_dir) -> parameters` on sub-worlds of 1, 2 and 4 ranks (as many as
    there are); returns (every run's ranks held identical parameters, {size: parameters} on rank 0)."""
    import hashlib
    from pathlib import Path

    import numpy as np

    def run(name, train):
        results, identical = {}, True
        for size in (1, 2, 4):
            if size > world.size:
                continue
            group = world.first_ranks(size)
            if group is not None:
                run_dir = Path(shared_dir) / f"{name}-{size}"
                if group.is_root:
                    (run_dir / "checkpoints").mkdir(parents=True)
                group.barrier()
                params = np.ascontiguousarray(train(group, run_dir))
                digest = np.frombuffer(hashlib.sha256(params.tobytes()).digest(), np.uint8)
                digests = group.allgather_array(digest).reshape(size, -1)
                identical &= bool((digests == digests[0]).all())
                if group.is_root:
                    results[size] = params.copy()
            world.barrier(quiet=True)
        return identical, results

    return run
