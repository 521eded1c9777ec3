"""A training loss that is finite but has grown far past where it started stops the run, like a
non-finite one: the mean of the last WINDOW steps above FACTOR times the loss of the first step of
this process (a resumed run starts its count again)."""

import math
from collections import deque
from pathlib import Path

from eggnog.runtime.errors import BadInput

FACTOR = 4.0
WINDOW = 10


class DivergenceGuard:
    def __init__(self, run_dir, hint, factor=FACTOR, window=WINDOW):
        self.run_dir, self.hint, self.factor = Path(run_dir), hint, factor
        self.start, self.recent = None, deque(maxlen=window)

    def check(self, loss, step):
        """Raise BadInput when `loss` (this step's, logged after `step` steps) says the run diverged."""
        if math.isfinite(loss):
            self.start = loss if self.start is None else self.start
            self.recent.append(loss)
            start, now = self.start, sum(self.recent) / len(self.recent)
            if len(self.recent) < self.recent.maxlen or now <= self.factor * start:
                return
            what = (f"the training loss diverged: {now:.4g} on average over the last {len(self.recent)} steps, more "
                    f"than {self.factor:g} times its start ({start:.4g})")
        else:
            what = f"the training loss became {loss}"
        latest = self.run_dir / "checkpoints" / "latest"
        saved = (f"the last checkpoint, {latest.resolve().name}, is unchanged" if latest.exists()
                 else "nothing was saved")
        raise BadInput(f"{what} at step {step}; {self.hint} ({saved})")
