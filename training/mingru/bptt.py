"""Truncated BPTT for the MinGRU LM (gruboros style), data-parallel over MPI ranks.

A sample is a random window of chunk_size * context_chunks + 1 bytes; its chunks are read in order,
overlapping by one byte so no target is skipped, with each layer's state carried (as a constant:
truncated) from chunk to chunk and reset at every new sample. Steps are counted in optimiser steps;
each accumulates the gradients of `grad_accum` consecutive chunk steps (a sample may straddle
optimiser steps, as in gruboros). Ranks split the batch and sum their gradients with one allreduce
through host memory, so every rank applies the same update. Validation, sampling and checkpoints use
the optimiser's evaluation point (x for Schedule-Free AdamW).
"""

import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from eggnog.corpus.samplers import RandomWindows
from eggnog.kernels.core.backend import device_free_bytes, packed_to_device
from eggnog.kernels.core.placement import PRECISIONS, BackendArray, kernels_for, to_host
from eggnog.kernels.layers.elementwise import accumulate, scale_rows
from eggnog.models.mingru import MinGruModel
from eggnog.models.mingru_eval import val_bpb, val_windows
from eggnog.runtime.errors import BadInput
from eggnog.runtime.rundir import check_resume
from eggnog.runtime.step_clock import UNTIMED
from eggnog.training import memory_plan
from eggnog.training.memory_plan import linear_in_depth
from eggnog.training.mingru.run import MinGruRunConfig, load_mingru, restore_optimizer, run_meta, save_mingru
from eggnog.training.run.config import flag, redefault
from eggnog.training.run.loop import run_steps

if TYPE_CHECKING:
    from eggnog.corpus.reader import ByteCorpus
    from eggnog.kernels.core.backend import Backend
    from eggnog.runtime.step_clock import StepClock
    from eggnog.runtime.world import World


