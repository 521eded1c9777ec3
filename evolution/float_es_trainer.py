"""The float EGGROLL training run of the MinGRU LM behind `bin/train_es.py --model mingru`: ranks
split the population, exchange only every member's loss (one float64 each), and apply the same
optimiser step; validation, metrics, checkpoints and exact resume as the other runs."""

import time
from dataclasses import asdict, dataclass, fields

import numpy as np

from eggnog.corpus.samplers import RandomWindows
from eggnog.evolution.float_eggroll import FloatEggroll, FloatEggrollConfig
from eggnog.runtime.errors import BadInput
from eggnog.kernels.float_ops import ops_for
from eggnog.models.mingru import MinGruModel
from eggnog.models.mingru_eval import val_bpb, val_windows
from eggnog.runtime.progress import progress
from eggnog.runtime.rundir import check_resume, metrics_log
from eggnog.training.mingru_run import MinGruRunConfig, load_mingru, restore_optimizer, run_meta, save_mingru


@dataclass(frozen=True)
class FloatEsRunConfig(FloatEggrollConfig, MinGruRunConfig):
    """Float EGGROLL's hyperparameters plus the run's; sized to train on a laptop CPU in minutes."""

    lr: float = 1e-2
    epochs: int = 600

    def check(self, ranks=1):
        self.model_config()
        self.check_run()
        FloatEggrollConfig.check(self, ranks)
        if self.epochs < 1:
            raise BadInput(f"--epochs must be positive, got {self.epochs}")


RESUME_FIXED = tuple(f.name for f in fields(FloatEsRunConfig)
                     if f.name not in ("epochs", "validate_every", "checkpoint_every", "val_rows", "val_tokens"))


class FloatEsTrainer:
    def __init__(self, cfg: FloatEsRunConfig, world, backend, corpus):
        cfg.check(world.size)
        self.cfg, self.world, self.backend = cfg, world, backend
        self.ops = ops_for(backend.name)
        self.model = MinGruModel(cfg.model_config())
        self.members = cfg.population // world.size
        self.first = world.rank * self.members
        self.sampler = RandomWindows(corpus.train, cfg.tokens_per_update + 1, cfg.seed)
        self.val = val_windows(corpus.val, cfg.val_rows, cfg.val_tokens)
        self.best_val = None
        self.strategy = self._strategy(cfg.make_optimizer(self.model.init_params(cfg.seed)), 0)

    def _strategy(self, optimizer, epoch):
        return FloatEggroll(self.model, self.cfg, self.cfg.seed, self.ops, optimizer, epoch, self.first, self.members)

    def save(self, run_dir, best=False):
        if self.world.is_root:
            meta = {**run_meta(self.cfg, "float-eggroll", self.best_val),
                    "data_position": {"epoch": self.strategy.epoch}}
            save_mingru(run_dir / "checkpoints", self.strategy.epoch, self.strategy.optimizer, meta, best=best)
        self.world.barrier()

    def restore(self, path):
        arrays, record = load_mingru(path, "float-eggroll")
        check_resume(record["meta"]["config"], asdict(self.cfg), RESUME_FIXED)
        optimizer = restore_optimizer(self.cfg, self.model, arrays, record, path)
        self.strategy = self._strategy(optimizer, int(record["step"]))
        self.best_val = record["meta"].get("best_val_bpb")

    def windows(self, epoch):
        """(members, T + 1) bytes of this rank's members: one random window per group."""
        groups = np.arange(self.first, self.first + self.members) // self.cfg.group_size
        lo = int(groups[0])
        rows = self.sampler.batch(epoch, lo, int(groups[-1]) - lo + 1)
        return rows[groups - lo]

    def validate(self):
        return val_bpb(self.model, self.ops, self.strategy.optimizer.eval_params(), self.val, self.world)

    def run(self, run_dir):
        cfg, log = self.cfg, metrics_log(self.world, run_dir)
        started = time.perf_counter()
        bar = progress(cfg.epochs, self.world, "epochs", initial=self.strategy.epoch)
        val = None
        while self.strategy.epoch < cfg.epochs:
            epoch, tick = self.strategy.epoch, time.perf_counter()
            losses = self.world.allgather_array(self.strategy.evaluate(self.windows(epoch)))
            self.strategy.tell(losses)
            seconds = time.perf_counter() - tick
            record = {"epoch": epoch, "train_bpb": round(float(losses.mean()), 5),
                      "tokens_per_s": round(cfg.population * cfg.tokens_per_update / seconds, 1),
                      "elapsed_s": round(time.perf_counter() - started, 3)}
            done = self.strategy.epoch
            improved = False
            if done % cfg.validate_every == 0 or done == cfg.epochs:
                val = self.validate()
                record["val_bpb"] = round(val, 5)
                improved = self.best_val is None or val < self.best_val
                self.best_val = val if improved else self.best_val
            log.write(**record)
            bar.update(1)
            bar.set_postfix(train=record["train_bpb"], val=val)
            if improved or done % cfg.checkpoint_every == 0 or done == cfg.epochs:
                self.save(run_dir, best=improved)
        bar.close()
        log.close()
        return {"epochs": self.strategy.epoch, "val_bpb": val, "best_val_bpb": self.best_val,
                "elapsed_s": time.perf_counter() - started}
