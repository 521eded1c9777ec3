"""The sbatch scripts of examples/slurm run as a SLURM job would run them, so they cannot rot: each
script's body under bash (the #SBATCH lines are comments there) with the variables sbatch sets, two
ranks started by `mpiexec -n 2` in place of srun (SLURM_NTASKS=2 as srun sets it, which runtime/world.py
checks against the MPI world; mpiexec gives each rank MPI_LOCALRANKID, which world.py reads where srun
sets SLURM_LOCALID), the CPU backend and a tiny model. The requeue path is run for real: USR1 to the
batch shell (what --signal=B:USR1@180 sends) stops the run with a checkpoint and asks for a requeue, and
the job started again under the same id resumes the same run directory."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from bench.faults.coordinator_cluster import free_port
from eggnog.runtime.rundir import read_jsonl
from tests.es_helpers import tiny_corpus
from tests.helpers import ROOT

SLURM = Path(ROOT) / "examples" / "slurm"
EGG = ("--depth 1 --dim 8 --population 8 --group-size 2 --tokens-per-update 8 --validate-every 2 "
       "--checkpoint-every 2 --val-rows 4 --val-tokens 16 --seed 3 --no-plots")
GOSSIP = ("--dim 16 --depth 1 --chunk-size 8 --context-chunks 2 --batch-size 2 --val-rows 4 --val-tokens 16 "
          "--validate-every 4 --checkpoint-every 2 --population-every 3 --elites 3 --keep-checkpoints 1 --seed 5 "
          "--no-plots")
RGE = "--max-seq-len 8 --hidden-size 8 --num-heads 2 --batch-size 4 --probes 4 --checkpoint-every 2 --seed 3 --no-plots"
TABLE1 = "--sizes 100k --methods bptt --modes series,seeds --batch-size 8 --task copy"


def job_env(tmp_path, job_id, name, ranks=2, launch=None, **extra):
    """What sbatch and srun would give the script, with mpiexec as the launcher and a tiny run."""
    venv_bin = os.path.dirname(sys.executable)
    cache = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "eggnog-numba")
    env = dict(os.environ, PATH=venv_bin + os.pathsep + os.environ.get("PATH", ""), NUMBA_CACHE_DIR=cache,
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), NUMBA_ENABLE_CUDASIM="0",
               EGGNOG_PROGRESS="0", SLURM_JOB_ID=str(job_id), SLURM_JOB_NAME=name, SLURM_SUBMIT_DIR=str(tmp_path),
               SLURM_NTASKS=str(ranks), SLURM_CPUS_PER_TASK="1", EGGNOG_REPO=ROOT, EGGNOG_BACKEND="cpu",
               EGGNOG_LAUNCH=f"mpiexec -n {ranks}" if launch is None else launch,
               EGGNOG_REQUEUE="echo requeue-called", DATA=str(tiny_corpus(tmp_path)))
    for var in ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NPROCS", "PMI_SIZE", "PMI_RANK"):
        env.pop(var, None)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def sbatch_body(script, env, timeout=240):
    return subprocess.run(["bash", str(SLURM / script)], capture_output=True, text=True, env=env,
                          cwd=env["SLURM_SUBMIT_DIR"], timeout=timeout)


def start(script, env):
    return subprocess.Popen(["bash", str(SLURM / script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, cwd=env["SLURM_SUBMIT_DIR"])


def steps_of(path):
    return [record["step"] for record in read_jsonl(path)]


def wait_for(condition, seconds, what):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_sync_es_prints_the_rank_map_and_a_requeued_job_resumes_its_run(tmp_path):
    env = job_env(tmp_path, 4242, "eggnog-es", STEPS=1000, EGGNOG_ARGS=EGG)
    run = tmp_path / "runs" / "eggnog-es-4242"
    job = start("es_sync.sbatch", env)
    try:
        wait_for(lambda: (run / "metrics.jsonl").exists() and len(steps_of(run / "metrics.jsonl")) >= 2, 180,
                 "two steps")
        job.send_signal(signal.SIGUSR1)  # to the batch shell only, as --signal=B:USR1@180 does
        out, _ = job.communicate(timeout=120)
    finally:
        job.kill()
    assert "rank-to-GPU map:" in out, out
    host = socket.gethostname()
    assert f"  rank 0  host {host}  local rank 0  cpu" in out and f"  rank 1  host {host}  local rank 1  cpu" in out
    assert "stopped by SIGTERM after step" in out and "requeue-called" in out, out
    done = steps_of(run / "metrics.jsonl")[-1]
    assert steps_of(run / "metrics.jsonl") == list(range(1, done + 1))
    # the requeued job may start on another node: the lock its first start left there must not stop it
    (run / "lock").write_text(json.dumps({"host": "another-node", "pid": 1}))
    again = sbatch_body("es_sync.sbatch", dict(env, STEPS=str(done + 2)))
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"run: {run}" in again.stdout and f"(resumed from step {done})" in again.stdout, again.stdout
    assert "requeue-called" not in again.stdout
    assert steps_of(run / "metrics.jsonl") == list(range(1, done + 3))  # every step logged once
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["eggnog-es-4242"]


def test_coordinator_over_mpi(tmp_path):
    env = job_env(tmp_path, 51, "eggnog-coordinator", STEPS=3, EGGNOG_ARGS=EGG + " --population-chunk 4")
    result = sbatch_body("es_coordinator_mpi.sbatch", env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "mode: coordinator" in result.stdout, result.stdout
    assert steps_of(tmp_path / "runs" / "eggnog-coordinator-51" / "metrics.jsonl") == [1, 2, 3]


def test_coordinator_over_tcp_and_a_worker_array_task_that_finds_it(tmp_path):
    port = free_port()
    coordinator = start("es_coordinator_tcp.sbatch", job_env(
        tmp_path, 61, "eggnog-tcp", ranks=1, launch="", STEPS=3, EGGNOG_PORT=port, EGGNOG_TOKEN="t0ken",
        EGGNOG_COORDINATOR_HOST="127.0.0.1", EGGNOG_ARGS=EGG + " --population-chunk 4"))
    address = tmp_path / "runs" / "eggnog-tcp-61.address"
    try:
        wait_for(address.exists, 30, "the coordinator's address")
        assert address.read_text().strip() == f"127.0.0.1:{port}"
        workers = sbatch_body("es_workers_tcp.sbatch", job_env(
            tmp_path, 62, "eggnog-workers", SLURM_ARRAY_TASK_ID=0, SLURM_ARRAY_JOB_ID=62, COORDINATOR_JOB=61,
            EGGNOG_TOKEN="t0ken"))
        out, _ = coordinator.communicate(timeout=120)
    finally:
        coordinator.kill()
    assert workers.returncode == 0, workers.stdout + workers.stderr
    assert workers.stdout.count(f"coordinator 127.0.0.1:{port}") == 2, workers.stdout
    assert coordinator.returncode == 0, out
    assert steps_of(tmp_path / "runs" / "eggnog-tcp-61" / "metrics.jsonl") == [1, 2, 3]
    assert not address.exists()  # removed when the coordinator ends: workers must not find a stale one


def test_gossip_islands_and_their_resume(tmp_path):
    env = job_env(tmp_path, 71, "eggnog-gossip", STEPS=4, EGGNOG_ARGS=GOSSIP)
    first = sbatch_body("gossip.sbatch", env)
    assert first.returncode == 0, first.stdout + first.stderr
    run = tmp_path / "runs" / "eggnog-gossip-71"
    for rank in ("rank-00", "rank-01"):
        assert steps_of(run / rank / "metrics.jsonl")[-1] == 4
    again = sbatch_body("gossip.sbatch", dict(env, STEPS="6"))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "resumed" in again.stdout, again.stdout
    for rank in ("rank-00", "rank-01"):
        assert steps_of(run / rank / "metrics.jsonl")[-1] == 6


def test_gossip_islands_over_tcp_find_each_other_from_the_node_list_and_continue_when_requeued(tmp_path):
    """Two islands on one node (mpiexec only starts the processes; they number themselves from PMI_RANK
    and MPI_LOCALRANKID as they would from srun's SLURM_PROCID and SLURM_LOCALID), peers from SLURM's
    node list and the port rule."""
    # steps padded to 0.3 s (a test hook): both islands train at once, however unevenly they start
    env = job_env(tmp_path, 72, "eggnog-gossip-tcp", STEPS=20, EGGNOG_ARGS=GOSSIP + " --gossip-mixing-rate 1",
                  EGGNOG_TOKEN="t0ken", EGGNOG_GOSSIP_PORT=free_port(), SLURM_JOB_NODELIST="localhost",
                  SLURM_TASKS_PER_NODE="2", SLURMD_NODENAME="localhost", EGGNOG_TEST_GOSSIP_STEP_SECONDS=0.3)
    first = sbatch_body("gossip_tcp.sbatch", env)
    assert first.returncode == 0, first.stdout + first.stderr
    run = tmp_path / "runs" / "eggnog-gossip-tcp-72"
    merges = 0
    for rank in ("rank-00", "rank-01"):
        assert steps_of(run / rank / "metrics.jsonl")[-1] == 20
        merges += sum(e["event"] == "mix_merge" for e in read_jsonl(run / rank / "events.jsonl"))
    assert merges > 0
    again = sbatch_body("gossip_tcp.sbatch", dict(env, STEPS="22"))
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("from its own checkpoint at step 20") == 2, again.stdout
    for rank in ("rank-00", "rank-01"):
        assert steps_of(run / rank / "metrics.jsonl")[-1] == 22


def test_zero_order_run(tmp_path):
    result = sbatch_body("rge.sbatch", job_env(tmp_path, 81, "eggnog-rge", STEPS=3, EGGNOG_ARGS=RGE))
    assert result.returncode == 0, result.stdout + result.stderr
    assert steps_of(tmp_path / "runs" / "eggnog-rge-81" / "metrics.jsonl") == [1, 2, 3]


def test_table1_suite(tmp_path):
    env = job_env(tmp_path, 91, "eggnog-table1", ranks=1, launch="", RANKS=2, EGGNOG_ARGS=TABLE1)
    result = sbatch_body("table1.sbatch", env)
    assert result.returncode == 0, result.stdout + result.stderr
    [path] = (tmp_path / "runs" / "eggnog-table1-91").glob("table1-*.json")
    series, seeds = json.loads(path.read_text())["rows"]
    assert series["s_per_step"] > 0 and seeds["skipped"] == "BPTT has no distributed form here"


def test_selfcheck_prints_one_line_per_rank_of_the_rank_to_gpu_map(tmp_path):
    env = job_env(tmp_path, 31, "selfcheck")
    command = ["mpiexec", "-n", "2", sys.executable, "-m", "mpi4py", os.path.join(ROOT, "bin", "selfcheck.py"),
               "--elements", "4096", "--data", env["DATA"]]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    start = lines.index("backend: cpu (cpu); rank-to-GPU map:")
    host = socket.gethostname()
    assert lines[start + 1:start + 3] == [f"  rank 0  host {host}  local rank 0  cpu",
                                          f"  rank 1  host {host}  local rank 1  cpu"]
