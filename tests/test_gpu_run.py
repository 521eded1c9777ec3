"""The commands for a GPU node (bench/gpu/run.sh, bench/gpu/run.py, bench/gpu/steps.py) without a GPU: the
quick and full plans keep to their budgets by estimate and split tests/gpu between them; a plan skips
what does not fit and goes on; steps run as real processes whose JSON is collected and copied; a step
is stopped when the budget runs out; everything is written into --out (summary rewritten after every
step, one log), and SIGTERM to the runner stops the running step and still writes the summary; the
dry run works with only python3 on PATH; without a GPU the command refuses in one sentence. Also the
simulator default of tests/conftest.py for tests/gpu, and the matmul bench's library rows where a
library is not installed."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from bench.gpu import run as gpu_run
from bench.gpu import steps as gpu_steps
from bench.gpu.run import plan, run_all, run_plan, skip_reason, write_summary
from bench.gpu.steps import Step
from bench.throughput import matmul as matmul_throughput
from tests.helpers import ROOT, assert_user_error

PY = sys.executable
GPU = {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "memory_GiB": 79.1}


def step(name, estimate, code="pass", **kw):
    return Step(name, f"step {name}", (PY, "-c", code), estimate, **kw)


def test_plan_skips_what_does_not_fit_and_goes_on():
    steps = [step("a", 100), step("b", 400), step("c", 200), step("d", 50)]
    decided = {s.name: (at, reason) for s, at, reason in plan(steps, 600)}
    assert decided["a"] == (0, None) and decided["b"] == (100, None)
    assert decided["c"] == (500, "estimated 200 s, only 100 s of the 600 s budget left")
    assert decided["d"] == (500, None)  # the skipped step used none of the budget
    assert [at for _, at, _ in plan(steps[:2], 600, start=10)] == [10, 110]  # after the GPU probe


def test_a_step_whose_script_is_missing_is_skipped(tmp_path):
    missing = (Step("x", "x", (PY, "bench/not_here.py"), 1), Step("x", "x", (PY, "-m", "bench.not_here", "-v"), 1))
    reasons = [skip_reason(s, 600, 600, repo=tmp_path) for s in missing]
    assert reasons == ["bench/not_here.py is not in this checkout"] * 2
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "not_here.py").write_text("")
    assert [skip_reason(s, 600, 600, repo=tmp_path) for s in missing] == [None, None]


@pytest.mark.parametrize("name, steps, budget", [
    ("quick", ["selfcheck", "gpu-tests-quick", "eggroll", "eggroll-transformer"], 150),
    ("full", ["gpu-tests", "eggroll-transformer", "eggroll-nano-egg", "scan", "matmul", "mingru-bptt", "table1"], 450),
    ("profile", ["profile-eggroll", "profile-kernels", "profile-mingru", "profile-table1-host", "profile-ncu"], 300)])
def test_each_plan_has_its_scripts_and_fits_its_budget_by_estimate(name, steps, budget, tmp_path):
    chosen, default_budget = gpu_steps.PLANS[name]
    assert [s.name for s in chosen] == steps and default_budget == budget
    (tmp_path / "run.py").write_text("")
    with_every_peer, missing = gpu_run.with_peers(chosen, gpu_run.peer_arguments(tmp_path, True))
    assert missing == []
    decided = plan(with_every_peer, budget, start=gpu_steps.PROBE_S)
    assert [reason for _, _, reason in decided] == [None] * len(steps)
    assert gpu_steps.PROBE_S + sum(s.estimate_s for s in with_every_peer) <= budget
    for s in chosen:
        assert s.script is None or os.path.isfile(os.path.join(ROOT, s.script))
        assert s.command().startswith("python3 ") and "static_report" not in s.command()


def collected(argv):
    """The node ids pytest collects for a step's command (under the simulator: collection only)."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    out = subprocess.run([PY, *argv[1:], "--collect-only", "-p", "no:randomly"], capture_output=True, text=True,
                         cwd=ROOT, env=env, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return {line for line in out.stdout.splitlines() if line.startswith("tests/gpu/") and "::" in line}


