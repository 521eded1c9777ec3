"""What the two MinGRU training runs (BPTT in training/mingru/bptt.py, float EGGROLL in
evolution/float_es_trainer.py) share: model size and optimiser flags, the resolved model, the
checkpoint layout and resume checks.

A MinGRU checkpoint holds `params` (the evaluation point: what validation, sampling and
generation use; x for sf-adamw), `train_params` (the optimiser's own vector, y for sf-adamw, so a
resume is exact) and the optimiser state as `opt_<name>` arrays; its metadata names the model
("mingru"), the trainer, the model config and the optimiser's scalars.
"""

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from eggnog.kernels.core.placement import to_host
from eggnog.models.mingru import MinGruConfig, MinGruModel
from eggnog.models.mingru_sizing import parse_size, solve_dims
from eggnog.runtime.checkpoint import load_checkpoint, mark_best, save_checkpoint
from eggnog.runtime.errors import BadInput
from eggnog.training.optimizers import (
    OPTIMIZERS,
    AdamW,
    SfAdamW,
    Sgd,
    checkpoint_arrays,
    make_optimizer,
    state_from_checkpoint,
)
from eggnog.training.run.config import RunConfig, flag
from eggnog.training.run.schedule import RunSchedule

DEFAULT_DIM, DEFAULT_DEPTH = 64, 2  # laptop size when neither --params nor --dim/--depth is given


@dataclass(frozen=True)
class MinGruRunConfig(RunSchedule, RunConfig):
    model_name = "mingru"  # what its checkpoints say they hold

    params: str | None = flag(None, "Parameter budget with k/m/g = 1024^n suffixes, solved into --dim and --depth "
                                    "as gruboros does.", default_text="none", metavar="<size>")
    dim: int | None = flag(None, "MinGRU width.", default_text=f"{DEFAULT_DIM} without --params", aliases=("n_embd",))
    depth: int | None = flag(None, "MinGRU blocks.", default_text=f"{DEFAULT_DEPTH} without --params",
                             aliases=("n_layer",))
    expansion_factor: float = flag(1.5, "minGRU inner width / dim.")
    ff_mult: float = flag(4.0, "Feed-forward width / dim.")
    optimizer: str = flag("adamw", "sf-adamw, adamw or sgd.")
    lr: float = flag(3e-3, "Learning rate.")
    beta1: float = flag(0.9, "First moment decay (SGD: unused).")
    beta2: float = flag(0.999, "Second moment decay.")
    weight_decay: float = flag(0.0, "Weight decay.")
    warmup_steps: int = flag(0, "Linear warm-up steps (sf-adamw).")
    seed: int = flag(0, "Seed of initialisation, noise and data.")
    val_rows: int = flag(32, "Validation rows, each from a zero state.", changeable=True)
    val_tokens: int = flag(512, "Bytes scored per validation row.", changeable=True)
    data: str | None = flag(None, "Corpus (.bin/.h5/.zarr).", default_text="the embedded stdlib corpus",
                            metavar="<path>")

    def resolved(self) -> "MinGruRunConfig":
        """The same config with dim and depth solved (from --params when given)."""
        if self.params is None and (self.dim is None or self.depth is None):
            return replace(self, dim=self.dim or DEFAULT_DIM, depth=self.depth or DEFAULT_DEPTH)
        budget = None if self.params is None else parse_size(self.params, "params")
        dim, depth = solve_dims(budget, self.dim, self.depth, self.expansion_factor, self.ff_mult)
        return replace(self, dim=dim, depth=depth)

    def model_config(self) -> MinGruConfig:
        return MinGruConfig(cast(int, self.dim), cast(int, self.depth), self.expansion_factor, self.ff_mult).check()

    def check_run(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise BadInput(f"unknown optimizer {self.optimizer!r}: choose one of {', '.join(OPTIMIZERS)}")
        for name in ("validate_every", "checkpoint_every", "keep_checkpoints", "val_rows", "val_tokens"):
            if getattr(self, name) < 1:
                raise BadInput(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")

    def make_optimizer(self, params: Any) -> AdamW | SfAdamW | Sgd:
        return make_optimizer(self.optimizer, params, self.lr, self.beta1, self.beta2, self.weight_decay,
                              self.warmup_steps)

    def describe(self, trainer: Any) -> list[str]:
        return [describe(self, trainer.model)]

    @staticmethod
    def val_summary(summary: dict[str, Any]) -> str:
        return f"val {summary['val_bpb']:.3f} bits/byte (best {summary['best_val_bpb']:.3f})"


def model_config_of(meta: dict[str, Any]) -> MinGruConfig:
    cfg = meta.get("model_config", {})
    try:
        return MinGruConfig(cfg["dim"], cfg["depth"], cfg["expansion_factor"], cfg["ff_mult"]).check()
    except (KeyError, TypeError):
        raise BadInput("the checkpoint's MinGRU model configuration is missing or incomplete") from None


def save_mingru(directory: str | Path, step: int, optimizer: AdamW | SfAdamW | Sgd, meta: dict[str, Any],
                extra_arrays: dict[str, np.ndarray] | None = None, best: bool = False, name: str | None = None) -> Path:
    arrays, scalars = checkpoint_arrays(optimizer)
    record = {"params": to_host(optimizer.eval_params()), "train_params": to_host(optimizer.train_params()), **arrays,
              **(extra_arrays or {})}
    path = save_checkpoint(directory, step, record, {**meta, "model": "mingru", "optimizer_state": scalars}, name=name)
    if best:
        mark_best(directory, path)
    return path


def load_mingru(path: str | Path, trainer: str | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """(arrays, record) of a MinGRU checkpoint; refuses other models (and other trainers when
    `trainer` is given)."""
    arrays, record = load_checkpoint(path)
    meta = record.get("meta", {})
    if meta.get("model") != "mingru":
        raise BadInput(f"checkpoint {str(path)!r} holds a {meta.get('model')!r} model, not a MinGRU LM")
    if trainer is not None and meta.get("trainer") != trainer:
        raise BadInput(f"checkpoint {str(path)!r} was written by {meta.get('trainer')!r} training, not {trainer!r}")
    return arrays, record


def restore_optimizer(cfg: MinGruRunConfig, model: MinGruModel, arrays: dict[str, np.ndarray],
                      record: dict[str, Any], path: str | Path,
                      place: Callable[[np.ndarray], Any] = lambda params: params) -> AdamW | SfAdamW | Sgd:
    """A fresh optimiser over the checkpoint's training vector (placed on a backend by `place`) with its
    state loaded."""
    params = np.array(arrays["train_params"], dtype=np.float32)
    if params.size != model.n_params:
        raise BadInput(f"checkpoint {str(path)!r} does not match this model ({params.size:,} parameters, "
                       f"expected {model.n_params:,})")
    optimizer = cfg.make_optimizer(place(params))
    optimizer.load_state(state_from_checkpoint(arrays), record["meta"]["optimizer_state"])
    return optimizer


def describe(cfg: MinGruRunConfig, model: MinGruModel) -> str:
    return (f"MinGRU dim {cfg.dim} depth {cfg.depth} (expansion {cfg.expansion_factor}, ff {cfg.ff_mult}): "
            f"{model.n_params:,} float32 parameters; optimizer {cfg.optimizer}, lr {cfg.lr}")


def run_meta(cfg: MinGruRunConfig, trainer: str, best_val: float | None) -> dict[str, Any]:
    return {"config": asdict(cfg), "trainer": trainer, "best_val_bpb": best_val,
            "model_config": asdict(cfg.model_config())}
