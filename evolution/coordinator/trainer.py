"""`bin/train_es.py --mode coordinator`: the coordinator (rank 0 over MPI, or this one process over
TCP) and, over MPI, the workers on the other ranks, over the same run directory, checkpoints and
resume as the synchronous trainer (whose checkpoints it reads, and which reads its own)."""

import os
from dataclasses import asdict
from pathlib import Path

import numpy as np

from eggnog.evolution.coordinator.coordinator import Coordinator, history_from
from eggnog.evolution.coordinator.mpi import MpiCoordinatorLink, MpiWorkerLink
from eggnog.evolution.coordinator.worker import Worker
from eggnog.evolution.eggroll import snapshot_bytes
from eggnog.evolution.es_trainer import EsRunConfig, optimizer_state_of, read_es_checkpoint, val_sample
from eggnog.kernels.core.backend import device_free_bytes
from eggnog.runtime.auth import config_hash, token_key
from eggnog.runtime.files import write_atomic
from eggnog.runtime.rundir import JsonLog
from eggnog.runtime.secure_socket import derive_keys

RUN_ID_FILE = "run_id"


def tcp_link(cfg, corpus, socket, keys, run_dir):
    """The coordinator's TCP link on a bound `socket`: it welcomes workers with `cfg` and admits those whose
    configuration and corpus hash like this one's; joins, losses and refusals go to run_dir/events.jsonl."""
    from eggnog.evolution.coordinator.tcp import TcpCoordinatorLink

    welcome = {"model": cfg.model_name, "config": asdict(cfg)}
    return TcpCoordinatorLink(socket, keys, welcome, config_hash(cfg, corpus), cfg.heartbeat_timeout,
                              run_id(run_dir), JsonLog(Path(run_dir) / "events.jsonl"))


def run_id(run_dir):
    """The run's id (16 bytes): drawn at its first start and kept in run_dir/run_id, so a resumed
    coordinator keeps it (its workers' replicas stay of use) and another run's messages are refused."""
    path = Path(run_dir) / RUN_ID_FILE
    try:
        text = path.read_text().strip()
        if len(text) == 32 and all(c in "0123456789abcdef" for c in text):
            return bytes.fromhex(text)
        print(f"coordinator: {path} is not 32 hex digits; drawing a new run id", flush=True)
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as e:
        print(f"coordinator: cannot read {path} ({e}); drawing a new run id", flush=True)
    value = os.urandom(16)
    write_atomic(path, (value.hex() + "\n").encode())
    return value


class CoordinatedEsTrainer:
    def __init__(self, cfg: EsRunConfig, world, backend, corpus):
        cfg.check(world.size)
        self.cfg, self.world, self.backend, self.corpus = cfg, world, backend, corpus
        self.model = cfg.build_model()
        self.members = cfg.population_chunk
        self.val_sample = val_sample(cfg, corpus)
        self.memory_line = cfg.memory_line(self.model, self.members, device_free_bytes(backend))
        self.step, self.best_val, self.history, self.optimizer_state, self.latest = 0, None, {}, None, None
        # Rank 0 holds every member's states and no model; workers hold the parameters.
        self.params = None if world.is_root else self.model.init_params(cfg.seed)
        self.states = np.zeros((cfg.population, *self.model.state_dims), np.int8) if world.is_root else None
        self.socket = None
        if cfg.transport == "tcp":  # the token and the port first: a refusal writes nothing
            from eggnog.evolution.coordinator.messages import run_shape
            from eggnog.evolution.coordinator.tcp import bind

            self.keys = derive_keys(token_key(cfg.token_file))
            self.socket = bind(cfg.listen, self.keys, run_shape(cfg, self.model).max_message_bytes())

    def restore(self, path):
        arrays, record = read_es_checkpoint(path, self.cfg, self.model)
        self.step, self.best_val = record["step"], record["meta"].get("best_val_bpb")
        if self.world.is_root:
            self.states = np.ascontiguousarray(arrays["states"])
            self.history = history_from(arrays)
            self.latest = (self.step, snapshot_bytes(self.cfg, self.model, arrays["params"],
                                                     optimizer_state_of(arrays)))
        else:
            self.params, self.optimizer_state = arrays["params"], optimizer_state_of(arrays)

    def coordinator_link(self, run_dir):
        if self.socket is None:
            return MpiCoordinatorLink(self.world)
        return tcp_link(self.cfg, self.corpus, self.socket, self.keys, run_dir)

    def run(self, run_dir):
        """Every rank leaves through the closing barrier, also when the coordinator fails (it stops
        the workers first), so the error surfaces on rank 0 instead of a hang."""
        seconds, val, totals, status = None, None, None, 0
        try:
            if self.world.is_root:
                link = self.coordinator_link(run_dir)
                coordinator = Coordinator(self.cfg, self.world, link, self.step, self.states, self.history,
                                          self.best_val, self.val_sample, self.latest)
                try:
                    seconds = coordinator.run(run_dir)
                finally:
                    link.close()
                self.best_val, self.step = coordinator.best_val, coordinator.step
                val = getattr(coordinator, "record", {}).get("val_bpb")
                totals, status = coordinator.totals, coordinator.status
            else:
                status = Worker(self.cfg, MpiWorkerLink(self.world), self.backend, self.corpus, self.model,
                                self.params, self.step, self.val_sample, self.optimizer_state).run()
        finally:
            self.world.barrier(quiet=True)
        if status:  # a stop signal: every rank leaves with its status, the step's checkpoint written
            raise SystemExit(status)
        return {"steps": self.step, "val_bpb": val, "best_val_bpb": self.best_val, "elapsed_s": seconds,
                "coordinator": totals}
