"""Test-wide setup. CUDA kernels run on numba's simulator, except when every path pytest was asked to
run lies under tests/gpu: then on the real GPU, so `python -m pytest tests/gpu` on a GPU node needs no
variable. An explicit NUMBA_ENABLE_CUDASIM always wins. The choice is made in pytest_configure, before
any test module imports numba (which reads the variable once, at import); pytest-xdist workers inherit
it from the controller's environment, so they agree."""

import os

os.environ.setdefault("EGGNOG_PROGRESS", "0")

import pytest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPU_TESTS = os.path.join(ROOT, "tests", "gpu")

# tests/mpi runs only when named, under mpiexec (`mpiexec -n 4 python -m pytest tests/mpi`): in a
# serial run its rank-count comparisons would all compare one process with itself.
collect_ignore = ["mpi"]

# The files that take longest (the compile of every kernel, simulator runs of minutes) go first: pytest-xdist
# hands whole files out in collection order, and one of them started last would leave the other worker idle.
LONGEST_FIRST = ("test_kernel_ops.py", "test_sass_report.py", "test_kernel_variants_layers.py",
                 "test_device_resident.py", "test_kernel_variants_bf16.py", "test_mingru_training.py",
                 "test_scan.py", "test_mingru_model.py", "test_eggroll_evaluate.py")


def simulator_default(args, invocation_dir):
    """'0' (the real GPU) when every path in `args` (pytest's, node ids allowed) is under tests/gpu, else '1'."""
    paths = [os.path.abspath(os.path.join(invocation_dir, str(a).split("::")[0])) for a in args]
    under_gpu = [p == GPU_TESTS or p.startswith(GPU_TESTS + os.sep) for p in paths]
    return "0" if under_gpu and all(under_gpu) else "1"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", simulator_default(config.args, config.invocation_params.dir))
    if os.environ["NUMBA_ENABLE_CUDASIM"] == "1":
        from tests.simulator_threads import install

        install()


def pytest_collection_modifyitems(items):
    first = {name: rank for rank, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: first.get(item.path.name, len(first)))  # stable: a file keeps its order


@pytest.fixture
def repo_root():
    return ROOT
