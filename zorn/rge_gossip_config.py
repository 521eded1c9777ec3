"""The flags of a gossip run of CD-RGE islands (`bin/train_gossip.py --trainer rge`): the zero-order
trainer's model, task and estimator flags under their own names, applying to each island, plus the
gossip flags (training/gossip_fields.py). Each island takes all --probes itself, on its own process."""

from dataclasses import dataclass

from eggnog.runtime.errors import BadInput
from eggnog.training.gossip_fields import GossipFields
from eggnog.training.run_config import flag
from eggnog.zorn.rge_run import RgeRunConfig


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
