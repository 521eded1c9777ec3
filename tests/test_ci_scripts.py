"""The CI scripts stop on every failing step and say which: `.ci/run`, `tests/run.sh`, `tests/wheel_install.sh`
and `tests/offline_install.sh`, each copied into a temporary tree and run with every outside command replaced
by a stub on PATH (tests/ci_stubs/stub.py: python, pip, ruff, pyenv, mpiexec, the venvs' and the wheel's
commands; the only real programs are a few coreutils, tar and bash). Each stub call logs a line; every
logged call is failed in turn, and the script must exit non-zero at once, naming it (a call it runs beside
another, like tests/run.sh's serial layer beside the fault suites, lets that other one end first). A run in
which nothing fails must pass through every step, and the cases must cover exactly the calls it logs, so a
step added to a script without a case here fails `test_the_cases_fail_every_call_of_a_passing_run`. No
install, pytest run or network is involved: a case is a few dozen process starts."""

import fnmatch
import os
import shutil
import subprocess
import sys
from typing import NamedTuple

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = (".ci/run", "tests/run.sh", "tests/wheel_install.sh", "tests/offline_install.sh")
REAL_TOOLS = ("bash", "basename", "cat", "chrt", "cp", "dirname", "env", "grep", "ls", "mkdir", "mktemp", "rm",
              "sort", "tail", "tar", "timeout", "true")
STUBBED = ("python", "python3", "pip", "ruff", "pyenv", "mpiexec", "stub-as")
FAIL_EXIT = 3


class Case(NamedTuple):
    call: str  # a glob over the stub's log line
    says: str  # a glob over a line of the script's output
    nth: int = 1  # which call matching `call` fails
    passes: bool = False  # a probe whose failure is an answer, not an error
    beside: str = ""  # a glob over a call that runs at the same time, so it may be logged after this one


def step_failed(command):  # a glob ("[" taken literally) over the step helper's line
    return f"FAILED (exit {FAIL_EXIT}): {command}".replace("[", "[[]")


def line_failed(command):  # the ERR trap's line: "FAILED (exit 3) at line N: <command as written>"
    return f"FAILED (exit {FAIL_EXIT}) at line *: {command}*".replace("[", "[[]")


