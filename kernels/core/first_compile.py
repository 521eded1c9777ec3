"""The line a program prints before its kernels compile for the first time, so a first run is not a
silent minute. numba compiles each kernel on its first call and keeps it in the compile cache
(core/compile_cache.py), whose folder changes with every source version: a job (a training script's
model, generation, evaluation) that has no record in that folder is about to compile.

The line says how long that takes, from a measured figure: this machine's own last first compile of
the job (kept beside the versioned folders, so a new version still finds it), else the figure
bench/main_job/compile_cache.py measured on a 2-core x86 machine. After the job's first step the
seconds are recorded in both places. A record that cannot be read counts as absent: it is a hint, and
a run must not fail on it."""

import json
import math
import os
import time

from eggnog.kernels.core.compile_cache import compile_cache_folder

RECORD = "first_compile.json"  # {job: seconds from the notice to the end of the job's first step}
# bench/main_job/compile_cache.py on a 2-core x86 machine (bench/results/compile_cache-cpu-*.json, `notice_s`)
MEASURED_S = {"EsRunConfig": 10, "TransformerEsRunConfig": 15, "FloatEsRunConfig": 6, "BpttRunConfig": 7,
              "RgeRunConfig": 5, "generate egg": 6, "evaluate egg": 8}
MEASURED_ON = "a 2-core x86 machine"

_pending = None  # (job, started) of the notice this process printed


def read_record(path):
    """{job: seconds} of a record file; {} where it is missing or not such a mapping."""
    try:
        with open(path) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return {}
    if not isinstance(record, dict):
        return {}
    return {k: float(v) for k, v in record.items()
            if isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(v) and v >= 0}


def record_paths():
    """(this version's record, this machine's record across versions)."""
    folder = compile_cache_folder()
    return os.path.join(folder, RECORD), os.path.join(os.path.dirname(folder), RECORD)


def expected_seconds(job):
    """(seconds, where the figure comes from) of a first compile of `job`."""
    machine = read_record(record_paths()[1])
    if job in machine:
        return machine[job], "this machine's last first compile"
    return MEASURED_S.get(job, max(MEASURED_S.values())), f"measured on {MEASURED_ON}"


def compile_notice(job):
    """The line to print before `job` first calls its kernels, or None where this version compiled them
    already. Starts the clock `first_step_done` reads."""
    global _pending
    if job in read_record(record_paths()[0]):
        return None
    _pending = (job, time.perf_counter())
    seconds, source = expected_seconds(job)
    return (f"compiling the kernels for this machine, once for this version: about {seconds:.0f} s ({source}); "
            f"later runs load them from {compile_cache_folder()}")


def first_step_done():
    """Record the seconds since the notice (nothing where none was printed); later calls do nothing."""
    global _pending
    if _pending is None:
        return
    job, started = _pending
    _pending = None
    seconds = round(time.perf_counter() - started, 1)
    for path in record_paths():
        record = read_record(path)
        record[job] = seconds
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            temporary = f"{path}.{os.getpid()}.tmp"
            with open(temporary, "w") as f:
                json.dump(record, f)
            os.replace(temporary, path)
        except OSError:
            pass  # a read-only cache only loses the hint
