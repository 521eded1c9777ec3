"""The one command for a GPU machine (bench/gpu.sh, bench/gpu_run.py) without a GPU: the plan keeps
to the budget (a step whose estimate does not fit is skipped, later ones still run), steps run as
real processes whose JSON is collected and copied, a step is stopped when the budget runs out, the
summary is written, and without a GPU the command refuses in one sentence. Also the matmul bench's
library rows where a library is not installed."""

import json
import os
import subprocess
import sys
import time

import pytest

from bench import gpu_run, matmul_throughput
from bench.gpu_run import Step, plan, run_all, skip_reason, write_summary
from tests.helpers import ROOT, assert_user_error

PY = sys.executable


def step(name, estimate, code="pass", **kw):
    return Step(name, f"step {name}", (PY, "-c", code), estimate, **kw)


def test_plan_skips_what_does_not_fit_and_goes_on():
    steps = [step("a", 100), step("b", 400), step("c", 200), step("d", 50)]
    decided = {s.name: (at, reason) for s, at, reason in plan(steps, 600)}
    assert decided["a"] == (0, None) and decided["b"] == (100, None)
    assert decided["c"] == (500, "estimated 200 s, only 100 s of the 600 s budget left")
    assert decided["d"] == (500, None)  # the skipped step used none of the budget


def test_a_step_whose_script_is_missing_is_skipped(tmp_path):
    missing = Step("x", "x", (PY, "bench/not_here.py"), 1)
    assert skip_reason(missing, 600, 600, repo=tmp_path) == "bench/not_here.py is not in this checkout"
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "not_here.py").write_text("")
    assert skip_reason(missing, 600, 600, repo=tmp_path) is None


def test_every_headline_step_has_its_script_and_fits_the_budget_by_estimate():
    decided = plan(gpu_run.STEPS, gpu_run.BUDGET_S)
    assert [s.name for s, _, _ in decided] == ["gpu-tests", "eggroll", "sass-report", "scan", "matmul", "mingru-bptt",
                                                  "table1", "table1-probe-batch"]
    assert [reason for _, _, reason in decided if reason and "budget" in reason] == []
    for s, _, _ in decided:
        assert s.script is None or os.path.isfile(os.path.join(ROOT, s.script))


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


def test_outcome_line_and_summary_files(tmp_path, monkeypatch):
    monkeypatch.setattr("bench.report.RESULTS", tmp_path)  # where write_result puts the summary
    tests_like = step("tests", 1, "print('3 passed, 1 skipped in 0.5s')", outcome=r"\d+ passed")
    records = run_all([tests_like, step("writes", 1, WRITES_RESULT), step("too-big", 10_000)], 60, tmp_path,
                      repo=ROOT)
    assert records[0]["outcome"] == "3 passed, 1 skipped in 0.5s"
    gpu = {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "memory_GiB": 79.1}
    path = write_summary(gpu, records, 60, 1.5)
    assert path.name.startswith("gpu-h100-80gb-hbm3-") and path.suffix == ".json"
    summary = json.loads(path.read_text())
    assert summary["gpu"] == gpu and summary["budget_s"] == 60 and len(summary["rows"]) == 3
    text = path.with_suffix(".md").read_text()
    assert "| tests | ok |" in text and "3 passed, 1 skipped" in text
    assert "| too-big | skipped |" in text and "| n | ms |" in text and "| 1 | 2.5 |" in text


def gpu_command(*args, script="gpu_run.py", results=None):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", NUMBA_ENABLE_CUDASIM="0",
               EGGNOG_BENCH_RESULTS=str(results) if results else os.environ.get("EGGNOG_BENCH_RESULTS", ""))
    launcher = ["bash"] if script.endswith(".sh") else [PY]
    return subprocess.run(launcher + [os.path.join(ROOT, "bench", script), *args], capture_output=True, text=True,
                          env=env, timeout=300, cwd=ROOT)


@pytest.mark.parametrize("script", ["gpu_run.py", "gpu.sh"])
def test_without_a_gpu_it_refuses_in_one_sentence(tmp_path, script):
    assert_user_error(gpu_command(script=script, results=tmp_path), "no GPU is visible")
    assert not list(tmp_path.iterdir())


def test_dry_run_prints_the_plan_without_a_gpu(tmp_path):
    result = gpu_command("--dry-run", "--budget", "100", "--only", "scan,table1", results=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "skip: estimated 150 s, only 70 s of the 100 s budget left" in result.stdout
    assert "scan_throughput.py --shapes 8x4096x1536" in result.stdout and "eggroll" not in result.stdout
    assert not list(tmp_path.iterdir())


def test_bad_flags(tmp_path):
    assert_user_error(gpu_command("--only", "nothing", results=tmp_path), "--only 'nothing'")
    assert_user_error(gpu_command("--budget", "0", results=tmp_path), "--budget")


def test_matmul_library_rows_say_not_installed():
    def nothing_installed(name):
        raise ImportError(name)

    shapes = matmul_throughput.parse_shapes("64x32x16,128x64x32")
    rows = matmul_throughput.library_rows(shapes, 0, 1, importer=nothing_installed)
    assert len(rows) == 2 * len(matmul_throughput.LIBRARY_PRODUCTS)
    assert {(r["library"], r["precision"]) for r in rows} == {("torch", p) for p in ("fp32", "tf32", "bf16", "int8")} | {
        ("cupy", "fp32")}
    assert all(r["note"] == "not installed" and r["ms"] is None for r in rows)
