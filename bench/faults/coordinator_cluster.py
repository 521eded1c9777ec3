"""A coordinator run over TCP on this machine, as processes to start, kill and restart: the
coordinator (bin/train_es.py --mode coordinator --transport tcp) and its workers (bin/es_worker.py).
The fault cases (bench/faults/tcp.py) drive it; `reference_params` runs the same training
synchronously in one process, the result every disturbed run must reproduce bit for bit.

Jobs are padded to `job_seconds` (a worker test hook), so a step lasts long enough for a kill to land
inside it and a worker's speed is known; the model is tiny, so the CPU is not what is measured."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from eggnog.runtime.checkpoint import load_checkpoint
from eggnog.runtime.rundir import read_jsonl

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "fault-suite-token"
RUN = dict(depth=1, dim=16, population=256, group_size=2, tokens_per_update=8, validate_every=8,
           checkpoint_every=8, val_rows=4, val_tokens=16, seed=3)
CHUNK = 4
JOB_SECONDS = 0.005  # 64 chunks a step: about 0.1 s a step on 3 workers
HEARTBEAT_S = 5.0  # a loaded machine (a test run beside other tests) delays a beat by seconds


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_flags(steps, data):
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in RUN.items()]
    return flags + [f"--steps={steps}", f"--data={data}", "--backend=cpu"]


def quiet_env(**extra):
    return {**os.environ, "NUMBA_NUM_THREADS": "1", "EGGNOG_PROGRESS": "0", "NUMBA_ENABLE_CUDASIM": "0", **extra}


def reference_params(directory, data, steps):
    """The final parameters of the synchronous trainer on the same run (one process)."""
    run_dir = Path(directory) / "reference"
    subprocess.run([sys.executable, str(ROOT / "bin" / "train_es.py"), *run_flags(steps, data), "--run-dir",
                    str(run_dir)], env=quiet_env(), check=True, capture_output=True, timeout=300)
    return load_checkpoint(run_dir)[0]["params"]


class Cluster:
    def __init__(self, directory, data, steps, heartbeat=HEARTBEAT_S, straggler_factor=2.0, job_seconds=JOB_SECONDS,
                 port=None):
        self.directory, self.data, self.steps, self.job_seconds = Path(directory), data, steps, job_seconds
        self.directory.mkdir(parents=True, exist_ok=True)
        self.run_dir, self.port = self.directory / "run", port or free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.token_file = self.directory / "token"
        self.token_file.write_text(TOKEN)
        self.heartbeat, self.straggler_factor = heartbeat, straggler_factor
        self.coordinator, self.workers, self.logs = None, [], []
        self.started = self.wall_s = None

    # ---- processes -----------------------------------------------------------------------------
    def start(self, args, name, **env):
        log = open(self.directory / f"{name}.log", "ab")
        self.logs.append(log)
        return subprocess.Popen([sys.executable, *args], stdout=log, stderr=subprocess.STDOUT, env=quiet_env(**env),
                                cwd=self.directory)

    def start_coordinator(self, resume=False):
        script = str(ROOT / "bin" / "train_es.py")
        if resume:
            args = [script, "--resume", str(self.run_dir)]
        else:
            args = [script, *run_flags(self.steps, self.data), "--run-dir", str(self.run_dir), "--mode=coordinator",
                    "--transport=tcp", f"--listen={self.address}", f"--token-file={self.token_file}",
                    f"--population-chunk={CHUNK}", f"--heartbeat-timeout={self.heartbeat}",
                    f"--straggler-factor={self.straggler_factor}"]
        self.coordinator = self.start(args, "coordinator")
        self.started = self.started or time.monotonic()
        return self.coordinator

    def start_worker(self, slowdown=1.0, data=None, token_file=None, job_seconds=None, address=None):
        args = [str(ROOT / "bin" / "es_worker.py"), "--connect", address or self.address, "--token-file",
                str(token_file or self.token_file), "--backend", "cpu", "--reconnect-timeout", "60"]
        if data is not None:
            args += ["--data", str(data)]
        worker = self.start(args, f"worker{len(self.workers)}", EGGNOG_TEST_SLOWDOWN=str(slowdown),
                            EGGNOG_TEST_JOB_SECONDS=str(job_seconds or self.job_seconds))
        self.workers.append(worker)
        return worker

    def kill(self, process):
        process.kill()  # SIGKILL: nothing of the process runs after it
        process.wait()

    def stop_all(self):
        for process in [self.coordinator, *self.workers]:
            if process is not None and process.poll() is None:
                self.kill(process)
        for log in self.logs:
            log.close()

    # ---- what the run shows --------------------------------------------------------------------
    def metrics(self):
        path = self.run_dir / "metrics.jsonl"
        return read_jsonl(path) if path.exists() else []

    def steps_done(self):
        return max((r["step"] for r in self.metrics()), default=0)

    def wait_for_step(self, step, timeout=120):
        deadline = time.monotonic() + timeout
        while self.steps_done() < step:
            if time.monotonic() > deadline or self.coordinator.poll() is not None:
                raise RuntimeError(f"the run did not reach step {step}:\n{self.log('coordinator')}")
            time.sleep(0.02)

    def finish(self, timeout=90):
        """The coordinator's exit status and the workers' (None for those killed)."""
        status = self.coordinator.wait(timeout)
        self.wall_s = time.monotonic() - self.started
        workers = [w.wait(timeout) if w.returncode is None else None for w in self.workers]
        return status, workers

    def log(self, name):
        path = self.directory / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def final_params(self):
        return load_checkpoint(self.run_dir)[0]["params"]
