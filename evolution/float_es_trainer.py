"""The float EGGROLL training run of the MinGRU LM behind `bin/train_es.py --model mingru`: ranks
split the population, exchange only every member's loss (one float64 each), and apply the same
optimiser step; validation, metrics, checkpoints and exact resume as the other runs."""

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from eggnog.corpus.samplers import RandomWindows
from eggnog.evolution.float_eggroll import FloatEggroll, FloatEggrollConfig, FloatOptimizer
from eggnog.evolution.float_es_memory import float_eggroll_memory
from eggnog.kernels.core.backend import Backend, device_free_bytes
from eggnog.kernels.core.placement import kernels_for
from eggnog.models.mingru import MinGruModel
from eggnog.models.mingru_eval import val_bpb, val_windows
from eggnog.runtime.errors import BadInput
from eggnog.runtime.rundir import check_resume
from eggnog.training.memory_plan import check_device_fits, device_line, linear_in_depth
from eggnog.training.mingru.run import MinGruRunConfig, load_mingru, restore_optimizer, run_meta, save_mingru
from eggnog.training.run.config import described, flag, redefault
from eggnog.training.run.loop import run_steps

if TYPE_CHECKING:
    from eggnog.corpus.reader import ByteCorpus
    from eggnog.runtime.step_clock import StepClock
    from eggnog.runtime.world import World


@dataclass(frozen=True)
class FloatEsRunConfig(FloatEggrollConfig, MinGruRunConfig):
    """Float EGGROLL's hyperparameters plus the run's; sized to train on a laptop CPU in minutes."""

    run_name = "es-mingru"
    divergence_hint = "lower --lr or --sigma"

    # FloatEggrollConfig's fields as flags (their defaults live there, or here where the run's differ)
    population: int = described(FloatEggrollConfig, "population", "Population over all ranks.",
                                per_rank=("population_per_rank", "parallel_generations_per_gpu"))
    perturbation_rank: int = described(FloatEggrollConfig, "perturbation_rank", "Rank r of each matrix perturbation "
                                       "A B^T / sqrt(r).")
    sigma: float = described(FloatEggrollConfig, "sigma", "Perturbation scale.")
    noise_reuse: int = described(FloatEggrollConfig, "noise_reuse", "Steps sharing one perturbation; 0: always the "
                                 "same.")
    tokens_per_update: int = described(FloatEggrollConfig, "tokens_per_update", "Bytes each member reads per step.")
    group_size: int = described(FloatEggrollConfig, "group_size", "Members sharing one window (even).")
    fitness: str = described(FloatEggrollConfig, "fitness", "Fitness z-scored over the population (global) or within "
                             "groups (group).")
    freeze_vectors: bool = described(FloatEggrollConfig, "freeze_vectors", "Leave norm weights and biases "
                                     "unperturbed.", off="perturb_vectors")
    forward_precision: str = described(FloatEggrollConfig, "forward_precision", "Products of the population forward: "
                                       "tf32 (tensor cores), fp32, or auto (tf32 on a GPU, fp32 on the CPU).",
                                       changeable=True)
    lr: float = redefault(MinGruRunConfig, "lr", 1e-2)
    steps: int = flag(600, "Updates (nano-egg's epochs) to run in total.", aliases=("epochs",), changeable=True)

    def check(self, ranks: int = 1) -> None:
        model = self.model_config()
        self.check_run()
        FloatEggrollConfig.check(self, ranks)
        if self.perturbation_rank > model.dim:  # a rank above the smallest side adds nothing
            raise BadInput(f"--perturbation-rank must be at most --dim {model.dim}, got {self.perturbation_rank}")
        if self.steps < 1:
            raise BadInput(f"--steps must be positive, got {self.steps}")

    def host_memory(self, ranks: int) -> dict[str, int]:
        model = self.model_config()
        n = linear_in_depth(lambda depth: MinGruModel(replace(model, depth=depth)).n_params, model.depth)
        per_token = 4 * model.dim + 3 * model.dim_inner + 2 * model.ff_inner + 2 + 2 * 256  # a layer, the logits
        members = self.population // ranks
        return {"parameters, optimiser state and the ES estimate": 4 * 5 * n,
                "the population's activations": 4 * members * (self.tokens_per_update + 1) * per_token}

    def describe(self, trainer: Any) -> list[str]:
        return super().describe(trainer) + [
            f"float EGGROLL: population {self.population} ({trainer.members} per rank), perturbation rank "
            f"{self.perturbation_rank}, sigma {self.sigma}, {self.tokens_per_update} bytes per member per step"] + \
            ([trainer.memory_line] if trainer.memory_line else [])

    def summarize(self, summary: dict[str, Any]) -> str:
        return f"done: {summary['steps']} steps in {summary['elapsed_s']:.0f} s; " + self.val_summary(summary)


