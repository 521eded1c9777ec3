"""The integer EGG trained by EGGROLL (evolution/es_trainer.py) as a gossip island (the interface of
training/mingru/island.py): one EGGROLL step per optimiser step, its whole population on the island's own
process.

The flat vector a tournament moves is the int8 weights as float32; the optimiser state is nothing for
--optimizer ztest and AdamW's float32 m, v and accumulator for --optimizer adamw. A blended vector
comes back to int8 by `to_int8`: np.rint (halves to the even integer, so that repeated half-way blends
do not drift outward as rounding halves away from zero would), clipped to [-127, 127] (the weights'
range). The island keeps its own members' hidden states through merges (they follow its own data),
and its own adaptive-noise overlay (`--adaptive-noise`).

Islands share the initialisation (--seed); each reads the training streams from its own offset and
draws its own perturbations (both keyed by `data_seed`, so island 0 trains as bin/train_es.py would).
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eggnog.evolution.eggroll import OPTIMIZER_ARRAYS, OVERLAY_ARRAY, IntEggroll
from eggnog.evolution.es_trainer import (
    EsRunConfig,
    EsTrainer,
    optimizer_state_of,
    read_es_checkpoint,
    write_es_checkpoint,
)
from eggnog.evolution.fitness import bits_per_byte
from eggnog.kernels.core.placement import to_host
from eggnog.runtime.checkpoint import save_checkpoint
from eggnog.runtime.errors import BadInput
from eggnog.training.gossip.fields import GossipFields
from eggnog.training.run.config import flag

INT8_LIMIT = 127


def to_int8(params):
    """A float vector as EGG weights: rounded half to even, clipped to [-127, 127]."""
    return np.clip(np.rint(np.asarray(params, dtype=np.float32)), -INT8_LIMIT, INT8_LIMIT).astype(np.int8)


class EggIsland:
    trainer_name = "egg"

    def __init__(self, cfg, world, backend, corpus, data_seed):
        if world.size != 1:
            raise ValueError("an island trains alone: give it a world of one process (World.alone())")
        self.trainer = EsTrainer(cfg, world, backend, corpus)
        self.cfg, self.model, self.backend = cfg, self.trainer.model, backend
        self.noise_seed, self.data_offset = data_seed, data_seed - cfg.seed
        self.trainer.strategy = self.strategy(self.model.init_params(cfg.seed))

    def strategy(self, params, step=0, optimizer_state=None):
        return IntEggroll(self.model, self.cfg, self.backend, to_int8(params), self.noise_seed, step=step,
                          optimizer_state=optimizer_state)

    @property
    def step(self):
        return self.trainer.strategy.step

    @property
    def n_params(self):
        return self.model.n_params

    def describe(self):
        return f"{self.trainer_name} island: {self.cfg.optimizer}"

    def train_step(self):
        t, cfg = self.trainer, self.cfg
        windows = t.streams.member_batch(t.strategy.step + self.data_offset, 0, cfg.population, cfg.group_size)
        scores = t.strategy.evaluate(windows, t.states)
        fitness, total = t.exchange(scores)
        t.strategy.update(fitness)
        return bits_per_byte(total, cfg.population * cfg.tokens_per_update)

    def parameters(self):
        return self.trainer.strategy.host_params().astype(np.float32)

    def optimizer_state(self):
        if self.cfg.optimizer != "adamw":
            return {}, {}
        state = self.trainer.strategy.host_optimizer_state()
        # before its first update AdamW has no state yet: zeros are what it would start from
        return {name: np.array(state.get(name, np.zeros(self.n_params)), dtype=np.float32)
                for name in OPTIMIZER_ARRAYS}, {}

    def load(self, params, arrays=None, scalars=None):
        """The weights `params` (rounded to int8), with the AdamW state given (None: fresh); the step,
        the members' hidden states and the adaptive-noise overlay stay the island's own."""
        own = self.trainer.strategy.host_optimizer_state()
        kept = {OVERLAY_ARRAY: own[OVERLAY_ARRAY]} if OVERLAY_ARRAY in own else {}
        self.trainer.strategy = self.strategy(params, self.step, optimizer_state={**(arrays or {}), **kept})

    def validate(self):
        val = self.trainer.validate()
        if self.trainer.best_val is None or val < self.trainer.best_val:
            self.trainer.best_val = val  # stored in the checkpoints' metadata
        return val

    def save(self, directory, name, meta):
        t = self.trainer
        states = np.ascontiguousarray(to_host(t.states).transpose(1, 0, 2))  # stored as (members, layers, dim)

        def write(_, step, arrays, record):
            return save_checkpoint(directory, step, arrays, {**record, **meta}, name=name)

        return write_es_checkpoint(Path(directory).parent, self.cfg, t.strategy.step, t.strategy.host_params(), states,
                                   t.best_val, extra=t.strategy.host_optimizer_state(), write=write)

    def restore(self, path):
        arrays, record = read_es_checkpoint(path, self.cfg, self.model)
        t = self.trainer
        t.strategy = self.strategy(arrays["params"], record["step"], optimizer_state_of(arrays))
        t.states = self.backend.to_device(np.ascontiguousarray(arrays["states"].transpose(1, 0, 2)))
        t.best_val = record["meta"].get("best_val_bpb")
        return record["meta"]

    def checkpoint_parameters(self, path):
        arrays, record = read_es_checkpoint(path, self.cfg, self.model)
        return arrays["params"].astype(np.float32), record["meta"]


@dataclass(frozen=True)
class GossipEggRunConfig(GossipFields, EsRunConfig):
    """Islands training the integer EGG by EGGROLL (`--trainer egg`), each with a population of its own
    on its own process."""

    population: int = flag(512, "Population of each island (all of it evaluated on the island's process).")

    def check(self, ranks=1):
        if self.mode != "sync":
            raise BadInput(f"--mode {self.mode} does not apply to a gossip run: each island evaluates its whole "
                           "population itself (--mode sync)")
        super().check(ranks)

    def describe(self, run):
        cfg = self
        return [f"EGG {cfg.depth}x{cfg.dim}: {run.island.n_params:,} int8 parameters",
                f"each island: population {cfg.population} (groups of {cfg.group_size}), {cfg.tokens_per_update} "
                f"bytes per member per step; {run.island.describe()}",
                self.tournaments_line()]
