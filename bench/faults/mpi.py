"""The fault cases of runs under MPI (MPICH's mpiexec, ranks on this machine, a tiny model on the CPU),
each a function that runs it and returns what was lost: a rank killed with kill -9 under the
synchronous and the coordinator trainer, a gossip run stopped by SIGINT or SIGTERM, a gossip island
killed. Runs are given far more steps than they get to: each is stopped or killed once a few steps are
done, and resumed with --steps a little past that. tests/faults asserts on the results."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from eggnog.runtime.checkpoint import checkpoint_step, load_checkpoint
from eggnog.training.gossip.checkpoints import NAME_RE, island_ranks, rank_dir

ROOT = Path(__file__).resolve().parents[2]
# the mpiexec beside this interpreter (a virtual environment's, matching its mpi4py), else the PATH's
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
ENV = {"NUMBA_NUM_THREADS": "1", "EGGNOG_PROGRESS": "0", "NUMBA_ENABLE_CUDASIM": "0"}
UNREACHED = 100_000  # --steps of a run that is stopped long before
COMMON = ["--backend", "cpu", "--no-plots", "--val-rows", "4", "--val-tokens", "16"]
ES = ["--depth", "1", "--dim", "8", "--population", "12", "--group-size", "2", "--tokens-per-update", "8",
      "--validate-every", "1000", "--checkpoint-every", "5"]
GOSSIP = ["--dim", "16", "--depth", "1", "--chunk-size", "8", "--context-chunks", "2", "--batch-size", "2",
          "--validate-every", "1000", "--checkpoint-every", "20", "--population-every", "5",
          "--gossip-mixing-rate", "0.5"]
MORE = 5  # steps a resumed run goes past its checkpoint


class Job:
    """One mpiexec job in the background, its output in files of `directory`."""

    def __init__(self, directory, name, ranks, script, *flags, timeout=300):
        self.directory, self.name, self.timeout = Path(directory), name, timeout
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **ENV)
        self.out = open(self.directory / f"{name}.out", "w")
        command = [MPIEXEC, "-n", str(ranks), sys.executable, str(ROOT / "bin" / script), *map(str, flags)]
        self.process = subprocess.Popen(command, stdout=self.out, stderr=subprocess.STDOUT, env=env,
                                        cwd=self.directory)
        self.started = time.perf_counter()

    def rank_pid(self, rank):
        """The process of MPI rank `rank` (a descendant of mpiexec whose PMI_RANK is `rank`)."""
        for pid in descendants(self.process.pid):
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"PMI_RANK={rank}".encode() in environ:
                return pid
        raise RuntimeError(f"no process of rank {rank} under mpiexec {self.process.pid}")

    def wait(self):
        try:
            return self.process.wait(max(1.0, self.timeout - (time.perf_counter() - self.started)))
        finally:
            self.kill_all()
            self.out.close()

    def kill_all(self):
        """kill -9 of the ranks and mpiexec, where still running (nothing is left behind by a failed case)."""
        if self.process.poll() is None:
            for pid in descendants(self.process.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.process.kill()
            self.process.wait()

    def output(self):
        return (self.directory / f"{self.name}.out").read_text()


def descendants(pid):
    """Every process below `pid` (mpiexec, its proxy, the ranks), from /proc."""
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


def logged_steps(path):
    """The steps of a metrics.jsonl as it stands (a line being written is skipped)."""
    steps = []
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        return steps
    for line in lines:
        try:
            steps.append(json.loads(line)["step"])
        except (ValueError, KeyError):
            pass
    return steps


def wait_until(condition, job, what, seconds=240):
    """Poll `condition` while the job runs (the first run after a source change compiles for minutes)."""
    deadline = time.perf_counter() + seconds
    while not condition():
        if job.process.poll() is not None or time.perf_counter() > deadline:
            job.kill_all()
            raise RuntimeError(f"{job.name}: {what} did not happen (exit {job.process.poll()}):\n"
                               + job.output()[-2000:])
        time.sleep(0.05)


def ended_after(job, started):
    status = job.wait()
    return status, round(time.perf_counter() - started, 2)


def island_step(run_dir, rank):
    """The step of island `rank`'s latest checkpoint, read through its file (None: none)."""
    latest = rank_dir(run_dir, rank) / "checkpoints" / "latest"
    if not latest.is_file():
        return None
    load_checkpoint(latest)
    return int(NAME_RE.match(latest.resolve().name).group(1))