def test_the_quick_tests_exist_and_the_two_plans_split_tests_gpu():
    quick_step = next(s for s in gpu_steps.QUICK if s.name == "gpu-tests-quick")
    rest_step = next(s for s in gpu_steps.FULL if s.name == "gpu-tests")
    quick, rest, everything = collected(quick_step.argv), collected(rest_step.argv), collected((PY, "-m", "pytest",
                                                                                              "-q", "tests/gpu"))
    for selected in gpu_steps.QUICK_TESTS:  # each names a file or test that is there
        assert any(node == selected or node.startswith(selected + "::") for node in quick), selected
    assert quick and rest and not quick & rest and quick | rest == everything


WRITES_RESULT = ("import json, os; print('working'); "
                 "open(os.path.join(os.environ['EGGNOG_BENCH_RESULTS'], 'demo-gpu-x.json'), 'w')"
                 ".write(json.dumps({'benchmark': 'demo', 'rows': [{'n': 1, 'ms': 2.5}]}))")
PRINTS_THEN_HANGS = "import time; print('{\"cell\": 1}', flush=True); time.sleep(60)"


def test_steps_run_within_the_budget_and_their_results_are_collected(tmp_path):
    steps = [step("writes", 1, WRITES_RESULT), step("too-big", 10_000), step("fails", 1, "raise SystemExit(3)"),
             step("hangs", 1, PRINTS_THEN_HANGS)]
    start = time.monotonic()
    records = {r["step"]: r for r in run_all(steps, 8, tmp_path, started=start, repo=ROOT)}
    assert time.monotonic() - start < 20  # the hanging step was stopped at the end of the budget
    ok = records["writes"]
    assert ok["status"] == "ok" and ok["exit_status"] == 0 and ok["files"] == ["demo-gpu-x.json"]
    assert ok["results"]["demo-gpu-x.json"]["rows"] == [{"n": 1, "ms": 2.5}]
    assert json.loads((tmp_path / "demo-gpu-x.json").read_text())["benchmark"] == "demo"
    assert records["too-big"]["status"] == "skipped" and "estimated 10000 s" in records["too-big"]["reason"]
    assert records["fails"]["status"] == "failed" and records["fails"]["exit_status"] == 3
    hung = records["hangs"]
    assert hung["status"] == "stopped" and "budget ran out" in hung["reason"]
    assert hung["printed_rows"] == [{"cell": 1}] and hung["seconds"] < 10


def test_a_step_finds_eggnog_from_the_checkout_without_an_install(tmp_path):
    """Steps run scripts from bin/ (their own folder first on sys.path) and bench modules: the checkout is
    put first on PYTHONPATH, so a node where eggnog is not installed runs them too."""
    first_is_checkout = ("import os, sys; first = os.environ['PYTHONPATH'].split(os.pathsep)[0]; "
                         f"sys.exit(0 if first == {str(gpu_run.REPO)!r} else 3)")
    record = run_all([step("checks", 5, first_is_checkout)], 30, tmp_path, repo=ROOT)[0]
    assert record["status"] == "ok", record
    assert gpu_run.with_checkout("/site") == os.pathsep.join([str(gpu_run.REPO), "/site"])
    assert gpu_run.with_checkout(None) == str(gpu_run.REPO)