CASES = {
    ".ci/run": [
        Case("python3 -m venv .venv", step_failed("python3 -m venv .venv")),
        Case("activate .venv", step_failed(". .venv/bin/activate")),
        Case(".venv/bin/pip install -e .[[]dev,cu13]", step_failed("pip install -e .[dev,cu13]")),
        Case(".venv/bin/pip install -q --no-compile -e .[[]torch]",
             step_failed("pip install -q --no-compile -e .[torch]")),
        Case("tests/run.sh", step_failed("bash tests/run.sh")),
        Case("ruff check .", step_failed("ruff check .")),
        Case("*python -m mypy", step_failed("python -m mypy")),
        Case("tests/wheel_install.sh", step_failed("bash tests/wheel_install.sh")),
        Case("pyenv root", "FAILED: no Python 3.12"),
        Case("3.12.9/bin/python3 -m venv .venv312",
             step_failed("*/pyenv/versions/3.12.9/bin/python3 -m venv .venv312")),
        Case(".venv312/bin/pip install*", step_failed(".venv312/bin/pip install -q --no-compile -e .[dev,cu13]")),
        Case(".venv312/bin/python -c import sys, numpy, numba*", step_failed(".venv312/bin/python -c import sys")),
        Case("*ptx_compile", step_failed("without_stdout .venv312/bin/python -m eggnog.kernels.checks.ptx_compile")),
        Case(".venv312/bin/python -m pytest*", step_failed("env EGGNOG_REQUIRE_PTX=1 EGGNOG_PROGRESS=0 "
                                                           ".venv312/bin/python -m pytest -q -n 2")),
        Case("activate .venv", step_failed(". .venv/bin/activate"), nth=2),
        Case("tests/offline_install.sh", step_failed("bash tests/offline_install.sh")),
    ],
    "tests/run.sh": [
        Case("python -m pytest -q -n 2 --dist loadfile tests --ignore=tests/faults",
             step_failed("python -m pytest -q -n 2"), beside="python -m pytest -q tests/faults"),
        Case("python -m pytest -q tests/faults", step_failed("python -m pytest -q tests/faults"),
             beside="python -m pytest -q -n 2 *"),
        Case("python -c *gpu_usable*", "no GPU visible: the GPU layer (tests/gpu) was skipped", passes=True),
        Case("python -m pytest -q tests/gpu",
             step_failed("env NUMBA_ENABLE_CUDASIM=0 EGGNOG_REQUIRE_GPU=1 python -m pytest -q tests/gpu")),
        Case("mpiexec -n 4 *", step_failed("timeout 900 env NUMBA_NUM_THREADS=1 EGGNOG_MPI_RANKS=4 mpiexec -n 4")),
    ],
    "tests/wheel_install.sh": [
        Case("python -m pip wheel *", line_failed('python -m pip wheel -q --no-deps "$work/src"')),
        Case("python -m venv *", line_failed('python -m venv "$work/venv"')),
        Case("venv/bin/python -m pip install *",
             line_failed('"$work/venv/bin/python" -m pip install -q --no-compile "$wheel"')),
        Case("venv/bin/python - *", line_failed('"$py" - "$checkout" "$work/venv"')),
        Case("*sysconfig*", line_failed('stdlib=$("$py" -c')),
        Case("venv/bin/eggnog-prepare *", line_failed("eggnog-prepare text --out corpus.bin")),
        Case("venv/bin/eggnog-train-es --data *", line_failed("eggnog-train-es --data corpus.bin --run-dir run")),
        Case("*metrics.jsonl*", "FAILED: the steps run logged could not be read"),
        Case("*default_corpus*", line_failed('EGGNOG_CACHE_DIR="$work/cache" "$py" -c')),
        Case("venv/bin/eggnog-evaluate *", line_failed("eggnog-evaluate run --data corpus.bin")),
        Case("*evaluate.json", line_failed("\"$py\" -c 'import json, sys; r = json.load")),
        Case("venv/bin/eggnog-train-es --resume run *", line_failed("eggnog-train-es --resume run --steps 3")),
        Case("*metrics.jsonl*", "FAILED: the steps run logged could not be read", nth=2),
        Case("*/bin/train_es.py --resume run *", line_failed('"$py" "$checkout/bin/train_es.py" --resume run')),
        Case("*metrics.jsonl*", "FAILED: the steps run logged could not be read", nth=3),
        Case("*/bin/train_es.py --data *", line_failed('"$py" "$checkout/bin/train_es.py" --data corpus.bin')),
        Case("venv/bin/eggnog-train-es --resume by-script *",
             line_failed("eggnog-train-es --resume by-script --steps 2")),
        Case("*metrics.jsonl*", "FAILED: the steps by-script logged could not be read", nth=4),
        Case("venv/bin/eggnog-train-rge *", "FAILED: eggnog-train-rge on a train_es run: exit 3, not a refusal"),
    ],
    "tests/offline_install.sh": [
        Case("python3 -m venv *", line_failed('python3 -m venv "$work/venv"')),
        Case("venv/bin/python -c import sys*", line_failed('version=$("$node" -c')),
        Case("python bin/offline_wheels.py fetch *", line_failed("python bin/offline_wheels.py fetch")),
        Case("python bin/offline_wheels.py install *", line_failed("python bin/offline_wheels.py install")),
        Case("venv/bin/python - *", line_failed('"$node" - "$checkout"')),
        Case("*selfcheck.py --elements 4096", line_failed('"$node" "$checkout/bin/selfcheck.py" --elements 4096')),
        Case("*selfcheck.py --gpu", line_failed('"$node" "$checkout/bin/selfcheck.py" --gpu')),
    ],
}
SERIAL_AND_FAULTS = ("python -m pytest -q -n 2 --dist loadfile tests --ignore=tests/faults",
                     "python -m pytest -q tests/faults")
PASSED = {".ci/run": "CI passed: every step", "tests/run.sh": "all test layers passed; GPU layer: ran on the GPU",
          "tests/wheel_install.sh": "wheel install: OK", "tests/offline_install.sh": "offline install: OK"}


def run_script(tmp_path, script, fail=None, nth=1, exit_status=FAIL_EXIT, extra_env=()):
    """Run a copy of `script` in a tree under tmp_path with the stubs; returns the result and the log."""
    repo, stubs, tools = tmp_path / "repo", tmp_path / "stubs", tmp_path / "tools"
    for rel in SCRIPTS:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(os.path.join(ROOT, rel), repo / rel)
    if script == ".ci/run":  # the scripts it calls have tests of their own here: in its tree they are stubs
        for rel in SCRIPTS[1:]:
            (repo / rel).write_text(f'exec "$STUB_DIR/stub-as" {rel} "$@"\n')
    stub = tmp_path / "stub"
    stub.write_text(f"#!{sys.executable} -IS\n" + open(os.path.join(ROOT, "tests", "ci_stubs", "stub.py")).read())
    stub.chmod(0o755)
    python312 = tmp_path / "pyenv" / "versions" / "3.12.9" / "bin"
    for folder in (stubs, tools, python312, tmp_path / "tmp"):
        folder.mkdir(parents=True)
    for name in STUBBED:
        (stubs / name).symlink_to(stub)
    (python312 / "python3").symlink_to(stub)
    for name in REAL_TOOLS:
        real = shutil.which(name)
        assert real, f"{name} is not on PATH: the scripts need it"
        (tools / name).symlink_to(real)
    log = tmp_path / "calls.log"
    env = {"PATH": f"{stubs}:{tools}", "HOME": str(tmp_path), "TMPDIR": str(tmp_path / "tmp"), "LC_ALL": "C",
           "STUB_DIR": str(stubs), "STUB_LOG": str(log), "STUB_PYENV_ROOT": str(tmp_path / "pyenv")}
    env.update(extra_env)
    if fail is not None:
        env.update(STUB_FAIL=fail, STUB_FAIL_NTH=str(nth), STUB_FAIL_EXIT=str(exit_status))
    result = subprocess.run([shutil.which("bash"), str(repo / script)], env=env, capture_output=True, text=True,
                            timeout=120)
    return result, log.read_text().splitlines() if log.exists() else []


