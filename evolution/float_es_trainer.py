"""The float EGGROLL training run of the MinGRU LM behind `bin/train_es.py --model mingru`: ranks
split the population, exchange only every member's loss (one float64 each), and apply the same
optimiser step; validation, metrics, checkpoints and exact resume as the other runs."""

import time
from dataclasses import asdict, dataclass

import numpy as np

from eggnog.corpus.samplers import RandomWindows
from eggnog.evolution.float_eggroll import FloatEggroll, FloatEggrollConfig
from eggnog.runtime.errors import BadInput
from eggnog.kernels.registry import ops_for
from eggnog.models.mingru import MinGruModel
from eggnog.models.mingru_eval import val_bpb, val_windows
from eggnog.runtime.progress import progress
from eggnog.runtime.rundir import check_resume, metrics_log
from eggnog.runtime.step_clock import StepClock, rounded
from eggnog.training.mingru_run import MinGruRunConfig, load_mingru, restore_optimizer, run_meta, save_mingru
from eggnog.training.run_config import flag, redefault


@dataclass(frozen=True)
class FloatEsRunConfig(FloatEggrollConfig, MinGruRunConfig):
    """Float EGGROLL's hyperparameters plus the run's; sized to train on a laptop CPU in minutes."""

    run_name = "es-mingru"

    lr: float = redefault(MinGruRunConfig, "lr", 1e-2)
    steps: int = flag(600, "Updates (nano-egg's epochs) to run in total.", aliases=("epochs",), changeable=True)

    def check(self, ranks=1):
        self.model_config()
        self.check_run()
        FloatEggrollConfig.check(self, ranks)
        if self.steps < 1:
            raise BadInput(f"--steps must be positive, got {self.steps}")

    def describe(self, trainer):
        return super().describe(trainer) + [
            f"float EGGROLL: population {self.population} ({trainer.members} per rank), perturbation rank "
            f"{self.perturbation_rank}, sigma {self.sigma}, {self.tokens_per_update} bytes per member per epoch"]

    def summarize(self, summary):
        return f"done: {summary['epochs']} epochs in {summary['elapsed_s']:.0f} s; " + self.val_summary(summary)


RESUME_FIXED = FloatEsRunConfig.fixed_on_resume()


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
        bar = progress(cfg.steps, self.world, "epochs", initial=self.strategy.epoch)
        val = None
        clock = StepClock(self.backend.synchronize)
        while self.strategy.epoch < cfg.steps:
            epoch = self.strategy.epoch
            clock.start()
            windows = self.windows(epoch)
            with clock.phase("eval"):
                mine = self.strategy.evaluate(windows)
            with clock.phase("exchange"):
                losses = self.world.allgather_array(mine)
            with clock.phase("update"):
                self.strategy.tell(losses)
            split = clock.split()
            # member-tokens evaluated by all ranks per second of the whole step
            record = {"epoch": epoch, "train_bpb": round(float(losses.mean()), 5),
                      "tokens_per_s": round(cfg.population * cfg.tokens_per_update / split["step_s"], 1),
                      **rounded(split), "elapsed_s": round(time.perf_counter() - started, 3)}
            done = self.strategy.epoch
            improved = False
            if done % cfg.validate_every == 0 or done == cfg.steps:
                val = self.validate()
                record["val_bpb"] = round(val, 5)
                improved = self.best_val is None or val < self.best_val
                self.best_val = val if improved else self.best_val
            log.write(**record)
            bar.update(1)
            bar.set_postfix(train=record["train_bpb"], val=val)
            if improved or done % cfg.checkpoint_every == 0 or done == cfg.steps:
                self.save(run_dir, best=improved)
        bar.close()
        log.close()
        return {"epochs": self.strategy.epoch, "val_bpb": val, "best_val_bpb": self.best_val,
                "elapsed_s": time.perf_counter() - started}
