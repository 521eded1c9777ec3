"""The loop every trainer of a language model runs: steps until the budget, each timed by phase and
logged as one line of metrics.jsonl, validated and checkpointed on schedule (and whenever validation
improves, so `best` always points at a checkpoint), with a progress bar on rank 0."""

import time

from eggnog.runtime.progress import progress
from eggnog.runtime.rundir import metrics_log
from eggnog.runtime.step_clock import StepClock, rounded


def run_steps(trainer, run_dir, unit):
    """Run `trainer` from its current step to `trainer.cfg.steps`. The trainer gives `cfg`
    (steps, validate_every, checkpoint_every), `world`, `backend`, `best_val`, `steps_done()`,
    `loop_step(clock)` -> (the step's own metrics, tokens it evaluated over all ranks),
    `validate()` -> bits/byte and `save(run_dir, best)`. Returns (last val_bpb, seconds)."""
    cfg, log = trainer.cfg, metrics_log(trainer.world, run_dir)
    started = time.perf_counter()
    bar = progress(cfg.steps, trainer.world, unit, initial=trainer.steps_done())
    clock = StepClock(trainer.backend.synchronize)
    val = None
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
        log.write(**record)
        bar.update(1)
        bar.set_postfix(train=record["train_bpb"], val=val)
        if improved or done % cfg.checkpoint_every == 0 or done == cfg.steps:
            trainer.save(run_dir, best=improved)
    bar.close()
    log.close()
    return val, time.perf_counter() - started