def test_outcome_line_and_summary_files(tmp_path):
    tests_like = step("tests", 1, "print('3 passed, 1 skipped in 0.5s')", outcome=r"\d+ passed")
    records = run_all([tests_like, step("writes", 1, WRITES_RESULT), step("too-big", 10_000)], 60, tmp_path,
                      repo=ROOT)
    assert records[0]["outcome"] == "3 passed, 1 skipped in 0.5s"
    path = write_summary(tmp_path, GPU, records, 60, 1.5)
    assert path.name.startswith("gpu-h100-80gb-hbm3-") and path.suffix == ".json"
    summary = json.loads(path.read_text())
    assert summary["gpu"] == GPU and summary["budget_s"] == 60 and len(summary["rows"]) == 3
    text = path.with_suffix(".md").read_text()
    assert "| tests | ok |" in text and "3 passed, 1 skipped" in text
    assert "| too-big | skipped |" in text and "| n | ms |" in text and "| 1 | 2.5 |" in text


def test_a_run_writes_everything_into_out_and_a_quick_run_keeps_its_own(tmp_path, capsys):
    results_before = sorted(os.listdir(os.path.join(ROOT, "bench", "results")))
    out = tmp_path / "made" / "here"
    steps = (step("writes", 1, WRITES_RESULT), step("says", 1, "print('a line for the log')"))
    assert run_plan(GPU, steps, 60, out, "quick", repo=ROOT) == 0
    assert run_plan(GPU, steps[1:], 60, out, "full", repo=ROOT) == 0
    names = sorted(os.listdir(out))
    quick, full = (f"gpu-h100-80gb-hbm3-{time.strftime('%Y-%m-%d')}{tail}" for tail in ("-quick", ""))
    assert names == sorted(["demo-gpu-x.json"] + [n + ext for n in (quick, full) for ext in (".json", ".md", ".log")])
    log = (out / f"{quick}.log").read_text()
    assert "working" in log and "a line for the log" in log and "== says:" in log
    summary = json.loads((out / f"{quick}.json").read_text())
    assert summary["plan"] == "quick" and [r["status"] for r in summary["rows"]] == ["ok", "ok"]
    assert json.loads((out / f"{full}.json").read_text())["plan"] == "full"
    assert sorted(os.listdir(os.path.join(ROOT, "bench", "results"))) == results_before
    assert "a line for the log" in capsys.readouterr().out  # and on the terminal


SLEEPS = ("import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); "
          "print('sleeping', flush=True); time.sleep(120)")
RUNNER = """
import json, sys
from bench.gpu.run import run_plan
from bench.gpu.steps import Step
py, out, pid_file = sys.executable, sys.argv[1], sys.argv[2]
steps = (Step("first", "first", (py, "-c", "print('first done')"), 1),
         Step("sleeps", "sleeps", (py, "-c", {sleeps!r}, pid_file), 1),
         Step("never", "never", (py, "-c", "pass"), 1))
raise SystemExit(run_plan({gpu!r}, steps, 600, out))
"""


def test_sigterm_stops_the_running_step_and_the_summary_is_written(tmp_path):
    pid_file, out = tmp_path / "pid", tmp_path / "out"
    runner = subprocess.Popen([PY, "-c", RUNNER.format(sleeps=SLEEPS, gpu=GPU), str(out), str(pid_file)], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (pid_file.exists() and pid_file.read_text()) and runner.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        assert runner.poll() is None, runner.stderr.read()
        summary = next(out.glob("gpu-*.json"))
        # written after the first step: the sleeping one is not finished yet
        assert [r["status"] for r in json.loads(summary.read_text())["rows"]] == ["ok", "pending", "pending"]
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(timeout=60) == 1, runner.stderr.read()
        rows = {r["step"]: r for r in json.loads(summary.read_text())["rows"]}
        assert rows["first"]["status"] == "ok"
        assert rows["sleeps"]["status"] == "stopped" and rows["sleeps"]["reason"].startswith("interrupted: SIGTERM")
        assert rows["never"]["status"] == "skipped" and rows["never"]["reason"].startswith("interrupted")
        assert "| sleeps | stopped |" in summary.with_suffix(".md").read_text()
        assert "sleeping" in summary.with_suffix(".log").read_text()
        with pytest.raises(ProcessLookupError):  # the step's process was stopped with the runner
            os.kill(int(pid_file.read_text()), 0)
    finally:  # leave nothing running when an assertion failed
        runner.kill()
        runner.wait()
        if pid_file.exists() and pid_file.read_text():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass


def gpu_command(*args, script="gpu.run", results=None):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", NUMBA_ENABLE_CUDASIM="0",
               EGGNOG_BENCH_RESULTS=str(results) if results else os.environ.get("EGGNOG_BENCH_RESULTS", ""),
               PATH=os.path.dirname(PY) + os.pathsep + os.environ.get("PATH", ""))  # run.sh runs this python3
    # run.sh is a file; the runner is a module of the bench package
    if script.endswith(".sh"):
        command = ["bash", os.path.join(ROOT, "bench", script)]
    else:
        command = [PY, "-m", f"bench.{script}"]
    return subprocess.run([*command, *args], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)


