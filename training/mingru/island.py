"""An island: one model trained by a local trainer on a world of its own process, as population
methods (gossip tournaments, training/gossip/mpi.py) see it. What they need of a trainer:

    step                         optimiser steps taken
    train_step() -> loss         one optimiser step; its mean training loss in bits/byte
    parameters() -> float32[n]   a host copy of the flat vector where gradients are taken
    optimizer_state()            ({name: host float32 array}, {name: JSON scalar}) of the optimiser
    load(params, arrays, scalars)  put a model back (arrays None: a fresh optimiser at params)
    validate() -> bits/byte      on the validation sample
    save(directory, name, meta)  a checkpoint file (with `latest` beside it); returns its path
    restore(path) -> meta        continue from a checkpoint; returns the metadata stored by save
    checkpoint_parameters(path)  (parameters, metadata) of a checkpoint of a compatible island

More in docs/internals.md (training/mingru/island.py)."""

from dataclasses import dataclass

import numpy as np

from eggnog.kernels.core.placement import to_host
from eggnog.runtime.errors import BadInput
from eggnog.training.gossip.fields import GossipFields
from eggnog.training.mingru.bptt import BpttRunConfig, BpttTrainer
from eggnog.training.mingru.run import describe, load_mingru, run_meta, save_mingru
from eggnog.training.run.config import flag


def island_data_seed(seed, rank):
    """The training-data seed of island `rank` (rank 0 reads the data a BPTT run with --seed would)."""
    return seed + 7919 * rank


class BpttIsland:
    trainer_name = "bptt"

    def __init__(self, cfg, world, backend, corpus, data_seed):
        if world.size != 1:
            raise ValueError("an island trains alone: give it a world of one process (World.alone())")
        self.trainer = BpttTrainer(cfg, world, backend, corpus, data_seed=data_seed)
        self.cfg, self.model = cfg, self.trainer.model

    @property
    def step(self):
        return self.trainer.step

    @property
    def n_params(self):
        return self.model.n_params

    def describe(self):
        return f"{self.trainer_name} island: {self.cfg.optimizer}, lr {self.cfg.lr}"

    def train_step(self):
        return self.trainer.train_step()

    def parameters(self):
        return np.array(to_host(self.trainer.optimizer.train_params()), dtype=np.float32, copy=True)

    def optimizer_state(self):
        arrays, scalars = self.trainer.optimizer.state()
        return {k: np.array(v, dtype=np.float32, copy=True) for k, v in arrays.items()}, dict(scalars)

    def load(self, params, arrays=None, scalars=None):
        """A new optimiser over `params`, with the state given (None: fresh, as at step 0)."""
        trainer = self.trainer
        optimizer = self.cfg.make_optimizer(trainer.ops.to_device(np.array(params, dtype=np.float32, copy=True)))
        if arrays is not None:
            optimizer.load_state(arrays, scalars)
        trainer.optimizer = optimizer

    def validate(self):
        val = self.trainer.validate()
        if self.trainer.best_val is None or val < self.trainer.best_val:
            self.trainer.best_val = val  # stored in the checkpoints' metadata
        return val

    def save(self, directory, name, meta):
        t = self.trainer
        record = {**run_meta(self.cfg, self.trainer_name, t.best_val),
                  "data_position": {"chunk_step": t.step * self.cfg.grad_accum}, **meta}
        return save_mingru(directory, t.step, t.optimizer, record, {"states": t._host_states()}, name=name)

    def restore(self, path):
        return self.trainer.restore(path)["meta"]

    def checkpoint_parameters(self, path):
        arrays, record = load_mingru(path, self.trainer_name)
        params = np.asarray(arrays["train_params"], dtype=np.float32)
        if params.size != self.n_params:
            raise BadInput(f"checkpoint {str(path)!r} does not match this model ({params.size:,} parameters, "
                           f"expected {self.n_params:,})")
        return params, record["meta"]


@dataclass(frozen=True)
class GossipRunConfig(GossipFields, BpttRunConfig):
    """Islands training the MinGRU LM by truncated BPTT (`--trainer bptt`)."""

    batch_size: int = flag(8, "Samples per chunk step of each island.")

    def describe(self, run):
        return [describe(self, run.island.model),
                f"each island: batch {self.batch_size} x {self.chunk_size} bytes per chunk, {self.context_chunks} "
                f"chunks per sample, {self.grad_accum} chunk(s) per step; {run.island.describe()}",
                self.tournaments_line()]
