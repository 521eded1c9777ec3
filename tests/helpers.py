"""Helpers shared by tests: run a bin/ script or a benchmark as a user would; fp32 kernel inputs and outputs."""

import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_script(script, *args, env=None, cwd=None, timeout=300):
    """Run bin/<script> in a fresh interpreter; returns the CompletedProcess (text mode). CUDA kernels
    are compiled for real there (no simulator) unless `env` says otherwise, so `auto` means the CPU
    on a machine without a GPU."""
    full_env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                    NUMBA_ENABLE_CUDASIM="0")
    full_env.update(env or {})
    return subprocess.run([sys.executable, os.path.join(ROOT, "bin", script), *map(str, args)],
                          capture_output=True, text=True, env=full_env, cwd=cwd, timeout=timeout)


def run_bench(module, tmp_path, *args, env=None, timeout=600):
    """Run `python -m bench.<module>` from the repository root, its results written to tmp_path/results."""
    full_env = dict(os.environ, EGGNOG_BENCH_RESULTS=str(tmp_path / "results"), NUMBA_ENABLE_CUDASIM="0",
                    PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {}))
    return subprocess.run([sys.executable, "-m", f"bench.{module}", *map(str, args)], capture_output=True,
                          text=True, env=full_env, cwd=ROOT, timeout=timeout)


def assert_user_error(result, *fragments):
    """Exit status 2, one line on stderr naming the problem, no traceback."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def f32(rng, *shape, scale=1.0):
    """A float32 array of normal values."""
    return (rng.normal(size=shape) * scale).astype(np.float32)


def host32(got):
    """A kernel result on the host, checked to be float32."""
    from eggnog.kernels.core.placement import to_host

    got = np.asarray(to_host(got))
    assert got.dtype == np.float32
    return got


def close_scaled(got, ref, mag, rtol):
    """fp32 result within rtol of `mag` (the computation on absolute values) element by element."""
    got = host32(got).astype(np.float64)
    assert got.shape == ref.shape
    err = np.abs(got - ref)
    assert np.all(err <= rtol * mag), (err / np.maximum(mag, 1e-300)).max()


def lstm_inputs(rng, steps, batch, heads, size, table_rows, r_scale=0.6):
    """(table, rows, R, bias, states0) of a random multi-head LSTM sequence, float32 (rows int32)."""
    hidden = heads * size
    return (f32(rng, table_rows, 4 * hidden, scale=1.5), rng.integers(0, table_rows, (steps, batch)).astype(np.int32),
            f32(rng, 4, heads, size, size, scale=r_scale), f32(rng, 4 * hidden, scale=0.3), f32(rng, 2, hidden))
