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


# The files whose tests hold wall-clock deadlines (heartbeats, straggler timeouts, a child's start) go last:
# tests/run.sh runs this layer at idle priority beside the fault suites, whose clusters can take every core
# for seconds at a time; by the time these start, the fault suites have ended (tests/test_run_order.py).
DEADLINES_LAST = ("test_coordinator.py", "test_coordinator_tcp.py", "test_dynamics_deggs.py",
                  "test_gossip_hostile.py", "test_gossip_tcp.py", "test_gpu_run.py", "test_lr_search.py",
                  "test_run_lifecycle.py", "test_slurm_examples.py")


def run_order(name):
    """A file's place: the longest first, those with deadlines last, the rest between."""
    if name in LONGEST_FIRST:
        return LONGEST_FIRST.index(name)
    return len(LONGEST_FIRST) + 1 if name in DEADLINES_LAST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: run_order(item.path.name))  # stable: a file keeps its order


@pytest.fixture
def repo_root():
    return ROOT
