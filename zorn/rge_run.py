"""The zero-order RNN training run behind bin/train_rge.py: a task, a model (LSTM, DNC or MinGRU),
and a solver (CD-RGE, FDRAS, or the BPTT baseline), logging per step the loss, eps, lr, seconds
per step, probes and peak memory, with checkpoints, exact resume and a stop on non-finite loss.

Losses are mask-weighted cross-entropy in bits per predicted token. In overfit mode (the paper's
Table 1 workload: one fixed batch) the run stops once the loss is below `target_loss`; the default
0.1443 bits is the authors' 0.1 nats.
"""

import math
import time
from dataclasses import asdict, dataclass, fields, replace

from eggnog.runtime.errors import BadInput
from eggnog.runtime.checkpoint import load_checkpoint, save_checkpoint
from eggnog.runtime.memory import MemoryMeter
from eggnog.runtime.progress import progress
from eggnog.runtime.rundir import check_resume, metrics_log
from eggnog.training.optimizers import checkpoint_arrays, state_from_checkpoint
from eggnog.zorn.rge import NonFiniteLoss, RgeConfig, RgeTrainer, step_optimizer
from eggnog.zorn.tasks import VOCAB, make_task, overfit_task

MODELS = ("lstm", "dnc", "mingru")
SOLVERS = ("cdrge", "fdras", "bptt")


@dataclass(frozen=True)
class RgeRunConfig(RgeConfig):
    model: str = "lstm"
    solver: str = "cdrge"
    input_size: int = 16  # defaults: a tiny LSTM that trains on a laptop; Table 1 sizes in bench/table1_grid.py
    hidden_size: int = 32
    num_heads: int = 4  # LSTM heads
    memory_size: int = 16  # DNC rows
    head_size: int = 16  # DNC row width
    num_reads: int = 1  # DNC read heads
    dim: int = 64  # MinGRU
    depth: int = 2
    expansion_factor: float = 1.5
    ff_mult: float = 4.0
    task: str = "copy"
    batch_size: int = 8
    min_seq_len: int = 2
    max_seq_len: int = 5
    overfit: bool = False
    target_loss: float = 0.1 / math.log(2)
    steps: int = 1000
    seed: int = 0
    checkpoint_every: int = 50
    data: str | None = None

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
        for name in ("batch_size", "steps", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise BadInput(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")


RESUME_FIXED = tuple(f.name for f in fields(RgeRunConfig) if f.name not in ("steps", "checkpoint_every"))


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


class Timer:
    """Seconds of one step: CUDA events on a GPU (device time), the wall clock elsewhere."""

    def __init__(self, backend):
        self.cuda = backend.name == "cuda" and not backend.simulated

    def __enter__(self):
        if self.cuda:
            from eggnog.kernels.cuda_api import cuda

            self.start, self.end = cuda.event(), cuda.event()
            self.start.record()
        self.tick = time.perf_counter()
        return self

    def __exit__(self, *exc):
        if self.cuda:
            from eggnog.kernels.cuda_api import cuda

            self.end.record()
            self.end.synchronize()
            self.seconds = cuda.event_elapsed_time(self.start, self.end) / 1e3
        else:
            self.seconds = time.perf_counter() - self.tick


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
            self.optimizer = step_optimizer(cfg, params)
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
    def train_step(self, batch):
        name = self.backend.name
        if self.rge is not None:
            return self.rge.step(lambda p: self.model.loss(name, p, batch), self.step)
        loss, grad = self.model.loss_and_grad(name, self.optimizer.train_params(), batch)
        if not math.isfinite(loss):
            raise NonFiniteLoss(self.step)
        self.optimizer.step(grad)
        return loss

    def run(self, run_dir):
        cfg, world = self.cfg, self.world
        log, meter = metrics_log(world, run_dir), MemoryMeter(self.backend.name)
        probes = 0 if cfg.solver == "bptt" else cfg.probes
        mode = "series" if cfg.solver == "bptt" or world.size == 1 else cfg.dist_mode
        bar = progress(cfg.steps, world, "steps", initial=self.step)
        loss, reached = None, False
        try:
            while self.step < cfg.steps and not reached:
                batch = self.task.batch(self.step, cfg.batch_size)
                meter.reset()
                with Timer(self.backend) as timer:
                    loss = self.train_step(batch)
                meter.sample()
                self.step += 1
                reached = cfg.overfit and loss < cfg.target_loss
                log.write(step=self.step, loss=round(loss, 6), eps=None if cfg.solver == "bptt" else cfg.eps,
                          lr=cfg.lr, s_per_step=round(timer.seconds, 5), probes=probes, solver=cfg.solver,
                          mode=mode, ranks=world.size, peak_device_bytes=int(meter.peak_device),
                          peak_own_bytes=meter.peak_own)
                bar.update(1)
                bar.set_postfix(loss=round(loss, 4))
                if self.step % cfg.checkpoint_every == 0 or reached or self.step == cfg.steps:
                    self.save(run_dir)
        except NonFiniteLoss as e:
            self.save(run_dir)
            raise BadInput(f"the loss became NaN or infinite at step {e.step + 1}; lower --lr (a checkpoint of "
                           f"the last good state, step {self.step}, was written)") from None
        finally:
            bar.close()
            log.close()
            meter.stop()
        return {"steps": self.step, "loss": loss, "reached_target": reached}