# ---- a rank killed under the synchronous or coordinator trainer ------------------------------------
def es_rank_killed(directory, data, mode="sync", ranks=3, killed=1):
    """kill -9 of one rank mid-run. MPICH ends the whole job; lost: the steps since the last checkpoint,
    redone by `--resume` (the resume command is printed before the first step)."""
    run_dir = Path(directory) / f"es-{mode}"
    flags = [*ES, *COMMON, "--mode", mode, "--data", data, "--run-dir", run_dir]
    job = Job(directory, f"es-{mode}", ranks, "train_es.py", *flags, "--steps", UNREACHED,
              *(["--population-chunk", "2"] if mode == "coordinator" else []))
    wait_until(lambda: (run_dir / "checkpoints" / "latest").is_file()
               and len(logged_steps(run_dir / "metrics.jsonl")) >= 12, job, "12 steps and a checkpoint")
    os.kill(job.rank_pid(killed), signal.SIGKILL)
    status, seconds = ended_after(job, time.perf_counter())
    logged = logged_steps(run_dir / "metrics.jsonl")
    load_checkpoint(run_dir / "checkpoints" / "latest")  # raises where it does not load
    saved = checkpoint_step(run_dir)
    target = saved + MORE
    resumed = Job(directory, f"es-{mode}-resumed", ranks, "train_es.py", "--resume", run_dir, "--steps", target)
    resumed_status = resumed.wait()
    return {"case": f"{mode}: rank {killed} of {ranks} killed", "exit_status": status, "seconds_to_exit": seconds,
            "resume_printed": f"--resume {run_dir}" in job.output(), "checkpoint_step": saved,
            "steps_lost": max(logged) - saved, "work_redone": f"{max(logged) - saved} steps",
            "resumed_status": resumed_status, "resumed_output": resumed.output()[-2000:],
            "steps_logged_once": logged_steps(run_dir / "metrics.jsonl") == list(range(1, target + 1))}


# ---- gossip ---------------------------------------------------------------------------------------
def gossip_job(directory, name, ranks, data, *extra):
    run_dir = Path(directory) / name
    job = Job(directory, name, ranks, "train_gossip.py", *GOSSIP, *COMMON, "--data", data, "--run-dir", run_dir,
              "--steps", UNREACHED, *extra)
    wait_until(lambda: len(logged_steps(rank_dir(run_dir, ranks - 1) / "metrics.jsonl")) >= 8, job, "8 steps")
    return run_dir, job


def resume_gossip(directory, name, ranks, run_dir, target):
    """Resume to `target` steps; (exit status, whether every island logged steps 1..target once)."""
    resumed = Job(directory, f"{name}-resumed", ranks, "train_gossip.py", "--resume", run_dir, "--steps", target)
    status = resumed.wait()
    once = all(logged_steps(rank_dir(run_dir, r) / "metrics.jsonl") == list(range(1, target + 1))
               for r in range(ranks))
    return status, once, resumed.output()[-2000:]


def gossip_stopped(directory, data, signum=signal.SIGINT, to_rank=None, ranks=2, resume=True):
    """SIGINT or SIGTERM to mpiexec (which passes it to every rank) or to one rank only: every island
    stops after the same round and saves it. Lost: nothing (the step under way is finished and saved)."""
    name = f"gossip-{signal.Signals(signum).name.lower()}"
    run_dir, job = gossip_job(directory, name, ranks, data)
    os.kill(job.process.pid if to_rank is None else job.rank_pid(to_rank), signum)
    status, seconds = ended_after(job, time.perf_counter())
    islands = island_ranks(run_dir)
    saved = [island_step(run_dir, r) for r in islands]
    logged = [max(logged_steps(rank_dir(run_dir, r) / "metrics.jsonl")) for r in islands]
    result = {"case": f"gossip, {ranks} islands: {signal.Signals(signum).name} to "
                      + ("mpiexec" if to_rank is None else f"rank {to_rank}"),
              "exit_status": status, "seconds_to_exit": seconds, "islands_saved": saved,
              "steps_lost": max(a - b for a, b in zip(logged, saved)) if None not in saved else None,
              "work_redone": "none", "resume_printed": f"--resume {run_dir}" in job.output()}
    if resume and None not in saved and len(set(saved)) == 1:
        result["resumed_status"], result["steps_logged_once"], result["resumed_output"] = resume_gossip(
            directory, name, ranks, run_dir, saved[0] + MORE)
    return result


def gossip_island_killed(directory, data, ranks=3, killed=1):
    """kill -9 of one island. MPICH ends the whole job (peers cannot go on without it, see docs/cluster.md);
    lost: each island's steps since its own last checkpoint, redone by `--resume`."""
    run_dir, job = gossip_job(directory, "gossip-killed", ranks, data, "--checkpoint-every", "3")
    wait_until(lambda: all((rank_dir(run_dir, r) / "checkpoints" / "latest").is_file() for r in range(ranks)),
               job, "a checkpoint of every island")
    os.kill(job.rank_pid(killed), signal.SIGKILL)
    status, seconds = ended_after(job, time.perf_counter())
    saved = [island_step(run_dir, r) for r in range(ranks)]
    logged = [max(logged_steps(rank_dir(run_dir, r) / "metrics.jsonl")) for r in range(ranks)]
    target = max(logged) + MORE
    resumed_status, once, output = resume_gossip(directory, "gossip-killed", ranks, run_dir, target)
    return {"case": f"gossip, {ranks} islands: island {killed} killed", "exit_status": status,
            "seconds_to_exit": seconds, "resume_printed": f"--resume {run_dir}" in job.output(),
            "islands_saved": saved, "steps_lost": sum(a - b for a, b in zip(logged, saved)),
            "work_redone": f"{sum(a - b for a, b in zip(logged, saved))} island steps",
            "resumed_status": resumed_status, "steps_logged_once": once, "resumed_output": output}