@pytest.mark.parametrize("script", ["gpu.run", "gpu/run.sh"])
def test_without_a_gpu_it_refuses_in_one_sentence(tmp_path, script):
    results = tmp_path / "results"
    results.mkdir()
    assert_user_error(gpu_command("--out", str(tmp_path / "out"), script=script, results=results), "no GPU is visible")
    assert_user_error(gpu_command("--quick", script=script, results=results), "no GPU is visible")
    assert not list(results.iterdir()) and not (tmp_path / "out").exists()


def test_dry_run_prints_the_plan_without_a_gpu(tmp_path):
    result = gpu_command("--dry-run", "--budget", "100", "--only", "scan,table1", results=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "skip: estimated 170 s, only 80 s of the 100 s budget left" in result.stdout
    assert "python3 -m bench.throughput.scan --shapes 8x4096x1536" in result.stdout and "eggroll" not in result.stdout
    assert "total of the estimates: 20 s of the 100 s budget" in result.stdout
    assert not list(tmp_path.iterdir())


def test_quick_dry_run_with_only_python3_on_path_fits_150_s_and_writes_nothing(tmp_path):
    bin_dir, out = tmp_path / "bin", tmp_path / "out"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f'#!/bin/sh\nexec {PY} "$@"\n')  # a symlink would lose the venv
    (bin_dir / "python3").chmod(0o755)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    result = subprocess.run([shutil.which("bash"), os.path.join(ROOT, "bench", "gpu", "run.sh"), "--quick", "--dry-run",
                             "--out", str(out)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    total = next(line for line in result.stdout.splitlines() if line.startswith("total of the estimates:"))
    assert int(total.split()[4]) <= 150 and "of the 150 s budget" in total and "skip:" not in result.stdout
    assert "python3 bin/selfcheck.py --gpu" in result.stdout
    assert "python3 -m bench.throughput.eggroll --depth 6" in result.stdout
    assert sorted(os.listdir(tmp_path)) == ["bin"]


@pytest.mark.parametrize("flags, budget", [((), 450), (("--profile",), 300)])
def test_dry_runs_with_every_peer_fit_their_budgets(flags, budget, tmp_path):
    nano = tmp_path / "nano-egg"
    nano.mkdir()
    (nano / "run.py").write_text("")
    result = subprocess.run([PY, "-m", "bench.gpu.run", "--dry-run", "--nano-egg", str(nano), *flags], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    total = next(line for line in result.stdout.splitlines() if line.startswith("total of the estimates:"))
    assert int(total.split()[4]) <= budget and f"of the {budget} s budget" in total and "skip:" not in result.stdout
    if not flags:
        assert f"--nano-python python3 --nano-egg {nano}" in result.stdout
        assert "python3 -m bench.zorn_paper.table1 " in result.stdout and "--torch-python python3" in result.stdout


def test_without_nano_egg_its_step_is_skipped_with_one_line(tmp_path):
    result = subprocess.run([PY, "-m", "bench.gpu.run", "--dry-run"], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("no --nano-egg given: nano-egg's rows are skipped") == 1
    nano_line = next(line for line in result.stdout.splitlines() if line.startswith("eggroll-nano-egg"))
    assert "skip: its peer (nano-egg) is not at hand" in nano_line and "--nano-egg" not in nano_line


def test_a_missing_peer_is_one_line_of_the_log_and_the_summary(tmp_path):
    note = "no --nano-egg given: nano-egg's rows are skipped"
    assert run_plan(GPU, (step("a", 1),), 60, tmp_path, "full", repo=ROOT, notes=[note]) == 0
    [summary] = tmp_path.glob("gpu-*.json")
    assert json.loads(summary.read_text())["notes"] == [note]
    for suffix in (".md", ".log"):
        assert summary.with_suffix(suffix).read_text().count(note) == 1


def test_a_missing_torch_leaves_its_steps_without_the_peer():
    steps, missing = gpu_run.with_peers(gpu_steps.FULL, gpu_run.peer_arguments(None, False))
    assert len(missing) == 2 and any("torch with CUDA is not importable" in m for m in missing)
    assert all("--torch-python" not in s.argv for s in steps)
    assert [s.estimate_s for s in steps] == [s.estimate_s for s in gpu_steps.FULL]


def test_bad_flags(tmp_path):
    assert_user_error(gpu_command("--quick", "--profile", results=tmp_path), "choose one")
    assert_user_error(gpu_command("--nano-egg", str(tmp_path), results=tmp_path), "holds no run.py")
    assert_user_error(gpu_command("--only", "nothing", results=tmp_path), "--only 'nothing'")
    assert_user_error(gpu_command("--quick", "--only", "table1", results=tmp_path), "choose from selfcheck")
    assert_user_error(gpu_command("--budget", "0", results=tmp_path), "--budget")
    (tmp_path / "a-file").write_text("")
    assert_user_error(gpu_command("--out", str(tmp_path / "a-file"), results=tmp_path), "is a file")


def pytest_in_a_fresh_process(*args):
    """pytest run as a user would on this machine, with NUMBA_ENABLE_CUDASIM unset."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    return subprocess.run([PY, "-m", "pytest", "-q", "-rs", "-p", "no:randomly", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300)


def test_tests_gpu_alone_runs_on_the_gpu_and_the_rest_on_the_simulator():
    gpu_only = pytest_in_a_fresh_process("tests/gpu/test_mma_gpu.py")
    assert gpu_only.returncode == 0, gpu_only.stdout
    assert "no usable GPU on this machine" in gpu_only.stdout and "NUMBA_ENABLE_CUDASIM=0" not in gpu_only.stdout
    on_simulator = "tests/test_backend.py::test_auto_picks_cuda_on_the_simulator"  # auto is the CPU without one
    plain = pytest_in_a_fresh_process(on_simulator)
    assert plain.returncode == 0 and "1 passed" in plain.stdout, plain.stdout
    mixed = pytest_in_a_fresh_process("tests/gpu/test_mma_gpu.py", on_simulator)
    assert mixed.returncode == 0 and "1 passed, 2 skipped" in mixed.stdout, mixed.stdout
    assert "needs a real GPU: run with NUMBA_ENABLE_CUDASIM=0" in mixed.stdout


def test_matmul_library_rows_say_not_installed():
    def nothing_installed(name):
        raise ImportError(name)

    shapes = matmul_throughput.parse_shapes("64x32x16,128x64x32")
    rows = matmul_throughput.library_rows(shapes, 0, 1, importer=nothing_installed)
    assert len(rows) == 2 * len(matmul_throughput.LIBRARY_PRODUCTS)
    expected = {("torch", p) for p in ("fp32", "tf32", "bf16", "int8")} | {("cupy", "fp32")}
    assert {(r["library"], r["precision"]) for r in rows} == expected
    assert all(r["note"] == "not installed" and r["ms"] is None for r in rows)
