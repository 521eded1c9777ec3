"""`bin/train_es.py --mode coordinator`: rank 0 runs the coordinator, the other ranks workers, over
the same run directory, checkpoints and resume as the synchronous trainer (whose checkpoints it
reads, and which reads its own)."""

import numpy as np

from eggnog.evolution.coordinator import Coordinator, history_from
from eggnog.evolution.coordinator_worker import Worker
from eggnog.evolution.es_trainer import EsRunConfig, optimizer_state_of, read_es_checkpoint, val_sample
from eggnog.kernels.core.backend import device_free_bytes
from eggnog.runtime.checkpoint import resolve_checkpoint


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

    def restore(self, path):
        arrays, record = read_es_checkpoint(path, self.cfg, self.model)
        self.step, self.best_val = record["step"], record["meta"].get("best_val_bpb")
        if self.world.is_root:
            self.states = np.ascontiguousarray(arrays["states"])
            self.history = history_from(arrays)
            self.latest = (self.step, resolve_checkpoint(path).resolve())
        else:
            self.params, self.optimizer_state = arrays["params"], optimizer_state_of(arrays)

    def run(self, run_dir):
        """Every rank leaves through the closing barrier, also when the coordinator fails (it stops
        the workers first), so the error surfaces on rank 0 instead of a hang."""
        seconds, val, totals, status = None, None, None, 0
        try:
            if self.world.is_root:
                coordinator = Coordinator(self.cfg, self.world, self.step, self.states, self.history,
                                          self.best_val, self.val_sample, self.latest)
                seconds = coordinator.run(run_dir)
                self.best_val, self.step = coordinator.best_val, coordinator.step
                val = getattr(coordinator, "record", {}).get("val_bpb")
                totals, status = coordinator.totals, coordinator.status
            else:
                status = Worker(self.cfg, self.world, self.backend, self.corpus, self.model, self.params, self.step,
                                self.val_sample, self.optimizer_state).run()
        finally:
            self.world.barrier(quiet=True)
        if status:  # a stop signal: every rank leaves with its status, the step's checkpoint written
            raise SystemExit(status)
        return {"steps": self.cfg.steps, "val_bpb": val, "best_val_bpb": self.best_val, "elapsed_s": seconds,
                "coordinator": totals}
