"""A gossip run over TCP on this machine, as processes to start, kill and restart: islands of
bin/train_gossip.py --transport tcp (a tiny MinGRU by BPTT on the CPU), finding each other through a
rendezvous folder, each listening on a free port of 127.0.0.1. Steps are padded to `step_seconds` (a
test hook), so a run's pace is known whatever else the machine does. The gossip fault cases
(bench/faults/gossip.py) drive it."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.faults.coordinator_cluster import TOKEN, quiet_env
from eggnog.runtime.rundir import read_jsonl

ROOT = Path(__file__).resolve().parents[2]
RUN = dict(dim=16, depth=1, chunk_size=8, context_chunks=2, batch_size=2, val_rows=4, val_tokens=16, validate_every=10,
           checkpoint_every=10, population_every=5, elites=3, keep_checkpoints=2, seed=5, gossip_mixing_rate=0.3,
           gossip_merge="mixed", catch_up_steps=0)


class GossipCluster:
    def __init__(self, directory, data, steps, step_seconds=0.05, peer_timeout=3.0, base=RUN, **flags):
        """base: the island trainer's flags (RUN: --trainer bptt); data None: a run without a corpus."""
        self.directory, self.data, self.steps, self.step_seconds = Path(directory), data, steps, step_seconds
        self.directory.mkdir(parents=True, exist_ok=True)
        self.run_dir = self.directory / "run"
        self.token_file = self.directory / "token"
        self.token_file.write_text(TOKEN)
        self.flags = {**base, "peer_timeout": peer_timeout, **flags}
        self.islands, self.logs, self.started, self.ended = {}, [], {}, {}

    def args(self, number):
        flags = [f"--{k.replace('_', '-')}={v}" for k, v in self.flags.items()]
        data = [f"--data={self.data}"] if self.data else []
        return [str(ROOT / "bin" / "train_gossip.py"), *flags, f"--steps={self.steps}", *data, "--backend=cpu",
                "--no-plots", "--transport=tcp", f"--island={number}", f"--run-dir={self.run_dir}",
                f"--rendezvous={self.run_dir / 'peers'}", "--listen=127.0.0.1:0", f"--token-file={self.token_file}"]

    def start(self, number, slowdown=1.0, **env):
        log = open(self.directory / f"island{number}.log", "ab")
        self.logs.append(log)
        hooks = {"EGGNOG_TEST_GOSSIP_STEP_SECONDS": str(self.step_seconds),
                 "EGGNOG_TEST_GOSSIP_SLOWDOWN": str(slowdown), **env}
        self.islands[number] = subprocess.Popen([sys.executable, *self.args(number)], stdout=log,
                                                stderr=subprocess.STDOUT, env=quiet_env(**hooks), cwd=self.directory)
        self.started.setdefault(number, time.monotonic())
        return self.islands[number]

    def kill(self, number, signum=signal.SIGKILL):
        process = self.islands[number]
        process.send_signal(signum)
        process.wait()
        self.ended[number] = time.monotonic()

    def stop_all(self):
        for process in self.islands.values():
            if process.poll() is None:
                process.kill()
                process.wait()
        for log in self.logs:
            log.close()

    def finish(self, numbers, timeout=240):
        """{island: exit status} of `numbers`, waiting for each."""
        statuses = {}
        for number in numbers:
            statuses[number] = self.islands[number].wait(timeout)
            self.ended.setdefault(number, time.monotonic())
        return statuses

    def wall_s(self, number):
        return round(self.ended[number] - self.started[number], 2)

    # ---- what the run shows --------------------------------------------------------------------
    def home(self, number):
        return self.run_dir / f"rank-{number:02d}"

    def step_records(self, number):
        path = self.home(number) / "metrics.jsonl"
        return read_jsonl(path) if path.exists() else []

    def step_of(self, number):
        return max((r["step"] for r in self.step_records(number)), default=0)

    def events(self, number):
        path = self.home(number) / "events.jsonl"
        return read_jsonl(path) if path.exists() else []

    def wait_until(self, condition, timeout):
        deadline = time.monotonic() + timeout
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.05)

    def wait_for_step(self, number, step, timeout=180):
        deadline = time.monotonic() + timeout
        while self.step_of(number) < step:
            if time.monotonic() > deadline or self.islands[number].poll() is not None:
                raise RuntimeError(f"island {number} did not reach step {step}:\n{self.log(number)[-3000:]}")
            time.sleep(0.05)

    def log(self, number):
        path = self.directory / f"island{number}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def address(self, number, timeout=120):
        """Where island `number` listens (read from the rendezvous folder once it has registered)."""
        path = self.run_dir / "peers" / f"island-{number:02d}.json"
        deadline = time.monotonic() + timeout
        while not path.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"island {number} never registered:\n{self.log(number)[-3000:]}")
            time.sleep(0.05)
        return json.loads(path.read_text())["address"]

