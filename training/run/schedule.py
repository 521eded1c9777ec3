"""One schedule for every trainer's run (training/run/loop.py, the coordinator of
evolution/coordinator/coordinator.py): the flags saying when a run validates, checkpoints and redraws its plots
(`RunSchedule`, mixed into the run configs), and the rules that read them after each step. (Its
--log says where else the metrics go: runtime/loggers.py.)

After `done` steps a run validates every --validate-every steps and at its last step; it saves
every --checkpoint-every steps, at its last step and whenever validation improves (so `best` always
points at a checkpoint); it redraws its plots at validations and at its last step. The last step is
the step budget's, the first one that ends past --max-minutes of the run's clock, or the one a
trainer's stop condition ends the run at."""

from dataclasses import dataclass
from typing import TYPE_CHECKING

from eggnog.training.run.config import flag

PLOTS_HELP = "Rank 0 redraws RUN/plots/*.png (bin/plot.py) at validations, at most once a minute, and at the end."


@dataclass(frozen=True)
class RunSchedule:
    """The schedule's flags; put before a config's dataclass bases, so these flags follow theirs. The
    config declares `steps` itself (its help differs between trainers)."""

    if TYPE_CHECKING:
        steps: int = 0  # each config declares its own (the help differs between trainers)

    validate_every: int = flag(25, "Steps between validations.", changeable=True)
    checkpoint_every: int = flag(100, "Steps between checkpoints.", changeable=True)
    plots: bool = flag(True, PLOTS_HELP[:-1] + " (gossip and coordinator runs: with bin/plot.py).", changeable=True)
    keep_checkpoints: int = flag(5, "Step checkpoints kept besides those `latest` and `best` point at (the newest K).",
                                 changeable=True)
    log: str = flag("none", "Also send every metrics line, the config and the plots at the end to wandb, tensorboard "
                    "or both (wandb,tensorboard): RUN/wandb/, RUN/tb/; metrics.jsonl stays the record.",
                    changeable=True, metavar="<wandb,tensorboard>")
    max_minutes: float = flag(0.0, "Also end the run after the first step that ends past this many minutes of its "
                              "clock (elapsed_s, which goes on across resumes), validated and saved as a last step "
                              "is; 0: --steps alone.", changeable=True)

    def last_step(self, done: int, stopped: bool = False) -> bool:
        """Whether the run ends after `done` steps: its budget is spent or its stop condition (or clock) says so."""
        return done >= self.steps or stopped

    def out_of_time(self, elapsed_s: float) -> bool:
        """Whether a step that ends at `elapsed_s` seconds of the run's clock is past --max-minutes."""
        return self.max_minutes > 0 and elapsed_s >= self.max_minutes * 60

    def validation_due(self, done: int, last: bool) -> bool:
        """Whether to validate after `done` steps (--validate-every 0: never, where a config allows it)."""
        return self.validate_every > 0 and (done % self.validate_every == 0 or last)

    def checkpoint_due(self, done: int, last: bool, improved: bool = False) -> bool:
        return improved or done % self.checkpoint_every == 0 or last

    def plot_due(self, validated: bool, last: bool) -> bool:
        return validated or last


def improves(val: float, best: float | None) -> bool:
    """Whether validation score `val` (lower is better) beats `best` (None: nothing yet)."""
    return best is None or val < best
