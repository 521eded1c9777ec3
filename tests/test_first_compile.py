"""A first run says that its kernels are compiling and about how long that takes, before the silence;
its progress bar's rate and ETA leave the compile out; a run on a warm cache says nothing of it."""

import io
import json
import os
import shutil

import pytest
from tqdm import tqdm

from eggnog.kernels.core import first_compile
from eggnog.kernels.core.compile_cache import compile_cache_folder
from eggnog.runtime.progress import forget_rate
from tests.helpers import ROOT, run_script


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(first_compile, "_pending", None)
    return tmp_path / "cache"


def test_a_job_compiles_once_a_version_and_the_line_says_so_only_then(cache):
    line = first_compile.compile_notice("EsRunConfig")
    assert line.startswith("compiling the kernels for this machine") and compile_cache_folder() in line
    assert f"about {first_compile.MEASURED_S['EsRunConfig']} s (measured on a 2-core" in line
    first_compile.first_step_done()
    assert first_compile.compile_notice("EsRunConfig") is None
    assert first_compile.compile_notice("BpttRunConfig") is not None  # another job compiles its own kernels


def test_the_estimate_is_this_machines_last_first_compile_across_versions(cache):
    first_compile.compile_notice("EsRunConfig")
    first_compile.first_step_done()
    version, machine = first_compile.record_paths()
    os.remove(version)  # as after a source edit: a new versioned folder without the record
    json.dump({"EsRunConfig": 123.4}, open(machine, "w"))
    assert "about 123 s (this machine's last first compile)" in first_compile.compile_notice("EsRunConfig")


@pytest.mark.parametrize("text", ["", "[1, 2]", '{"EsRunConfig": "fast"}', '{"EsRunConfig": -3}', "{bad json"])
def test_a_record_that_cannot_be_read_counts_as_absent(cache, text):
    os.makedirs(compile_cache_folder(), exist_ok=True)
    for path in first_compile.record_paths():
        open(path, "w").write(text)
    assert "measured on a 2-core" in first_compile.compile_notice("EsRunConfig")
    first_compile.first_step_done()  # replaces the unreadable record
    assert first_compile.compile_notice("EsRunConfig") is None


def test_only_the_process_that_printed_the_line_records_a_time(cache):
    first_compile.first_step_done()
    assert not any(os.path.exists(p) for p in first_compile.record_paths())


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_the_rate_and_eta_leave_the_compiling_step_out():
    clock = Clock()
    bar = tqdm(total=1000, file=io.StringIO(), mininterval=0.5, smoothing=0.1)
    bar._time = clock
    bar.reset()  # start the bar on the fake clock
    clock.now += 50.0  # the first step compiles for 50 s
    forget_rate(bar)
    bar.update(1)
    for _ in range(20):  # then steps of 0.1 s
        clock.now += 0.1
        bar.update(1)
    rate = bar.format_dict["rate"] or (bar.n - bar.initial) / (clock.now - bar.start_t)
    assert bar.n == 21 and rate == pytest.approx(10.0, rel=0.05)


def warm_copy(tmp_path):
    """A NUMBA_CACHE_DIR holding this checkout's compiled kernels but no first-compile record."""
    parent = tmp_path / "cache"
    if os.path.isdir(compile_cache_folder()):
        shutil.copytree(compile_cache_folder(), parent / os.path.basename(compile_cache_folder()),
                        ignore=shutil.ignore_patterns(first_compile.RECORD))
    return parent


def test_the_first_run_prints_the_line_first_and_a_second_run_does_not(tmp_path):
    env = {"NUMBA_CACHE_DIR": str(warm_copy(tmp_path)), "EGGNOG_PROGRESS": "0"}
    flags = ("--steps", "2", "--population", "8", "--group-size", "2", "--tokens-per-update", "4", "--val-rows", "2",
             "--no-plots")
    first = run_script("train_es.py", *flags, "--run-dir", tmp_path / "a", env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[0].startswith("compiling the kernels for this machine")
    second = run_script("train_es.py", *flags, "--run-dir", tmp_path / "b", env=env)
    assert second.returncode == 0 and "compiling the kernels" not in second.stdout


def test_the_quoted_figures_are_the_newest_measured_ones():
    import glob

    from bench.main_job.compile_cache import READERS, RUNS

    newest = max(glob.glob(f"{ROOT}/bench/results/compile_cache-cpu-*.json"))
    rows = {row["run"]: row for row in json.load(open(newest))["rows"]}
    jobs = {name: job for name, (_, job) in {**RUNS, **READERS}.items()}
    assert set(jobs.values()) == set(first_compile.MEASURED_S)
    assert {job: round(rows[name]["notice_s"]) for name, job in jobs.items()} == first_compile.MEASURED_S
