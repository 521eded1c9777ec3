"""`bash bench/gpu/run.sh --first-contact` without a GPU: the plan's order and its budget (its dry run
estimates at most 480 s from the last runs' seconds), estimates from a run's summary or a stated model,
one archive of the steps' files (four files in --out), a failing step reported while the rest runs, and
the goal rows' predicted ranges against the run's figures (a stubbed goals file and stubbed steps)."""

import json
import os
import subprocess
import sys
import tarfile
import time

from bench.gpu import goal_ranges
from bench.gpu import history as gpu_history
from bench.gpu import run as gpu_run
from bench.gpu import steps as gpu_steps
from bench.gpu.bundle import bundle
from bench.gpu.steps import Step
from tests.helpers import ROOT, assert_user_error

PY = sys.executable
GPU = {"name": "NVIDIA H200", "compute_capability": "9.0", "memory_GiB": 139.8}
ORDER = ["selfcheck", "gpu-tests-quick", "probes", "tune", "eggroll-nano-egg", "eggroll-transformer", "scan",
         "matmul", "mingru-bptt", "table1-10m", "profile-eggroll", "profile-kernels", "profile-table1-host", "refit"]


def test_the_plan_runs_in_order_and_calls_the_other_parts_by_their_names():
    steps, budget = gpu_steps.PLANS["first-contact"]
    assert [s.name for s in steps] == ORDER and budget == 480
    commands = {s.name: s.command() for s in steps}
    assert commands["selfcheck"] == "python3 bin/selfcheck.py --gpu"
    assert commands["gpu-tests-quick"] == next(s for s in gpu_steps.QUICK if s.name == "gpu-tests-quick").command()
    assert commands["probes"] == "python3 -m bench.probes"
    assert commands["tune"] == "python3 -m bench.gpu.tune --quick"
    assert commands["refit"] == "python3 -m bench.static_report.calibration --refit"
    assert commands["profile-eggroll"] == "python3 -m bench.gpu.profile eggroll"
    peers = {s.name: s.peer for s in steps if s.peer}
    assert peers == {"eggroll-nano-egg": "nano-egg", "mingru-bptt": "torch", "table1-10m": "torch"}
    for s in steps:  # a step no run has measured states its model
        assert s.estimate_s > 0 and (s.basis or gpu_history.same_command(s.command()))


