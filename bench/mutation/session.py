"""One module's mutation session with cosmic-ray: its mutants listed into a cosmic-ray work database
(`cosmic-ray init`), those outside the chosen operators and functions marked skipped (as cosmic-ray's
filters do), then each mutant applied to the copy's file, its tests run, and the file restored
(`cosmic-ray exec`'s local distributor, one mutant at a time)."""

import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from cosmic_ray.commands import init
from cosmic_ray.mutating import mutate_and_test
from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

from bench.mutation.targets import OPERATORS
from bench.mutation.verdicts import changed_lines

MODULE_LEVEL = "<module>"  # in Target.functions: code outside any function or class (constants, tags)
FAILED = re.compile(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", re.M)  # node ids may hold spaces
# plugins that cost seconds at every start and that these tests do not use
PYTEST_FLAGS = ("-q", "-x", "-p", "no:randomly", "-p", "no:hypothesispytest", "-p", "no:zarr", "-p", "no:anyio",
                "-p", "no:xdist", "-p", "no:xdist.looponfail", "-p", "no:platformdirs", "-p", "no:cacheprovider")


def test_command(tests):
    return [sys.executable, "-m", "bench.mutation.pinned_pytest", *PYTEST_FLAGS, *tests]


def baseline(copy, tests):
    """(exit status, seconds, output tail) of the unmutated tests in the copy."""
    start = time.perf_counter()
    out = subprocess.run(test_command(tests), cwd=copy, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    return out.returncode, seconds, out.stdout[-3000:] + out.stderr[-2000:]


def _selected(mutation, functions):
    if mutation.operator_name not in OPERATORS:
        return False
    if mutation.operator_name == "core/NumberReplacer" and mutation.occurrence % 2:
        return False  # each literal +1 only: its -1 twin rarely finds what +1 misses
    return not functions or (mutation.definition_name or MODULE_LEVEL) in functions


def list_mutants(copy, target, db_path):
    """Fill the work database at `db_path` with the target's mutants; returns how many are selected."""
    with use_db(str(db_path), WorkDB.Mode.create) as db:
        init(init_modules(copy, target), db, {})
        skipped = [item.job_id for item in db.work_items
                   if not all(_selected(m, target.functions) for m in item.mutations)]
        db.set_multiple_results(skipped, WorkResult(output="not selected", worker_outcome=WorkerOutcome.SKIPPED))
        return db.num_work_items - len(skipped)


def init_modules(copy, target):
    return [Path(target.path)] if Path(copy, target.path).is_file() else []


def run_mutants(db_path, tests, timeout, progress=print):
    """Apply, test and restore each pending mutant (the process's directory is the copy)."""
    command = shlex.join(test_command(tests))
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        pending = db.pending_work_items
        for n, item in enumerate(pending, 1):
            start = time.perf_counter()
            result = mutate_and_test(item.mutations, command, timeout)
            db.set_result(item.job_id, result)
            m = item.mutations[0]
            progress(f"  {n}/{len(pending)} {outcome(result):9s} {time.perf_counter() - start:5.1f}s "
                     f"{m.module_path}:{m.start_pos[0]} {m.operator_name.split('/')[-1]}")
            if outcome(result) == "survived":
                progress("".join(f"      {line}\n" for line in changed_lines(result.diff)).rstrip())


def outcome(result):
    """killed, survived, timeout or incompetent (cosmic-ray counts a timeout as killed)."""
    if result.worker_outcome != WorkerOutcome.NORMAL or result.test_outcome == TestOutcome.INCOMPETENT:
        return "incompetent"
    if result.test_outcome == TestOutcome.KILLED:
        return "timeout" if result.output == "timeout" else "killed"
    return "survived"


def killing_test(output):
    found = FAILED.findall(output or "")
    return found[0] if found else None


def completed(db_path):
    """(mutation spec, result) of every selected mutant that ran."""
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        return [(item.mutations[0], result) for item, result in db.completed_work_items
                if result.worker_outcome != WorkerOutcome.SKIPPED]