def trigger(case, calls):
    """The index in `calls` of the call `case` fails, or None."""
    matching = [i for i, call in enumerate(calls) if fnmatch.fnmatchcase(call, case.call)]
    return matching[case.nth - 1] if len(matching) >= case.nth else None


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_cases_fail_every_call_of_a_passing_run(tmp_path, script):
    result, calls = run_script(tmp_path, script)
    assert result.returncode == 0, result.stdout + result.stderr
    assert PASSED[script] in result.stdout.splitlines()[-1], result.stdout
    triggers = [trigger(case, calls) for case in CASES[script]]
    assert None not in triggers, [case for case, at in zip(CASES[script], triggers) if at is None]
    assert sorted(triggers) == list(range(len(calls))), (
        "calls no case fails, or that two cases fail:\n"
        + "\n".join(f"{i}: {call}" for i, call in enumerate(calls) if triggers.count(i) != 1))


@pytest.mark.parametrize("script, case", [(script, case) for script in SCRIPTS for case in CASES[script]],
                         ids=[f"{script}:{case.call}#{case.nth}" for script in SCRIPTS for case in CASES[script]])
def test_a_failing_call_stops_the_script_and_is_named(tmp_path, script, case):
    result, calls = run_script(tmp_path, script, fail=case.call, nth=case.nth)
    out = result.stdout + result.stderr
    assert any(fnmatch.fnmatchcase(line, f"*{case.says}*") for line in out.splitlines()), out
    if case.passes:
        assert result.returncode == 0, out
        return
    assert result.returncode != 0, out
    failed = trigger(case, calls)
    after = [call for call in calls[failed + 1:] if not (case.beside and fnmatch.fnmatchcase(call, case.beside))]
    assert not after, f"the script went on after the failing call {calls[failed]!r}: {calls}"


def test_pytest_collecting_nothing_fails_the_test_run(tmp_path):
    result, calls = run_script(tmp_path, "tests/run.sh", fail="python -m pytest -q -n 2 *", exit_status=5)
    assert result.returncode != 0 and sorted(calls) == sorted(SERIAL_AND_FAULTS), (result.stdout, calls)
    assert "pytest collected no tests: that is a failure here" in result.stdout
    assert step_failed("python -m pytest").replace(f"exit {FAIL_EXIT}", "exit 5") in result.stdout


def test_without_a_gpu_the_test_run_skips_only_the_gpu_layer(tmp_path):
    result, calls = run_script(tmp_path, "tests/run.sh", fail="python -c *gpu_usable*", exit_status=1)
    assert result.returncode == 0, result.stdout
    assert not any("tests/gpu" in call for call in calls) and calls[-1].startswith("mpiexec -n 4 "), calls
    assert result.stdout.splitlines()[-1] == "all test layers passed; GPU layer: skipped (no GPU)"


@pytest.fixture
def normal_priority():
    """This process at normal priority for the test, then back: inside tests/run.sh's idle layer (as in CI)
    the script would start idle, and its fault suites with it."""
    before = os.sched_getscheduler(0)
    if before != os.SCHED_OTHER:
        try:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        except PermissionError:  # leaving idle priority takes privileges
            pytest.skip("the script must start at normal priority, and this process may not leave idle priority")
    yield
    os.sched_setscheduler(0, before, os.sched_param(0))


def test_the_serial_layer_runs_at_idle_priority_beside_the_fault_suites(tmp_path, normal_priority):
    policies = tmp_path / "policies.log"
    result, calls = run_script(tmp_path, "tests/run.sh", extra_env={"STUB_POLICY_LOG": str(policies)})
    assert result.returncode == 0, result.stdout + result.stderr
    policy = dict(line.split("\t") for line in policies.read_text().splitlines())
    serial, faults = SERIAL_AND_FAULTS
    assert int(policy[serial]) == os.SCHED_IDLE and int(policy[faults]) == os.SCHED_OTHER, policy