@dataclass(frozen=True)
class BpttRunConfig(MinGruRunConfig):
    run_name = "bptt"

    optimizer: str = redefault(MinGruRunConfig, "optimizer", "sf-adamw")
    lr: float = redefault(MinGruRunConfig, "lr", 2.5e-3)
    chunk_size: int = flag(128, "Bytes per TBPTT chunk.")
    context_chunks: int = flag(4, "Chunks per sample, the state carried between them.")
    batch_size: int = flag(8, "Samples per chunk step over all ranks.")
    grad_accum: int = flag(1, "Chunk steps per optimizer step.")
    steps: int = flag(1500, "Optimizer steps in total.", changeable=True)
    recompute: bool = flag(False, "Recompute each block's activations in the backward pass (gradient "
                                  "checkpointing): one block's activations held instead of all; same gradients.",
                           changeable=True)
    precision: str = flag("fp32", "Products of training: fp32; tf32 or bf16 (forward and gradients on TF32 or "
                                  "bf16 tensor cores), fp32 accumulation. Validation stays fp32.", changeable=True)

    def check(self, ranks: int = 1) -> None:
        self.model_config()
        self.check_run()
        if self.chunk_size < 2:
            raise BadInput(f"--chunk-size must be at least 2, got {self.chunk_size}")
        for name in ("context_chunks", "batch_size", "grad_accum", "steps"):
            if getattr(self, name) < 1:
                raise BadInput(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        if self.batch_size % ranks:
            raise BadInput(f"--batch-size {self.batch_size} cannot be split evenly over {ranks} ranks")
        if self.precision not in PRECISIONS:
            raise BadInput(f"unknown --precision {self.precision!r}: choose one of {', '.join(PRECISIONS)}")

    @property
    def window(self) -> int:
        return self.chunk_size * self.context_chunks + 1

    def describe(self, trainer: Any) -> list[str]:
        return super().describe(trainer) + [
            f"batch {self.batch_size} x {self.chunk_size} bytes per chunk, {self.context_chunks} chunks per sample, "
            f"{self.grad_accum} chunk(s) per step", memory_plan.describe(trainer.memory, self.recompute)]

    def summarize(self, summary: dict[str, Any]) -> str:
        return f"done: {summary['steps']} steps in {summary['elapsed_s']:.0f} s; " + self.val_summary(summary)


# A resumed run must agree on these; steps, logging and validation may change.
RESUME_FIXED = BpttRunConfig.fixed_on_resume()


class BpttTrainer:
    def __init__(self, cfg: BpttRunConfig, world: "World", backend: "Backend", corpus: "ByteCorpus",
                 data_seed: int | None = None) -> None:
        """data_seed: the seed of the training windows when not --seed (gossip islands share the
        initialisation and draw their own data)."""
        cfg.check(world.size)
        self.cfg, self.world, self.backend = cfg, world, backend
        self.ops = kernels_for(backend.name)  # validation and sampling: fp32
        self.train_ops = kernels_for(backend.name, cfg.precision)
        model_cfg = cfg.model_config()
        self.rows = cfg.batch_size // world.size
        # before anything is allocated (the layout of a huge --depth included): a run that cannot fit
        # stops here with what it would need
        n_params = linear_in_depth(lambda depth: MinGruModel(replace(model_cfg, depth=depth)).n_params, model_cfg.depth)
        self.memory = memory_plan.bptt_memory(model_cfg, n_params, self.rows * cfg.chunk_size, cfg.optimizer,
                                              cfg.recompute, world.size)
        memory_plan.check_fits(self.memory, memory_plan.host_available(), device_free_bytes(backend), cfg.recompute)
        self.model = MinGruModel(model_cfg)
        self.first_row = world.rank * self.rows
        self.sampler = RandomWindows(corpus.train, cfg.window, cfg.seed if data_seed is None else data_seed)
        self.val = val_windows(corpus.val, cfg.val_rows, cfg.val_tokens)
        # the optimiser's vectors live on the backend: a GPU step copies only losses (and, over several
        # ranks, the gradient for the allreduce) to the host
        self.optimizer = cfg.make_optimizer(self.ops.to_device(self.model.init_params(cfg.seed)))
        self.step, self.best_val = 0, None
        self.states: list[BackendArray] | None = None

    # ---- checkpoints -------------------------------------------------------------------------
    def _host_states(self) -> np.ndarray:
        di = self.model.cfg.dim_inner
        if self.states is None:
            return np.zeros((self.rows, self.model.cfg.depth, di), np.float32)
        return np.stack([to_host(s) for s in self.states], axis=1)

    def save(self, run_dir: Path, best: bool = False) -> None:
        states = self.world.allgather_array(self._host_states())
        if self.world.is_root:
            meta = {**run_meta(self.cfg, "bptt", self.best_val),
                    "data_position": {"chunk_step": self.step * self.cfg.grad_accum}}
            save_mingru(run_dir / "checkpoints", self.step, self.optimizer, meta, {"states": states}, best)
        self.world.barrier()

    def restore(self, path: str | Path) -> dict[str, Any]:
        """Continue from a checkpoint; returns its record."""
        arrays, record = load_mingru(path, "bptt")
        check_resume(record["meta"]["config"], asdict(self.cfg), RESUME_FIXED)
        self.optimizer = restore_optimizer(self.cfg, self.model, arrays, record, path, self.ops.to_device)
        self.step, self.best_val = int(record["step"]), record["meta"].get("best_val_bpb")
        mine = arrays["states"][self.first_row:self.first_row + self.rows]
        at_sample_start = (self.step * self.cfg.grad_accum) % self.cfg.context_chunks == 0
        self.states = None if at_sample_start else \
            [self.ops.to_device(np.ascontiguousarray(mine[:, layer])) for layer in range(self.model.cfg.depth)]
        return record

    # ---- training ------------------------------------------------------------------------------
    def chunk(self, chunk_step: int) -> tuple[np.ndarray, np.ndarray]:
        """Inputs and targets (rows, chunk_size) of this rank at a chunk step; resets the states at a
        new sample."""
        cfg = self.cfg
        sample, c = divmod(chunk_step, cfg.context_chunks)
        if c == 0:
            self.states = None
        window = self.sampler.batch(sample, self.first_row, self.rows)
        piece = window[:, c * cfg.chunk_size:(c + 1) * cfg.chunk_size + 1]
        return piece[:, :-1], piece[:, 1:]

    def train_step(self, clock: Any = UNTIMED) -> float:
        """One optimiser step; returns the mean training loss (bits/byte) of its chunks. `clock`
        times its phases: forward and backward (eval), the allreduce (exchange), the optimiser (update)."""
        cfg, ops = self.cfg, self.train_ops
        p = self.model.views(self.optimizer.train_params())
        grad: BackendArray = None
        losses = []
        for a in range(cfg.grad_accum):
            inputs, targets = packed_to_device(ops.to_device, *self.chunk(self.step * cfg.grad_accum + a))
            with clock.phase("eval"):
                loss, grads, self.states = self.model.loss_and_grad(ops, p, inputs, targets, self.states,
                                                                    cfg.recompute)
                flat = self.model.flatten_on(grads, ops)
                if grad is None:
                    grad = flat
                else:
                    accumulate(ops, grad, flat)
            losses.append(loss)
        scale = np.float32(1.0 / (cfg.grad_accum * self.world.size))
        with clock.phase("exchange"):
            if self.world.size > 1:
                summed = self.world.allreduce_sum(np.concatenate([ops.to_host(grad), np.array(losses, np.float32)]))
                grad, losses = ops.to_device(summed[:self.model.n_params]), summed[self.model.n_params:]
        loss = float(np.array(losses, np.float32).sum() * scale)
        if not math.isfinite(loss):
            raise BadInput(f"the training loss is not finite at step {self.step}; lower --lr (the last "
                           f"checkpoint holds the last good state)")
        with clock.phase("update"):
            if scale != 1:
                grad = scale_rows(ops, grad.reshape(1, -1), ops.to_device(np.array([scale], np.float32))).reshape(-1)
            self.optimizer.step(grad)
        self.step += 1
        return loss

    def validate(self) -> float:
        return val_bpb(self.model, self.ops, self.optimizer.eval_params(), self.val, self.world)

    def steps_done(self) -> int:
        return self.step

    def loop_step(self, clock: "StepClock") -> tuple[dict[str, Any], int]:
        cfg = self.cfg
        loss = self.train_step(clock)
        tokens = cfg.batch_size * cfg.chunk_size * cfg.grad_accum  # predicted bytes of all ranks per step
        return {"step": self.step, "train_bpb": round(loss, 5), "lr": cfg.lr}, tokens

    def run(self, run_dir: Path) -> dict[str, Any]:
        start_step = self.step
        val, seconds = run_steps(self, run_dir, "steps")
        return {"steps": self.step, "val_bpb": val, "best_val_bpb": self.best_val, "elapsed_s": seconds,
                "ran_steps": self.step - start_step}