def dry_run(*args):
    return subprocess.run([PY, "-m", "bench.gpu.run", "--first-contact", "--dry-run", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_dry_run_with_every_peer_and_part_estimates_at_most_480_s(tmp_path):
    """Fails when the plan grows past its budget: every step counted, as if the other parts were all in."""
    (tmp_path / "run.py").write_text("")
    steps, _ = gpu_run.with_peers(gpu_steps.FIRST_CONTACT, gpu_run.peer_arguments(tmp_path, True))
    steps = gpu_history.with_history(steps)
    assert gpu_steps.PROBE_S + sum(s.estimate_s for s in steps) <= 480
    result = dry_run("--nano-egg", str(tmp_path))
    assert result.returncode == 0, result.stderr
    total = next(line for line in result.stdout.splitlines() if line.startswith("total of the estimates:"))
    assert int(total.split()[4]) <= 480 and "of the 480 s budget" in total
    tests_line = next(line for line in result.stdout.splitlines() if line.startswith("  gpu-tests-quick: "))
    assert " s, measured " in tests_line and " s in gpu-" in tests_line  # a committed run's seconds
    assert "refit: 30 s, stated: " in result.stdout
    assert "gpu-<GPU model>-" in result.stdout and "-first-contact.json" in result.stdout and ".tar.gz" in result.stdout


def summary(path, rows):
    path.write_text(json.dumps({"plan": "quick", "rows": rows}))


def test_estimates_come_from_the_newest_run_of_the_same_command(tmp_path):
    a = Step("a", "a", (PY, "-m", "bench.x", "--nano-egg", "/here"), 99)
    b = Step("b", "b", (PY, "-m", "bench.y"), 40, basis="stated: a model")
    c = Step("c", "c", (PY, "-m", "bench.z"), 7)
    summary(tmp_path / "gpu-h100-2026-11-27.json", [
        {"command": "python3 -m bench.x --nano-egg /elsewhere", "status": "ok", "seconds": 30.2},
        {"command": "python3 -m bench.y", "status": "ok", "seconds": 5}])
    summary(tmp_path / "gpu-h100-2026-11-27-quick-2.json", [
        {"command": "python3 -m bench.x --nano-egg /there", "status": "ok", "seconds": 12.1},
        {"command": "python3 -m bench.y", "status": "failed", "seconds": 1.0}])
    (tmp_path / "gpu-h100-2026-11-26.json").write_text(json.dumps({"rows": [{"command": "python3 -m bench.z"}]}))
    got = {s.name: s for s in gpu_history.with_history((a, b, c), tmp_path)}
    assert got["a"].estimate_s == 13 and got["a"].basis == "measured 12.1 s in gpu-h100-2026-11-27-quick-2.json"
    assert got["b"].estimate_s == 5 and got["b"].basis == "measured 5 s in gpu-h100-2026-11-27.json"
    assert got["c"].estimate_s == 7 and "stated in bench/gpu/steps.py" in got["c"].basis  # not a run's summary


def test_a_summary_from_before_the_sub_packages_counts_for_the_moved_module(tmp_path):
    steps = (Step("t", "t", (PY, "-m", "bench.zorn_paper.table1", "--sizes", "10M"), 99),
             Step("c", "c", (PY, "-m", "bench.zorn_paper.table1_cell", "--size", "10M"), 99))
    summary(tmp_path / "gpu-h100-2026-11-27.json", [
        {"command": "python3 -m bench.table1 --sizes 10M", "status": "ok", "seconds": 30.2},
        {"command": "python3 -m bench.table1_cell --size 10M", "status": "ok", "seconds": 4}])
    assert [s.estimate_s for s in gpu_history.with_history(steps, tmp_path)] == [31, 4]


def test_bundle_holds_every_file_and_is_replaced_whole(tmp_path):
    folder = tmp_path / "results"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.json").write_text("{}")
    (folder / "sub" / "b.txt").write_text("b")
    target = tmp_path / "out.tar.gz"
    assert bundle(folder, target) == ["a.json", "sub/b.txt"]
    (folder / "c.json").write_text("[]")
    bundle(folder, target)
    with tarfile.open(target) as archive:
        assert sorted(archive.getnames()) == ["a.json", "c.json", "sub/b.txt"]
    assert sorted(os.listdir(tmp_path)) == ["out.tar.gz", "results"]


GOALS = {"benchmark": "goals", "device": "sm90", "rows": [
    {"row": "Table 1 10M cdrge96", "unit": "s/step", "ours": 1.14, "range": [1.2, 1.8]},
    {"row": "scan 8x4096x1536 forward, kernel", "unit": "GB/s", "ours": 1200.0, "low": 900.0, "high": 1300.0},
    {"row": "TF32 matmul 32768x1536x1536", "unit": "ms", "ours": 0.583},
    {"row": "fp32 matmul 32768x1536x1536", "unit": "ms", "ours": 3.3, "ours_range": [3.0, 5.0]},
    {"row": "MinGRU BPTT 105M, 8x2048, bf16", "unit": "s/step", "ours": 0.07, "range": [0.05, 0.1]}]}


def writes(name, record):
    """Code for a step that writes `record` as <EGGNOG_BENCH_RESULTS>/<name>."""
    return (f"import json, os; open(os.path.join(os.environ['EGGNOG_BENCH_RESULTS'], {name!r}), 'w')"
            f".write(json.dumps({record!r}))")


TABLE1 = {"benchmark": "table1", "rows": [{"size": "10M", "method": "cdrge96", "mode": "series", "s_per_step": 1.5}]}
SCAN = {"benchmark": "scan_throughput", "rows": [{"op": "forward", "shape": "8x4096x1536", "GB_per_s": 480.0}]}
MATMUL = {"benchmark": "matmul_throughput", "rows": [
    {"op": "forward_tf32", "shape": "32768x1536x1536", "ours_ms": 0.6},
    {"op": "forward", "shape": "32768x1536x1536", "ours_ms": 4.0}]}


def test_goal_rows_predicted_range_against_measured(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for name, record in (("table1-nvidia-h200-2026-12-02.json", TABLE1), ("scan_throughput-x-2026-12-02.json", SCAN),
                         ("matmul_throughput-x-2026-12-02.json", MATMUL),
                         ("table1-nvidia-h200-2026-12-01.json", {**TABLE1, "rows": [{**TABLE1["rows"][0],
                                                                                      "s_per_step": 9.0}]})):
        (run / name).write_text(json.dumps(record))
    committed = tmp_path / "committed"
    committed.mkdir()
    (committed / "goals-sm90-2026-12-01.json").write_text(json.dumps(GOALS))
    rows, lines, source = goal_ranges.report(run, [run, committed])
    assert source == "goals-sm90-2026-12-01.json"
    assert [r["where"] for r in rows] == ["inside", "below", "above", "inside", "not measured"]
    assert lines[1] == ("Table 1 10M cdrge96: predicted 1.2-1.8 s/step, measured 1.5 s/step "
                        "(table1-nvidia-h200-2026-12-02.json): inside")
    assert "predicted 0.583 ms (a point: the report gives no range)" in lines[3]
    assert "predicted 3-5 ms, measured 4 ms" in lines[4]  # the report's ours_range
    assert lines[5].endswith("predicted 0.05-0.1 s/step, not measured in this run")
    # a refit that rewrote the goals into the run's folder wins over the committed file
    (run / "goals-sm90-2026-12-02.json").write_text(json.dumps({**GOALS, "rows": GOALS["rows"][:1]}))
    assert len(goal_ranges.report(run, [run, committed])[0]) == 1
    assert goal_ranges.report(tmp_path / "run", [tmp_path / "nowhere"])[0] == []


def first_contact_steps():
    """The plan's names and order, each step stubbed: benchmarks write results, one fails mid-plan."""
    codes = {"table1-10m": writes("table1-nvidia-h200-2026-12-02.json", TABLE1),
             "scan": writes("scan_throughput-nvidia-h200-2026-12-02.json", SCAN),
             "tune": "import sys; print('tune broke'); sys.exit(4)",
             "refit": "import os; print('refit reads', os.environ['EGGNOG_RUN_RESULTS'])"}
    return tuple(Step(s.name, s.what, (PY, "-c", codes.get(s.name, "pass")), 1) for s in gpu_steps.FIRST_CONTACT)


def test_a_run_writes_four_files_reports_a_failure_and_ends_with_the_goal_rows(tmp_path, capsys):
    committed, out = tmp_path / "committed", tmp_path / "out"
    committed.mkdir()
    (committed / "goals-sm90-2026-12-01.json").write_text(json.dumps(GOALS))
    results_before = sorted(os.listdir(os.path.join(ROOT, "bench", "results")))
    assert gpu_run.run_plan(GPU, first_contact_steps(), 120, out, "first-contact", repo=ROOT,
                            history=committed) == 1  # the failed step
    name = f"gpu-h200-{time.strftime('%Y-%m-%d')}-first-contact"
    assert sorted(os.listdir(out)) == sorted(name + ext for ext in (".json", ".md", ".log", ".tar.gz"))
    record = json.loads((out / f"{name}.json").read_text())
    statuses = {r["step"]: r["status"] for r in record["rows"]}
    assert [r["step"] for r in record["rows"]] == ORDER
    assert statuses.pop("tune") == "failed" and set(statuses.values()) == {"ok"}  # the rest still ran
    assert [(g["row"], g["where"]) for g in record["goals"]][:2] == [("Table 1 10M cdrge96", "inside"),
                                                                      ("scan 8x4096x1536 forward, kernel", "below")]
    with tarfile.open(out / f"{name}.tar.gz") as archive:
        assert sorted(archive.getnames()) == ["goal_ranges.json", "scan_throughput-nvidia-h200-2026-12-02.json",
                                              "table1-nvidia-h200-2026-12-02.json"]
    log = (out / f"{name}.log").read_text()
    assert "tune broke" in log and "refit reads " in log and "Table 1 10M cdrge96: predicted 1.2-1.8" in log
    assert not os.path.exists(log.split("refit reads ")[1].split()[0])  # the run's folder went with the run
    markdown = (out / f"{name}.md").read_text()
    assert "## Goal rows: predicted range against measured" in markdown and "| tune | failed |" in markdown
    assert "Table 1 10M cdrge96: predicted 1.2-1.8" in capsys.readouterr().out
    assert sorted(os.listdir(os.path.join(ROOT, "bench", "results"))) == results_before


def test_a_package_run_with_dash_m_counts_by_its_main(tmp_path):
    step = Step("p", "p", (PY, "-m", "bench.some_package"), 1)
    assert gpu_run.skip_reason(step, 60, 60, repo=tmp_path) == "bench/some_package.py is not in this checkout"
    (tmp_path / "bench" / "some_package").mkdir(parents=True)
    (tmp_path / "bench" / "some_package" / "__main__.py").write_text("")
    assert gpu_run.skip_reason(step, 60, 60, repo=tmp_path) is None


def test_first_contact_without_a_gpu_refuses_and_takes_no_other_plan(tmp_path):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", NUMBA_ENABLE_CUDASIM="0", EGGNOG_BENCH_RESULTS=str(tmp_path))
    for args, message in ((("--first-contact",), "no GPU is visible"),
                          (("--first-contact", "--profile"), "--profile and --first-contact are 2 plans")):
        result = subprocess.run(["bash", os.path.join(ROOT, "bench", "gpu", "run.sh"), *args, "--out",
                                 str(tmp_path / "o")], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
        assert_user_error(result, message)
    assert not (tmp_path / "o").exists()
