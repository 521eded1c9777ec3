"""A zero-order RNN (LSTM, DNC or MinGRU on a sequence task) trained by CD-RGE or FDRAS (zorn/rge/trainer.py)
as a gossip island (the interface of training/mingru/island.py). Losses are in bits per predicted token.

The flat vector a tournament moves is the float32 parameters; the optimiser state is none for SGD and
the optimiser's arrays and scalars for momentum and Adam. Validation scores the unperturbed model on
the run's held-out samples (zorn/validation.py): longer samples than any trained on for synthetic
tasks, the val split for char_lm.

Islands share the initialisation (--seed); each draws its own task batches and probe directions
(keyed by `data_seed`, so island 0 trains as bin/train_rge.py would).
"""

from dataclasses import asdict, dataclass, replace

import numpy as np

from eggnog.kernels.core.placement import to_host
from eggnog.runtime.checkpoint import load_checkpoint, save_checkpoint
from eggnog.runtime.errors import BadInput
from eggnog.runtime.rundir import check_resume
from eggnog.training.gossip.fields import GossipFields
from eggnog.training.optimizers import checkpoint_arrays, state_from_checkpoint
from eggnog.training.run.config import flag
from eggnog.zorn.rge.memory import check_rge_fits, with_probe_batch
from eggnog.zorn.rge.run import RESUME_FIXED, RgeRunConfig, build_model, build_task
from eggnog.zorn.rge.trainer import RgeTrainer
from eggnog.zorn.validation import Validation


class RgeIsland:
    trainer_name = "rge"

    def __init__(self, cfg, world, backend, corpus, data_seed):
        if world.size != 1:
            raise ValueError("an island trains alone: give it a world of one process (World.alone())")
        self.model = build_model(cfg)
        cfg = with_probe_batch(cfg, self.model.n_params, backend.name)
        self.cfg, self.world, self.backend, self.data_seed = cfg, world, backend, data_seed
        self.memory_line = check_rge_fits(cfg, self.model, backend)
        self.task = build_task(replace(cfg, seed=data_seed), corpus)
        self.validation = Validation(cfg, corpus)
        self.step, self.best_val = 0, None
        self.load(self.model.init_params(cfg.seed))

    @property
    def n_params(self):
        return self.model.n_params

    def describe(self):
        return f"{self.trainer_name} island: {self.cfg.solver}, {self.cfg.probes} probes, {self.cfg.optimizer}"

    def train_step(self):
        self.rge.step = self.step  # an island's own counter (a merge or a restore may set it)
        loss = self.rge.train_step(self.task.batch(self.step, self.cfg.batch_size))
        self.step += 1
        return loss

    def parameters(self):
        return self.rge.host_params().astype(np.float32)

    def optimizer_state(self):
        if self.rge.optimizer is None:  # plain SGD keeps no state
            return {}, {}
        arrays, scalars = self.rge.optimizer.state()
        return {k: np.array(to_host(v), dtype=np.float32, copy=True) for k, v in arrays.items()}, dict(scalars)

    def load(self, params, arrays=None, scalars=None):
        """A trainer over `params` with the optimiser state given (None: fresh); the step stays."""
        self.rge = RgeTrainer(self.model, self.cfg, self.backend, np.array(params, dtype=np.float32), self.data_seed,
                              self.step, self.world)
        if arrays and self.rge.optimizer is not None:
            self.rge.optimizer.load_state(arrays, scalars)

    def validate(self):
        val = self.validation.score(self.model, self.backend, self.parameters(), self.world)["val_loss"]
        if self.best_val is None or val < self.best_val:
            self.best_val = val  # stored in the checkpoints' metadata
        return val

    def save(self, directory, name, meta):
        arrays, scalars = checkpoint_arrays(self.rge.optimizer) if self.rge.optimizer is not None else ({}, {})
        record = {"model": self.cfg.model, "trainer": self.trainer_name, "config": asdict(self.cfg),
                  "optimizer_state": scalars, "best_val_bpb": self.best_val, **meta}
        return save_checkpoint(directory, self.step, {"params": self.parameters(), **arrays}, record, name=name)

    def _read(self, path):
        arrays, record = load_checkpoint(path)
        meta = record.get("meta", {})
        if meta.get("trainer") != self.trainer_name or meta.get("model") != self.cfg.model:
            raise BadInput(f"checkpoint {str(path)!r} holds a {meta.get('model')!r} model from "
                           f"{meta.get('trainer')!r} training, not a {self.cfg.model!r} zero-order run")
        if arrays["params"].size != self.n_params:
            raise BadInput(f"checkpoint {str(path)!r} does not match this model ({arrays['params'].size:,} "
                           f"parameters, expected {self.n_params:,})")
        return arrays, record

    def restore(self, path):
        arrays, record = self._read(path)
        meta = record["meta"]
        check_resume({**asdict(type(self.cfg)()), **meta.get("config", {})}, asdict(self.cfg), RESUME_FIXED)
        self.load(arrays["params"], state_from_checkpoint(arrays), meta.get("optimizer_state"))
        self.step, self.best_val = int(record["step"]), meta.get("best_val_bpb")
        return meta

    def checkpoint_parameters(self, path):
        arrays, record = self._read(path)
        return np.asarray(arrays["params"], dtype=np.float32), record["meta"]


@dataclass(frozen=True)
class GossipRgeRunConfig(GossipFields, RgeRunConfig):
    probes: int = flag(32, "Probes per step of each island.")
    validate_every: int = flag(25, "Steps between validations (the loss on the held-out samples).",
                               changeable=True)

    def check(self, ranks=1):
        if self.solver == "bptt":
            raise BadInput("--trainer rge trains without backpropagation: choose --solver cdrge or fdras "
                           "(or --trainer bptt)")
        if self.validate_every < 1:
            raise BadInput(f"--validate-every must be positive, got {self.validate_every}")
        if self.curriculum_max is not None or self.lr_search is not None:
            raise BadInput("gossip islands train at fixed lengths and a fixed rate: --curriculum-max and --lr-search "
                           "belong to bin/train_rge.py")
        super().check(ranks)

    def describe(self, run):
        return RgeRunConfig.describe(self, run.island) + [f"each island: {run.island.describe()}",
                                                          self.tournaments_line()]
