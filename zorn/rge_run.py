"""The zero-order RNN training run behind bin/train_rge.py: a task, a model (LSTM, DNC or MinGRU),
and a solver (CD-RGE, FDRAS, or the BPTT baseline), logging per step the loss, eps, lr, seconds
per step and where they went (probes, exchange, update), probes and peak memory, with checkpoints,
exact resume and a stop on non-finite loss.

Losses are mask-weighted cross-entropy in bits per predicted token. In overfit mode (the paper's
Table 1 workload: one fixed batch) the run stops once the loss is below `target_loss`; the default
0.1443 bits is the authors' 0.1 nats.
"""

import math
from dataclasses import asdict, dataclass, replace

import numpy as np

from eggnog.runtime.errors import BadInput
from eggnog.runtime.checkpoint import load_checkpoint, prune_checkpoints, save_checkpoint
from eggnog.training.memory import MemoryMeter
from eggnog.runtime.divergence import DivergenceGuard
from eggnog.runtime.progress import progress
from eggnog.runtime.rundir import check_resume, resumed_metrics_log
from eggnog.runtime.stop_signals import StopSignals, stop_if_signalled
from eggnog.runtime.step_clock import UNTIMED, StepClock, rounded
from eggnog.training.memory_preflight import linear_in_depth
from eggnog.training.optimizers import checkpoint_arrays, state_from_checkpoint
from eggnog.training.run_config import RunConfig, flag
from eggnog.zorn.rge import NonFiniteLoss, RgeConfig, RgeTrainer, step_optimizer
from eggnog.zorn.tasks import VOCAB, make_task, overfit_task

MODELS = ("lstm", "dnc", "mingru")
SOLVERS = ("cdrge", "fdras", "bptt")


