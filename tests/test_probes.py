"""The GPU probes (bench/probes) on numba's simulator at tiny sizes: each runs, its kernel computes what its
check expects (a wrong value stops it), its timing is converted into the unit of the constant it names and
marked simulated; the command refuses the simulator without --dry-test and writes nothing then; every probe
kernel compiles to PTX without a GPU, with the instructions it exists to time (the package's PTX check
imports only kernels/, so it never sees these)."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from bench.probes import catalog
from bench.probes.device import Device, WrongResult, require_equal, wrap32
from tests.helpers import ROOT

SIMULATOR = Device("CUDA simulator", 1, 1.0e9, (9, 0), True)
PREFIX = "bench.probes."
_SPECS = []  # the probe kernels' registrations, kept across this module's setups


@pytest.fixture(scope="module")
def probe_modules():
    """The probe modules, imported (registering their kernels in cuda_api's lists); afterwards the probe
    kernels leave those lists again: other tests hold them to the package's own kernels."""
    from eggnog.kernels.core import cuda_api

    modules = {p.name: p.module() for p in catalog.PROBES}
    _SPECS.extend(s for s in cuda_api.KERNELS if s.name.startswith(PREFIX) and s not in _SPECS)
    cuda_api.KERNELS.extend(s for s in _SPECS if s not in cuda_api.KERNELS)
    yield modules
    cuda_api.KERNELS[:] = [s for s in cuda_api.KERNELS if not s.name.startswith(PREFIX)]
    for name in [n for n in cuda_api.LAUNCHES if n.startswith(PREFIX)]:
        del cuda_api.LAUNCHES[name]


@pytest.mark.parametrize("name", [p.name for p in catalog.PROBES])
def test_each_probe_runs_checked_and_converted_on_the_simulator(probe_modules, name):
    rows = probe_modules[name].run(SIMULATOR, quick=False)
    listed = catalog.BY_NAME[name].rows
    assert [r["probe"] for r in rows] == [r.name for r in listed]
    for got, spec in zip(rows, listed):
        assert (got["unit"], got["constant"]) == (spec.unit, spec.constant)
        assert got["simulated"] is True
        assert math.isfinite(got["value"]), got  # simulated timings: any sign (grid_sync's is a difference)
        assert got["kernel_s"] > 0 and got["seconds"] >= 0 and got["basis"]


def test_probe_kernels_launch_with_the_signatures_the_ptx_check_compiles(probe_modules):
    from eggnog.kernels.core.cuda_api import KERNELS, LAUNCHES

    registered = {s.name: set(s.signatures) for s in KERNELS if s.name.startswith(PREFIX)}
    assert len(registered) == len(catalog.PROBES)
    for module in probe_modules.values():
        module.run(SIMULATOR, quick=True)
    assert {n: LAUNCHES.get(n) for n in registered} == registered


def test_a_wrong_value_stops_a_probe():
    require_equal("p", np.arange(4), np.arange(4))
    with pytest.raises(WrongResult, match="probe p: its kernel computed 1 wrong values of 4"):
        require_equal("p", np.array([0, 1, 5, 3]), np.arange(4))
    with pytest.raises(WrongResult):
        require_equal("p", np.arange(3), np.arange(4))
    assert wrap32([2**31, -(2**31) - 1, 5]).tolist() == [-(2**31), 2**31 - 1, 5]


def fixed_time(monkeypatch, module, seconds):
    """The module's timed launches run once and take `seconds` (a function of the call's index)."""
    calls = []

    def timed(device, launch, quick):
        launch()
        calls.append(None)
        return seconds(len(calls) - 1)

    monkeypatch.setattr(module, "kernel_seconds", timed)


def test_dp4a_rate_counts_warp_instructions_per_clock_per_sm(probe_modules, monkeypatch):
    module = probe_modules["dp4a_rate"]
    fixed_time(monkeypatch, module, lambda i: 2e-3)
    device = Device("sim", 4, 2.0e9, (9, 0), True)
    (found,) = module.run(device, quick=False)
    warp_dp4a = 64 / 32 * module.SIMULATED_STEPS * module.CHAINS  # one block of 64 threads on the simulator
    assert found["value"] == pytest.approx(warp_dp4a / (2e-3 * 2.0e9) / 4, rel=1e-3)


def test_l2_pattern_counts_every_lane_and_each_block_once(probe_modules, monkeypatch):
    module = probe_modules["l2_pattern"]
    fixed_time(monkeypatch, module, lambda i: 1e-3)
    requested, unique = module.run(SIMULATOR, quick=False)
    weights = sum(d_in * d_out for _, d_in, d_out in module.matrices(*module.SIMULATED_MODEL))
    assert unique["value"] == pytest.approx(2 * module.SIMULATED_PASSES * weights / 1e-3, rel=1e-3)
    assert requested["value"] == pytest.approx(2 * unique["value"], rel=1e-3)


def test_grid_sync_cost_is_the_slope_over_steps(probe_modules, monkeypatch):
    module = probe_modules["grid_sync"]
    steps = (0, *module.SIMULATED_STEPS)
    fixed_time(monkeypatch, module, lambda i: 1e-4 + 3e-6 * steps[i])
    per_sync, launch = module.run(SIMULATOR, quick=False)
    assert per_sync["value"] == pytest.approx(3e-6, rel=1e-3)
    assert launch["value"] == pytest.approx(1e-4, rel=1e-3)


def test_lstm_loop_issue_rate_and_its_shape(probe_modules, monkeypatch):
    from eggnog.kernels.rnn import lstm_sequence_cuda as lstm

    module = probe_modules["lstm_loop"]
    assert module.ROWS == lstm.ROWS, "the probe's loop is written for the persistent kernel's default rows"
    units = lstm.plan(module.HEADS, module.SIZE, 1024, 11, coresident=132)[0]
    r, h = np.zeros((units, 152, 4), np.float32), np.zeros((module.ROWS * (lstm.MAX_THREADS // units), 152))
    assert 4 * module.staged_words(r, h).size == lstm.persistent_bytes(module.SIZE, units)
    fixed_time(monkeypatch, module, lambda i: 1e-3)
    (found,) = module.run(SIMULATOR, quick=False)
    warps = -(-module.SIMULATED_UNITS * module.SIMULATED_LANES // 32)
    issued = warps * module.SIMULATED_REPS * module.SIMULATED_SIZE // 4 * module.SOURCE_INSTRUCTIONS
    assert found["value"] == pytest.approx(issued / 1e6, rel=1e-3)


def test_only_names_probes():
    assert [p.name for p in catalog.chosen("grid_sync, dp4a_rate")] == ["dp4a_rate", "grid_sync"]
    assert catalog.chosen("") == list(catalog.PROBES)
    with pytest.raises(Exception, match="--only names no probe called nope"):
        catalog.chosen("dp4a_rate,nope")


def test_list_names_every_row_and_its_constant():
    from bench.probes.__main__ import listing

    listed = {(r["probe"], r["row"], r["constant"]) for r in listing()}
    assert listed == {(p.name, r.name, r.constant or "-") for p in catalog.PROBES for r in p.rows}
    assert {"l2_bytes_per_s", "dp4a_per_clock_per_sm", "imma_per_clock_per_sm", "grid_sync_s", "ring_wait_cycles",
            "lstm_loop_ipc"} <= {c for *_, c in listed}


def probes_command(tmp_path, *args):
    """`python -m bench.probes ARGS` on the simulator in a fresh interpreter, results under tmp_path/results."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", EGGNOG_BENCH_RESULTS=str(tmp_path / "results"),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "bench.probes", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)


def test_the_command_refuses_the_simulator_without_dry_test(tmp_path):
    done = probes_command(tmp_path, "--only", "dp4a_rate")
    assert done.returncode == 2 and "--dry-test" in done.stderr, done.stderr
    assert not (tmp_path / "results").exists()


def test_the_dry_test_writes_simulated_rows(tmp_path):
    done = probes_command(tmp_path, "--dry-test", "--only", "dp4a_rate,grid_sync")
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = (tmp_path / "results").glob("probes-*.json")
    record = json.loads(path.read_text())
    assert record["benchmark"] == "probes" and record["simulated"] is True and "sim" in record["device"].lower()
    assert [r["probe"] for r in record["rows"]] == ["dp4a_issue", "grid_sync", "cooperative_launch"]
    assert all(r["simulated"] is True and set(r) >= {"probe", "value", "unit", "constant", "seconds"}
               for r in record["rows"])


def test_every_probe_kernel_compiles_to_ptx_without_a_gpu():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-m", "bench.probes.ptx"], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600)
    if done.returncode and any(m in done.stderr for m in ("DynamicLibNotFoundError", "libnvrtc", "libnvvm",
                                                          "NvvmSupportError")):
        pytest.skip("numba-cuda's compilers are not installed")
    assert done.returncode == 0, done.stderr[-4000:]
    *kernels, loop = [json.loads(line) for line in done.stdout.splitlines()]
    found = {k["name"].split(".")[2]: k for k in kernels}
    assert set(found) == {p.name for p in catalog.PROBES}
    assert all(k["f64_instructions"] == 0 for k in kernels)
    assert found["dp4a_rate"]["dp4a_instructions"] >= 8
    assert found["imma_rate"]["mma_instructions"] >= 4 and found["imma_rate"]["tensor_cores"]
    assert found["l2_pattern"]["v4_global_loads"] >= 4 and found["wide_loads"]["v4_global_loads"] >= 4
    assert found["copy_ring"]["async_copies"] > 0 and found["grid_sync"]["grid_syncs"] > 0
    assert loop["lstm_loop_instructions_a_trip"] >= 16 * 6 + 10
