"""The flags of a gossip run (bin/train_gossip.py): the island trainer's model and training flags,
under the same names and applying to each island (`GossipRunConfig`: truncated BPTT of the MinGRU,
`GossipEggRunConfig`: integer EGGROLL of the EGG; CD-RGE's is zorn/rge_gossip_config.py), plus the
tournament, checkpoint and rejuvenation flags of gruboros (`GossipFields`, training/gossip_fields.py)."""

from dataclasses import dataclass

from eggnog.evolution.es_trainer import EsRunConfig
from eggnog.runtime.errors import BadInput
from eggnog.training.bptt import BpttRunConfig
from eggnog.training.gossip_fields import GossipFields
from eggnog.training.mingru_run import describe
from eggnog.training.run_config import flag


@dataclass(frozen=True)
class GossipRunConfig(GossipFields, BpttRunConfig):
    """Islands training the MinGRU LM by truncated BPTT (`--trainer bptt`)."""

    batch_size: int = flag(8, "Samples per chunk step of each island.")

    def describe(self, run):
        return [describe(self, run.island.model),
                f"each island: batch {self.batch_size} x {self.chunk_size} bytes per chunk, {self.context_chunks} "
                f"chunks per sample, {self.grad_accum} chunk(s) per step; {run.island.describe()}",
                self.tournaments_line()]


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