@dataclass(frozen=True)
class RgeRunConfig(RgeConfig, RunConfig):
    run_name = "rge"
    generates = False
    divergence_hint = "lower --lr or --sigma"
    validates = False

    model: str = flag("lstm", "lstm, dnc or mingru.")
    solver: str = flag("cdrge", "cdrge, fdras or bptt (the baseline).")
    # defaults: a tiny LSTM that trains on a laptop; Table 1 sizes in bench/table1_grid.py
    input_size: int = flag(16, "Embedding width E.")
    hidden_size: int = flag(32, "LSTM/DNC hidden width H.")
    num_heads: int = flag(4, "LSTM heads N (H divisible by N).")
    memory_size: int = flag(16, "DNC memory rows.")
    head_size: int = flag(16, "DNC memory row width.")
    num_reads: int = flag(1, "DNC read heads.")
    dim: int = flag(64, "MinGRU width.")
    depth: int = flag(2, "MinGRU blocks.")
    expansion_factor: float = flag(1.5, "MinGRU inner width / dim.")
    ff_mult: float = flag(4.0, "MinGRU feed-forward width / dim.")
    task: str = flag("copy", "copy, repeat_copy, reverse, sort, add or char_lm.")
    batch_size: int = flag(8, "Sequences per step.")
    min_seq_len: int = flag(2, "Shortest sample (curriculum lower bound).")
    max_seq_len: int = flag(5, "Longest sample (curriculum upper bound).")
    overfit: bool = flag(False, "One fixed batch of 2 + 10 tokens; stop below --target-loss (Table 1).")
    target_loss: float = flag(0.1 / math.log(2), "Overfit stop, bits per token (the default is 0.1 nats).")
    steps: int = flag(1000, "Step budget.", changeable=True)
    seed: int = flag(0, "Seed of initialisation, probes and data.")
    checkpoint_every: int = flag(50, "Steps between checkpoints.", changeable=True)
    keep_checkpoints: int = flag(5, "Step checkpoints kept besides those `latest` and `best` point at (the newest K).",
                                 changeable=True)
    data: str | None = flag(None, "Corpus for char_lm.", default_text="the embedded stdlib corpus", metavar="<path>")

    def check(self, ranks=1):
        if self.model not in MODELS:
            raise BadInput(f"unknown --model {self.model!r}: choose one of {', '.join(MODELS)}")
        if self.solver not in SOLVERS:
            raise BadInput(f"unknown --solver {self.solver!r}: choose one of {', '.join(SOLVERS)}")
        if self.solver == "bptt":
            if ranks > 1:
                raise BadInput("the BPTT baseline runs in one process; launch it without mpiexec/srun")
            RgeConfig.check(replace(self, solver="cdrge", probes=1, antithetic=False), 1)
        else:
            RgeConfig.check(self, ranks)
        if self.probe_batch > 1 and self.model != "lstm":
            raise BadInput(f"--probe-batch above 1 needs --model lstm (the {self.model} model evaluates one "
                           "perturbation a pass)")
        for name in ("batch_size", "steps", "checkpoint_every", "keep_checkpoints"):
            if getattr(self, name) < 1:
                raise BadInput(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")

    def host_memory(self, ranks):
        if self.model == "mingru":
            from eggnog.models.mingru import MinGruConfig

            model = MinGruConfig(self.dim, self.depth, self.expansion_factor, self.ff_mult).check()
            n = linear_in_depth(lambda depth: build_model(replace(self, depth=depth)).n_params, self.depth)
            width = 4 * model.dim + 3 * model.dim_inner + 2 * model.ff_inner + 2
        else:
            n = build_model(self).n_params
            width = 8 * self.hidden_size + self.input_size
        tokens = self.batch_size * 2 * self.max_seq_len  # a sample is its input and its answer
        return {"parameters, optimiser state and the estimate": 4 * 5 * n, "probe losses": 16 * self.probes,
                "batch and activations": 4 * tokens * (width + 2 * VOCAB) * 2 * self.probe_batch}

    @property
    def uses_corpus(self):
        return self.task == "char_lm"

    def layout(self, world):
        return "series" if self.solver == "bptt" or world.size == 1 else self.dist_mode

    def describe(self, trainer):
        probes = "" if self.solver == "bptt" else f" with {self.probes} {self.distribution} probes, eps {self.eps}"
        return [f"{self.model}: {trainer.model.n_params:,} parameters; {self.solver}{probes}, lr {self.lr}, "
                f"{self.optimizer}; task {self.task}, batch {self.batch_size}"
                + (" (overfit one batch)" if self.overfit else "")]

    def summarize(self, summary):
        status = "reached the target loss" if summary["reached_target"] else "ran its step budget"
        return f"done: {summary['steps']} steps, loss {summary['loss']:.4f} bits/token ({status})"


RESUME_FIXED = RgeRunConfig.fixed_on_resume()


def build_model(cfg):
    if cfg.model == "lstm":
        from eggnog.models.lstm import LstmConfig, LstmModel

        return LstmModel(LstmConfig(VOCAB, cfg.input_size, cfg.hidden_size, cfg.num_heads))
    if cfg.model == "dnc":
        from eggnog.models.dnc import DncConfig, DncModel

        return DncModel(DncConfig(VOCAB, cfg.input_size, cfg.hidden_size, cfg.memory_size, cfg.head_size,
                                  cfg.num_reads))
    from eggnog.models.mingru import MinGruConfig
    from eggnog.zorn.mingru_task import MinGruTaskModel

    return MinGruTaskModel(MinGruConfig(cfg.dim, cfg.depth, cfg.expansion_factor, cfg.ff_mult).check())


def open_task_corpus(cfg, world):
    """The byte corpus char_lm reads (--data, or the embedded default); None for synthetic tasks."""
    if cfg.task != "char_lm":
        return None
    from eggnog.corpus.default import default_corpus
    from eggnog.corpus.reader import open_corpus

    return open_corpus(cfg.data) if cfg.data else world.root_first(default_corpus)


def build_task(cfg, corpus):
    task = make_task(cfg.task, cfg.min_seq_len, cfg.max_seq_len, cfg.seed, corpus)
    return overfit_task(task, cfg.batch_size) if cfg.overfit else task


class RgeRun:
    def __init__(self, cfg: RgeRunConfig, world, backend, corpus=None):
        cfg.check(world.size)
        self.cfg, self.world, self.backend = cfg, world, backend
        self.model = build_model(cfg)
        self.task = build_task(cfg, corpus)
        self.step = 0
        self._start(self.model.init_params(cfg.seed))

    def _start(self, params, opt_arrays=None, opt_scalars=None):
        cfg = self.cfg
        if cfg.solver == "bptt":
            self.rge = None
            self.optimizer = step_optimizer(cfg, np.array(params, np.float32))
        else:
            self.rge = RgeTrainer(cfg, params, self.backend, self.world, cfg.seed)
            self.optimizer = self.rge.optimizer
        if opt_arrays and self.optimizer is not None:
            self.optimizer.load_state(opt_arrays, opt_scalars)

    def host_params(self):
        return self.optimizer.train_params().copy() if self.rge is None else self.rge.host_params()

    # ---- checkpoints -------------------------------------------------------------------------
    def save(self, run_dir):
        if self.world.is_root:
            arrays, scalars = checkpoint_arrays(self.optimizer) if self.optimizer is not None else ({}, {})
            save_checkpoint(run_dir / "checkpoints", self.step, {"params": self.host_params(), **arrays},
                            {"model": self.cfg.model, "trainer": "rge", "config": asdict(self.cfg),
                             "optimizer_state": scalars})
        self.world.barrier()

    def restore(self, path):
        arrays, record = load_checkpoint(path)
        meta = record.get("meta", {})
        if meta.get("trainer") != "rge" or meta.get("model") != self.cfg.model:
            raise BadInput(f"checkpoint {str(path)!r} holds a {meta.get('model')!r} model from "
                           f"{meta.get('trainer')!r} training, not a {self.cfg.model!r} zero-order run")
        check_resume(meta.get("config", {}), asdict(self.cfg), RESUME_FIXED)
        self._start(arrays["params"], state_from_checkpoint(arrays), meta.get("optimizer_state"))
        self.step = int(record["step"])

    # ---- training ------------------------------------------------------------------------------
    def train_step(self, batch, clock=UNTIMED):
        name = self.backend.name
        if self.rge is not None:
            distribution = self.cfg.distribution
            probes_fn = ((lambda theta, keys, alphas: self.model.probe_losses(name, theta, keys, alphas, distribution,
                                                                              batch))
                         if hasattr(self.model, "probe_losses") else None)
            return self.rge.step(lambda p: self.model.loss(name, p, batch), self.step, clock, probes_fn)
        with clock.phase("eval"):
            loss, grad = self.model.loss_and_grad(name, self.optimizer.train_params(), batch)
        if not math.isfinite(loss):
            raise NonFiniteLoss(self.step)
        with clock.phase("update"):
            self.optimizer.step(grad)
        return loss

    def run(self, run_dir):
        cfg, world = self.cfg, self.world
        log, _ = resumed_metrics_log(world, run_dir, self.step)
        meter, clock = MemoryMeter(self.backend), StepClock(self.backend.synchronize)
        probes = 0 if cfg.solver == "bptt" else cfg.probes
        mode = cfg.layout(world)
        bar = progress(cfg.steps, world, "steps", initial=self.step)
        loss, reached = None, False
        guard = DivergenceGuard(run_dir, cfg.divergence_hint)
        with StopSignals() as signals:
            try:
                while self.step < cfg.steps and not reached:
                    batch = self.task.batch(self.step, cfg.batch_size)
                    meter.reset()
                    clock.start()
                    loss = self.train_step(batch, clock)
                    split = clock.split()
                    self.step += 1
                    reached = cfg.overfit and loss < cfg.target_loss
                    timing = rounded(split)
                    log.write(step=self.step, loss=round(loss, 6), eps=None if cfg.solver == "bptt" else cfg.eps,
                              lr=cfg.lr, s_per_step=timing.pop("step_s"), **timing, probes=probes, solver=cfg.solver,
                              mode=mode, ranks=world.size, **meter.peaks())
                    bar.update(1)
                    bar.set_postfix(loss=round(loss, 4))
                    guard.check(loss, self.step)
                    saved = self.step % cfg.checkpoint_every == 0 or reached or self.step == cfg.steps
                    if saved:
                        self.save(run_dir)
                        if world.is_root:
                            prune_checkpoints(run_dir / "checkpoints", cfg.keep_checkpoints)
                    stop_if_signalled(signals, world, self.step, run_dir,
                                      None if saved else lambda: self.save(run_dir))
            except NonFiniteLoss as e:
                self.save(run_dir)
                raise BadInput(f"the loss became NaN or infinite at step {e.step + 1}; lower --lr (a checkpoint of "
                               f"the last good state, step {self.step}, was written)") from None
            finally:
                bar.close()
                log.close()
                meter.stop()
        return {"steps": self.step, "loss": loss, "reached_target": reached}