RESUME_FIXED = FloatEsRunConfig.fixed_on_resume()


class FloatEsTrainer:
    def __init__(self, cfg: FloatEsRunConfig, world: "World", backend: Backend, corpus: "ByteCorpus") -> None:
        cfg.check(world.size)
        self.cfg, self.world, self.backend = cfg, world, backend
        self.ops = kernels_for(backend.name)
        self.model = MinGruModel(cfg.model_config())
        self.members = cfg.population // world.size
        self.first = world.rank * self.members
        self.sampler = RandomWindows(corpus.train, cfg.tokens_per_update + 1, cfg.seed)
        self.val = val_windows(corpus.val, cfg.val_rows, cfg.val_tokens)
        self.best_val: float | None = None
        free = device_free_bytes(backend)
        memory = float_eggroll_memory(cfg, self.model, self.members)
        check_device_fits(memory, free, "a smaller --population (or more ranks), --tokens-per-update, "
                                        "--perturbation-rank or model needs less")
        self.memory_line = device_line(memory, free)
        self.strategy = self._strategy(cfg.make_optimizer(self.ops.to_device(self.model.init_params(cfg.seed))), 0)

    def _strategy(self, optimizer: FloatOptimizer, step: int) -> FloatEggroll:
        return FloatEggroll(self.model, self.cfg, self.ops, optimizer, self.cfg.seed, step, self.first, self.members)

    def save(self, run_dir: Path, best: bool = False) -> None:
        if self.world.is_root:
            meta = {**run_meta(self.cfg, "float-eggroll", self.best_val),
                    "data_position": {"step": self.strategy.step}}
            save_mingru(run_dir / "checkpoints", self.strategy.step, self.strategy.optimizer, meta, best=best)
        self.world.barrier()

    def restore(self, path: str | Path) -> None:
        arrays, record = load_mingru(path, "float-eggroll")
        check_resume(record["meta"]["config"], asdict(self.cfg), RESUME_FIXED)
        optimizer = restore_optimizer(self.cfg, self.model, arrays, record, path, self.ops.to_device)
        self.strategy = self._strategy(optimizer, int(record["step"]))
        self.best_val = record["meta"].get("best_val_bpb")

    def windows(self, step: int) -> np.ndarray:
        """(members, T + 1) bytes of this rank's members: one random window per group."""
        groups = np.arange(self.first, self.first + self.members) // self.cfg.group_size
        lo = int(groups[0])
        rows = self.sampler.batch(step, lo, int(groups[-1]) - lo + 1)
        return rows[groups - lo]

    def validate(self) -> float:
        return val_bpb(self.model, self.ops, self.strategy.optimizer.eval_params(), self.val, self.world)

    def steps_done(self) -> int:
        return self.strategy.step

    def loop_step(self, clock: "StepClock") -> tuple[dict[str, Any], int]:
        cfg, step = self.cfg, self.strategy.step
        windows = self.windows(step)
        with clock.phase("eval"):
            mine = self.strategy.evaluate(windows)
        with clock.phase("exchange"):
            losses = self.world.allgather_array(mine)
        with clock.phase("update"):
            self.strategy.tell(losses, maximize=False)
        # member-tokens evaluated by all ranks
        return {"step": step + 1, "train_bpb": round(float(losses.mean()), 5)}, cfg.population * cfg.tokens_per_update

    def run(self, run_dir: Path) -> dict[str, Any]:
        val, seconds = run_steps(self, run_dir, "steps")
        return {"steps": self.strategy.step, "val_bpb": val, "best_val_bpb": self.best_val, "elapsed_s": seconds}
