"""The loop every trainer of a language model runs: steps until the budget (of steps or of
minutes, or the trainer's stop condition), each timed by phase and logged as one line of
metrics.jsonl, validated, checkpointed and plotted as training/run/schedule.py says, with a progress
bar on rank 0. SIGINT or SIGTERM stops it after the current step, on every rank at the same step, with a
checkpoint."""

import time

from eggnog.kernels.core.first_compile import first_step_done
from eggnog.runtime.checkpoint import prune_checkpoints
from eggnog.runtime.divergence import DivergenceGuard
from eggnog.runtime.progress import forget_rate, progress
from eggnog.runtime.rundir import resumed_metrics_log
from eggnog.runtime.step_clock import StepClock, rounded
from eggnog.runtime.stop_signals import StopSignals, stop_if_signalled
from eggnog.training.run.plots import PlotRefresh
from eggnog.training.run.schedule import improves


def timing_fields(split, tokens, elapsed_s):
    """A step's timing fields: throughput, where its seconds went, the run's clock."""
    return dict(tokens_per_s=round(tokens / split["step_s"], 1), **rounded(split), elapsed_s=round(elapsed_s, 3))


def logged_scores(record, scores, best_key):
    """Put a validation's scores in the step's record; returns the score `best` follows. A float is
    bits/byte; a dict holds several scores, `best_key` naming that one."""
    if isinstance(scores, dict):
        record.update({k: round(v, 6) for k, v in scores.items()})
        return scores[best_key]
    record["val_bpb"] = round(scores, 5)
    return scores


def out_of_time(cfg, world, started):
    """Whether --max-minutes ends the run after this step; every rank agrees (their clocks differ a little)."""
    if not cfg.max_minutes:
        return False
    late = cfg.out_of_time(time.perf_counter() - started)
    return late if world.size == 1 else not world.all_true(not late)


def run_steps(trainer, run_dir, unit):
    """Run `trainer` from its current step to `trainer.cfg.steps` (a RunSchedule). The trainer gives
    `cfg`, `world`, `backend`, `best_val`, `steps_done()`, `loop_step(clock)` -> (the step's own
    metrics, tokens it evaluated over all ranks; None where the record holds its own timing),
    `validate()` and `save(run_dir, best)`. Optional, defaults in brackets: `before_step()`, untimed
    [nothing]; `stop_reached()`, ending the run after this step as its last [never]; `best_key`, the
    score of a dict-valued validation that `best` follows; `loss_key`, the record's training loss
    ["train_bpb"]. Returns (the last validation, or None; seconds)."""
    cfg = trainer.cfg
    before_step = getattr(trainer, "before_step", lambda: None)
    stop_reached = getattr(trainer, "stop_reached", lambda: False)
    loss_key = getattr(trainer, "loss_key", "train_bpb")
    log, elapsed = resumed_metrics_log(trainer.world, run_dir, trainer.steps_done())
    started = time.perf_counter() - elapsed  # elapsed_s goes on from the checkpoint's
    bar = progress(cfg.steps, trainer.world, unit, initial=trainer.steps_done())
    clock = StepClock(trainer.backend.synchronize)
    guard = DivergenceGuard(run_dir, cfg.divergence_hint)
    plots = PlotRefresh(run_dir, trainer.world.is_root and cfg.plots)
    scores, last, compiled = None, False, set()
    try:
        with StopSignals() as signals:
            while trainer.steps_done() < cfg.steps and not last:
                before_step()
                clock.start()
                record, tokens = trainer.loop_step(clock)
                if tokens is not None:
                    record.update(timing_fields(clock.split(), tokens, time.perf_counter() - started))
                done = trainer.steps_done()
                last = cfg.last_step(done, stop_reached() or out_of_time(cfg, trainer.world, started))
                validated, improved = cfg.validation_due(done, last), False
                if validated:
                    scores = trainer.validate()
                    val = logged_scores(record, scores, getattr(trainer, "best_key", None))
                    improved = improves(val, trainer.best_val)
                    if improved:
                        trainer.best_val = val
                log.write(**record)
                if cfg.plot_due(validated, last):  # after the write: the figures show this step
                    plots.validated(last=last)
                guard.check(record[loss_key], done)  # before a checkpoint could keep a diverged state
                # the first step and the first validation compile kernels: the rate and ETA leave them out
                kinds = {"step", "validation"} if validated else {"step"}
                if kinds - compiled:
                    compiled |= kinds
                    forget_rate(bar)
                    first_step_done()
                bar.update(1)
                bar.set_postfix(train=record[loss_key], **({"val": round(val, 4)} if scores is not None else {}))
                saved = cfg.checkpoint_due(done, last, improved)
                if saved:
                    trainer.save(run_dir, best=improved)
                    if trainer.world.is_root:
                        prune_checkpoints(run_dir / "checkpoints", cfg.keep_checkpoints)
                stop_if_signalled(signals, trainer.world, done, run_dir,
                                  None if saved else lambda: trainer.save(run_dir, best=False))
    finally:
        bar.close()
        log.close()
    return scores, time.perf_counter() - started
