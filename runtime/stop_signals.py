"""SIGINT (Ctrl-C) and SIGTERM (what SLURM sends before a time limit) ask a training loop to stop
after its current step with a checkpoint; a second one acts at once (Python's default). Under MPI the
ranks agree on the step: the signal may reach them during different steps."""

import signal
import threading

import numpy as np

from eggnog.runtime.commands import this_program

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    def __init__(self):
        self.signum, self.previous = 0, {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():  # handlers can only be set there
            self.previous = {s: signal.signal(s, self._handle) for s in STOP_SIGNALS}
        return self

    def _handle(self, signum, frame):
        self.signum = signum
        for s, handler in self.previous.items():
            signal.signal(s, handler)

    def __exit__(self, *exc):
        for s, handler in self.previous.items():
            signal.signal(s, handler)
        self.previous = {}

    def agreed(self, world):
        """The signal every rank stops for after this step (0: go on); the same on every rank."""
        if world.size == 1:
            return self.signum
        return int(world.allgather_array(np.array([self.signum], np.int64)).max())


def exit_status(signum):
    return 128 + signum  # the shell's convention: 130 for SIGINT, 143 for SIGTERM


def exit_if_signalled(signals, world, what):
    """Where a rank was signalled, every rank exits with the signal's status, rank 0 saying `what` was
    under way (for work that leaves nothing to checkpoint)."""
    stop = signals.agreed(world)
    if stop:
        if world.is_root:
            print(f"\nstopped by {signal.Signals(stop).name} {what}", flush=True)
        raise SystemExit(exit_status(stop))


def stop_if_signalled(signals, world, step, run_dir, save):
    """After a step: where a rank was signalled, every rank calls `save()` (None: already saved) and
    exits with the signal's status, rank 0 saying where the checkpoint is and how to continue."""
    stop = signals.agreed(world)
    if not stop:
        return
    if save is not None:
        save()
    if world.is_root:
        print(f"\nstopped by {signal.Signals(stop).name} after step {step}: checkpoint {run_dir}/checkpoints/latest; "
              f"continue with: {this_program()} --resume {run_dir}", flush=True)
    raise SystemExit(exit_status(stop))
