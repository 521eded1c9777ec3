"""Where the seconds of a training step go: evaluation (forward passes of members, probes or the
batch, with backward for BPTT), exchange (collectives between ranks) and update (the optimiser or
the parameter update). Every reading synchronises the device first, so kernels still running are
charged to the phase that launched them. Work outside the phases (reading data, bookkeeping) counts
towards the step only, so the phases sum to at most the step."""

import time
from contextlib import contextmanager, nullcontext

PHASES = ("eval", "exchange", "update")


class StepClock:
    def __init__(self, synchronize=lambda: None):
        self.synchronize = synchronize
        self.start()

    def start(self):
        """Begin a step."""
        self.synchronize()
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.began = time.perf_counter()

    @contextmanager
    def phase(self, name):
        """Time the block as part of phase `name` (a phase may be entered more than once per step)."""
        self.synchronize()
        tick = time.perf_counter()
        yield
        self.synchronize()
        self.seconds[name] += time.perf_counter() - tick

    def split(self):
        """Seconds since `start`: {"step_s", "eval_s", "exchange_s", "update_s"}."""
        self.synchronize()
        step = time.perf_counter() - self.began
        return {"step_s": step, **{f"{name}_s": self.seconds[name] for name in PHASES}}


class _Untimed:
    """The clock of code run outside a training loop: phases cost nothing."""

    def phase(self, name):
        return nullcontext()


UNTIMED = _Untimed()


def rounded(split, digits=6):
    return {k: round(v, digits) for k, v in split.items()}
