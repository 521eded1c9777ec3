"""The loop every trainer of a language model runs: steps until the budget, each timed by phase and
logged as one line of metrics.jsonl, validated and checkpointed on schedule (and whenever validation
improves, so `best` always points at a checkpoint), with a progress bar on rank 0. SIGINT or SIGTERM
stops it after the current step, on every rank at the same step, with a checkpoint."""

import time

from eggnog.runtime.checkpoint import prune_checkpoints
from eggnog.runtime.divergence import DivergenceGuard
from eggnog.runtime.progress import progress
from eggnog.runtime.rundir import resumed_metrics_log
from eggnog.runtime.step_clock import StepClock, rounded
from eggnog.runtime.stop_signals import StopSignals, stop_if_signalled
from eggnog.training.run_plots import PlotRefresh


def run_steps(trainer, run_dir, unit):
    """Run `trainer` from its current step to `trainer.cfg.steps`. The trainer gives `cfg`
    (steps, validate_every, checkpoint_every), `world`, `backend`, `best_val`, `steps_done()`,
    `loop_step(clock)` -> (the step's own metrics, tokens it evaluated over all ranks),
    `validate()` -> bits/byte and `save(run_dir, best)`. Returns (last val_bpb, seconds)."""
    cfg = trainer.cfg
    log, elapsed = resumed_metrics_log(trainer.world, run_dir, trainer.steps_done())
    started = time.perf_counter() - elapsed  # elapsed_s goes on from the checkpoint's
    bar = progress(cfg.steps, trainer.world, unit, initial=trainer.steps_done())
    clock = StepClock(trainer.backend.synchronize)
    guard = DivergenceGuard(run_dir, trainer.cfg.divergence_hint)
    plots = PlotRefresh(run_dir, trainer.world.is_root and cfg.plots)
    val = None
    try:
        with StopSignals() as signals:
            while trainer.steps_done() < cfg.steps:
                clock.start()
                record, tokens = trainer.loop_step(clock)
                split = clock.split()
                record.update(tokens_per_s=round(tokens / split["step_s"], 1), **rounded(split),
                              elapsed_s=round(time.perf_counter() - started, 3))
                done = trainer.steps_done()
                improved = False
                if done % cfg.validate_every == 0 or done == cfg.steps:
                    val = trainer.validate()
                    record["val_bpb"] = round(val, 5)
                    improved = trainer.best_val is None or val < trainer.best_val
                    if improved:
                        trainer.best_val = val
                    plots.validated(last=done == cfg.steps)
                log.write(**record)
                guard.check(record["train_bpb"], done)  # before a checkpoint could keep a diverged state
                bar.update(1)
                bar.set_postfix(train=record["train_bpb"], **({"val": round(val, 4)} if val is not None else {}))
                saved = improved or done % cfg.checkpoint_every == 0 or done == cfg.steps
                if saved:
                    trainer.save(run_dir, best=improved)
                    if trainer.world.is_root:
                        prune_checkpoints(run_dir / "checkpoints", cfg.keep_checkpoints)
                stop_if_signalled(signals, trainer.world, done, run_dir,
                                  None if saved else lambda: trainer.save(run_dir, best=False))
    finally:
        bar.close()
        log.close()
    return val, time.perf_counter() - started
