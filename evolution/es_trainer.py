"""The integer EGGROLL training run behind bin/train_es.py: data streams, per-member hidden states,
fitness exchange across ranks, validation, metrics, checkpoints and exact resume."""

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from eggnog.corpus.samplers import ContiguousStreams
from eggnog.evolution.coordinator.fields import CoordinatorFields
from eggnog.evolution.eggroll import STATE_ARRAYS, IntEggroll, IntEggrollConfig
from eggnog.evolution.es_memory import int_eggroll_memory
from eggnog.evolution.fitness import bits_per_byte, deggs_proxy, pack_ternary, unpack_ternary
from eggnog.kernels.core.backend import Backend, device_free_bytes
from eggnog.kernels.core.placement import BackendArray, to_host
from eggnog.models.egg import EggConfig, EggModel
from eggnog.models.validation_sample import EGG_SAMPLE, sample_shape
from eggnog.runtime import rundir
from eggnog.runtime.checkpoint import load_checkpoint, mark_best, save_checkpoint
from eggnog.runtime.errors import BadInput
from eggnog.training.memory_plan import HEADROOM, check_device_fits, device_line, linear_in_depth, most_that_fit
from eggnog.training.run.config import RunConfig, described, flag
from eggnog.training.run.loop import run_steps
from eggnog.training.run.schedule import RunSchedule

if TYPE_CHECKING:  # annotations only: the transformer and the corpus readers load when used
    from eggnog.corpus.deggs_tokens import TokenCorpus
    from eggnog.corpus.reader import ByteCorpus
    from eggnog.models.egg_transformer import TransformerConfig, TransformerModel
    from eggnog.runtime.step_clock import StepClock
    from eggnog.runtime.world import World


@dataclass(frozen=True)
class EsRunConfig(CoordinatorFields, RunSchedule, IntEggrollConfig, RunConfig):
    """The strategy's hyperparameters (nano-egg's names and defaults) plus the run's; the population,
    group size and model default to a size that trains on a laptop CPU in minutes."""

    run_name = "es"
    unit = "bits/byte"  # of its losses (the transformer on token data: bits/token)
    divergence_hint = "lower --lr (adamw) or raise --sigma-shift"
    model_name = "egg"  # what its checkpoints say they hold

    # IntEggrollConfig's fields as flags (their defaults live there, or here where the run's differ)
    population: int = described(IntEggrollConfig, "population", "Population over all ranks.",
                                default=512, per_rank=("population_per_rank", "parallel_generations_per_gpu"))
    sigma_shift: int = described(IntEggrollConfig, "sigma_shift", "Integer noise scale: sigma = 2^-shift of the "
                                 "fixed-point unit.")
    alpha: float = described(IntEggrollConfig, "alpha", ">= 1: exponent of the decaying z-test level; < 1: a "
                             "constant level.")
    alpha_decay_timestep: int = described(IntEggrollConfig, "alpha_decay_timestep", "Steps over which the z-test "
                                          "level decays to 2^-alpha.")
    use_clt: bool = described(IntEggrollConfig, "use_clt", "Noise values (on) or their signs (off).")
    fast_fitness: bool = described(IntEggrollConfig, "fast_fitness", "Sign of each antithetic difference (on) or "
                                   "z-scored differences (off).")
    noise_reuse: int = described(IntEggrollConfig, "noise_reuse", "Steps sharing one perturbation; 0: always the "
                                 "same.")
    tokens_per_update: int = described(IntEggrollConfig, "tokens_per_update", "Bytes each member reads per step.")
    group_size: int = described(IntEggrollConfig, "group_size", "Members sharing one data stream (even).", default=64)
    perturbation_rank: int = described(IntEggrollConfig, "perturbation_rank", "Rank of each perturbation; integer "
                                       "EGGROLL uses 1.")
    optimizer: str = described(IntEggrollConfig, "optimizer", "ztest (nano-egg: z-test gated +-1 steps) or adamw "
                               "(d-eggs: AdamW on the vote, +-1 steps through a float accumulator).")
    lr: float = described(IntEggrollConfig, "lr", "adamw: learning rate from step 200; 4x before step 100, 2x before "
                          "200 (d-eggs).")
    beta1: float = described(IntEggrollConfig, "beta1", "adamw: first moment decay.")
    beta2: float = described(IntEggrollConfig, "beta2", "adamw: second moment decay.")
    weight_decay: float = described(IntEggrollConfig, "weight_decay", "adamw: weight decay, on the raw int8 weight.")
    lr_decay: str = described(IntEggrollConfig, "lr_decay", "adamw after the warm-up: none (d-eggs: the rate stays) "
                              "or linear (falls to 0 at the run's last step).")
    adaptive_noise: bool = described(IntEggrollConfig, "adaptive_noise", "d-eggs' adaptive noise scaling: each row, "
                                     "column and vector element has an overlay (start 64; +5 when one of its weights "
                                     "moved, -1 otherwise) that scales its noise by clip(overlay, 0, 64) / 64.")
    seed: int = flag(0, "Seed of initialisation and noise.")
    depth: int = flag(1, "EGG blocks.", aliases=("n_layer",))
    dim: int = flag(64, "EGG width D.", aliases=("n_embd",))
    steps: int = flag(1000, "Updates (nano-egg's epochs) to run in total.", aliases=("epochs",), changeable=True)
    val_rows: int = flag(EGG_SAMPLE[0], "Validation rows, each from a zero state.", changeable=True)
    val_tokens: int = flag(EGG_SAMPLE[1], "Bytes scored per validation row.", changeable=True)
    data: str | None = flag(None, "Corpus (.bin/.h5/.zarr).", default_text="the embedded stdlib corpus",
                            metavar="<path>")
    mode: str = flag("sync", "sync (every rank evaluates its slice and all exchange fitness each step) or "
                             "coordinator (rank 0 hands population chunks to the other ranks; see docs/cluster.md).",
                     changeable=True)
    def model(self) -> "EggConfig | TransformerConfig":
        return EggConfig(self.depth, self.dim)

    def build_model(self) -> "EggModel | TransformerModel":
        return EggModel(cast(EggConfig, self.model()))  # a config whose model() is not the EGG's builds its own

    def n_params(self) -> int:
        return linear_in_depth(lambda depth: replace(self, depth=depth).build_model().n_params, self.depth)

    def member_bytes(self) -> int:
        """Host bytes a member of this rank holds: its state and window (int8), its score."""
        return self.depth * self.dim + self.tokens_per_update + 1 + 8

    def host_memory(self, ranks: int) -> dict[str, int]:
        n, members = self.n_params(), self.population // ranks
        return {"parameters (three copies)": 3 * n,
                "AdamW state": 12 * n if self.optimizer == "adamw" else 0,
                "members' states and windows": members * self.member_bytes()}

    def device_memory(self, model: "EggModel | TransformerModel", members: int) -> dict[str, int]:
        """{what: bytes} one rank places on the GPU evaluating `members` at once (evolution/es_memory.py)."""
        return int_eggroll_memory(self, model, members)

    def memory_line(self, model: "EggModel | TransformerModel", members: int, free_bytes: int | None) -> str | None:
        """The header line on a rank's GPU memory (None on the CPU), or BadInput where it cannot fit
        `free_bytes`, naming how many members would."""
        needs = self.device_memory(model, members)
        if free_bytes is not None and sum(needs.values()) > HEADROOM * free_bytes:
            fits = most_that_fit(lambda count: sum(self.device_memory(model, count).values()), free_bytes, members)
            check_device_fits(needs, free_bytes, f"at most {fits} members fit at once (fewer members per rank: a "
                              "smaller --population, more ranks or a smaller --population-chunk; or fewer "
                              "--tokens-per-update, or a smaller model)")
        return device_line(needs, free_bytes)

    def check(self, ranks: int = 1) -> None:
        for name in ("depth", "dim", "steps", "validate_every", "checkpoint_every", "keep_checkpoints", "val_rows",
                     "val_tokens"):
            if getattr(self, name) < 1:
                raise BadInput(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        self.model()
        if self.mode not in ("sync", "coordinator"):
            raise BadInput(f"unknown --mode {self.mode!r}: choose sync or coordinator")
        if self.mode == "sync":
            if self.transport != "mpi":
                raise BadInput(f"--transport {self.transport} is the coordinator's: add --mode coordinator")
            if self.chunk_mean_filter or self.adaptive_threshold:
                raise BadInput("--chunk-mean-filter and --adaptive-threshold shape a chunk's fitness: they need "
                               "--mode coordinator")
            super().check(ranks)
            return
        super().check(1)
        self.check_coordinator(ranks)

    def layout(self, world: "World") -> str | None:
        if self.mode == "coordinator" and self.transport == "tcp":
            return f"coordinator listening on {self.listen} for workers, chunks of {self.population_chunk}"
        if self.mode == "coordinator":
            return f"coordinator (rank 0) and {world.size - 1} workers, chunks of {self.population_chunk}"
        return None

    def describe(self, trainer: Any) -> list[str]:
        share = (f"{self.population // self.population_chunk} chunks" if self.mode == "coordinator"
                 else f"{trainer.members} per rank")
        return [f"EGG {self.depth}x{self.dim}: {trainer.model.n_params:,} int8 parameters; population "
                f"{self.population} ({share}), {self.tokens_per_update} bytes per member per step"] + \
            ([trainer.memory_line] if trainer.memory_line else [])

    def summarize(self, summary: dict[str, Any]) -> str:
        return (f"done: {summary['steps']} steps in {summary['elapsed_s']:.0f} s; val {summary['val_bpb']:.3f} "
                f"bits/byte (best {summary['best_val_bpb']:.3f})")


# A resumed run must agree on these; the rest (steps, logging, validation sample) may change.
RESUME_FIXED = EsRunConfig.fixed_on_resume()


# Fixed fields added after runs were stored: a stored config without one ran with its default.
ADDED_FIXED = ("population_chunk", "chunk_mean_filter", "adaptive_threshold", "optimizer", "lr", "beta1", "beta2",
               "weight_decay", "adaptive_noise")


def check_resume(stored: dict[str, Any], requested: dict[str, Any]) -> None:
    defaults = {name: EsRunConfig.__dataclass_fields__[name].default for name in ADDED_FIXED}
    rundir.check_resume({**defaults, **stored}, requested, RESUME_FIXED)


def val_sample(cfg: EsRunConfig, corpus: "ByteCorpus | TokenCorpus") -> tuple[int, int]:
    """(rows, bytes scored per row) of the validation sample, each row from a zero state
    (models/validation_sample.py)."""
    return sample_shape(len(corpus.val), cfg.val_rows, cfg.val_tokens)


def context_windows(rows: np.ndarray, context: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Validation rows (n, tokens + 1) cut into windows of `context` scored tokens (a window's last
    token is the next one's first), as a model with that context reads them: full windows, then the
    remainders (None where tokens is a multiple of context)."""
    tokens = rows.shape[1] - 1
    full = tokens // context
    windows = np.stack([rows[:, i * context:(i + 1) * context + 1] for i in range(full)], axis=1)
    rest = rows[:, full * context:] if tokens % context else None
    return windows.reshape(-1, context + 1), rest


def val_loglik(model: "EggModel | TransformerModel", cfg: EsRunConfig, backend: Backend, params: npt.ArrayLike,
               step: int, corpus: "ByteCorpus | TokenCorpus", rows: npt.NDArray[np.integer], tokens: int) -> int:
    """Log-likelihood sum (1/16 bit) of the unperturbed model over validation rows `rows` (indices). A
    model with a fixed context (the transformer: the window it trains on) reads each row in windows of
    that context, each from an empty cache; a recurrent one reads the whole row from a zero state."""
    if not len(rows):
        return 0
    length = tokens + 1
    windows = np.stack([np.asarray(corpus.val[r * length:(r + 1) * length]) for r in rows])
    context = getattr(model, "context", None)
    parts = context_windows(windows, context) if context and tokens > context else (windows, None)
    total = 0
    for part in (p for p in parts if p is not None):
        probe = IntEggroll(model, cfg, backend, params, cfg.seed, step=step, members=len(part))
        layers, width = model.state_dims
        states = backend.zeros((layers, len(part), width), np.int8)
        total += int(probe.evaluate(part, states, perturbed=False).sum())
    return total


def write_es_checkpoint(run_dir: Path, cfg: EsRunConfig, step: int, params: np.ndarray, states: np.ndarray,
                        best_val: float | None, best: bool = False, extra: dict[str, np.ndarray] | None = None,
                        write: Callable[..., Path] = save_checkpoint) -> Path:
    """An EGG checkpoint: params, every member's states (members, layers, dim) and `extra` arrays."""
    meta = {"config": asdict(cfg), "model": cfg.model_name, "best_val_bpb": best_val, "data_position": {"step": step}}
    path = write(run_dir / "checkpoints", step, {"params": params, "states": states, **(extra or {})}, meta)
    if best:
        mark_best(run_dir / "checkpoints", path)
    return path


def optimizer_state_of(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: arrays[name] for name in STATE_ARRAYS if name in arrays}


def read_es_checkpoint(path: str | Path, cfg: EsRunConfig,
                       model: "EggModel | TransformerModel") -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """(arrays, record) of an EGG checkpoint that this run may resume from; BadInput otherwise."""
    arrays, record = load_checkpoint(path)
    meta = record.get("meta", {})
    if meta.get("model") != cfg.model_name:
        raise BadInput(f"checkpoint {str(path)!r} holds a {meta.get('model')!r} model, not a {cfg.model_name!r} one")
    check_resume(meta.get("config", {}), asdict(cfg))
    if arrays["params"].size != model.n_params or arrays["states"].shape[0] != cfg.population:
        raise BadInput(f"checkpoint {str(path)!r} does not match this model and population")
    return arrays, record


class EsTrainer:
    def __init__(self, cfg: EsRunConfig, world: "World", backend: Backend, corpus: "ByteCorpus | TokenCorpus") -> None:
        """Checks everything about the run (so bad input stops before a run directory exists)."""
        cfg.check(world.size)
        self.cfg, self.world, self.backend, self.corpus = cfg, world, backend, corpus
        self.model = cfg.build_model()
        self.members = cfg.population // world.size
        self.first = world.rank * self.members
        self.streams = ContiguousStreams(corpus.train, cfg.population // cfg.group_size, cfg.tokens_per_update)
        self.val_rows, self.val_tokens = val_sample(cfg, corpus)
        self.best_val: float | None = None
        self.memory_line = cfg.memory_line(self.model, self.members, device_free_bytes(backend))
        self.strategy = IntEggroll(self.model, cfg, backend, self.model.init_params(cfg.seed), cfg.seed,
                                   first_member=self.first, members=self.members)
        layers, width = self.model.state_dims
        self.states: BackendArray = backend.zeros((layers, self.members, width), np.int8)  # (layers, members, dim)

    # ---- checkpoints -------------------------------------------------------------------------
    def save(self, run_dir: Path, best: bool = False) -> None:
        states = np.ascontiguousarray(to_host(self.states).transpose(1, 0, 2))  # stored as (members, layers, dim)
        gathered = self.world.allgather_array(states)
        if self.world.is_root:
            write_es_checkpoint(run_dir, self.cfg, self.strategy.step, self.strategy.host_params(), gathered,
                                self.best_val, best, extra=self.strategy.host_optimizer_state())
        self.world.barrier()

    def restore(self, path: str | Path) -> None:
        arrays, record = read_es_checkpoint(path, self.cfg, self.model)
        self.strategy = IntEggroll(self.model, self.cfg, self.backend, arrays["params"], self.cfg.seed,
                                   step=record["step"], first_member=self.first, members=self.members,
                                   optimizer_state=optimizer_state_of(arrays))
        mine = arrays["states"][self.first:self.first + self.members]
        self.states = self.backend.to_device(np.ascontiguousarray(mine.transpose(1, 0, 2)))
        self.best_val = record["meta"].get("best_val_bpb")

    # ---- one step ------------------------------------------------------------------------------
    def exchange(self, scores: np.ndarray) -> tuple[np.ndarray, float]:
        """Every rank gets the shaped fitness of every pair (the strategy's `shape`): ternary-packed signs
        of its own pairs (5 per byte), or all raw scores when fitness is z-scored over the population."""
        if self.cfg.fast_fitness:
            mine = self.strategy.shape(scores)
            packed = self.world.allgather_array(pack_ternary(mine)).reshape(self.world.size, -1)
            fitness = np.concatenate([unpack_ternary(row, mine.size) for row in packed])
            total = float(self.world.allgather_array(np.array([scores.sum()], dtype=np.float64)).sum())
            return fitness, total
        everything = self.world.allgather_array(scores)
        return self.strategy.shape(everything), float(everything.sum())

    def validate(self) -> float:
        """Bits/byte of the unperturbed model from a zero state on a fixed sample of the val split;
        rows are shared out over ranks."""
        rows = np.array_split(np.arange(self.val_rows), self.world.size)[self.world.rank]
        total: float = val_loglik(self.model, self.cfg, self.backend, self.strategy.params, self.strategy.step,
                           self.corpus, rows, self.val_tokens)
        total = float(self.world.allgather_array(np.array([float(total)])).sum())
        return bits_per_byte(total, self.val_rows * self.val_tokens)

    def steps_done(self) -> int:
        return self.strategy.step

    def loop_step(self, clock: "StepClock") -> tuple[dict[str, Any], int]:
        cfg, step = self.cfg, self.strategy.step
        windows = self.streams.member_batch(step, self.first, self.members, cfg.group_size)
        with clock.phase("eval"):
            scores = self.strategy.evaluate(windows, self.states)
        with clock.phase("exchange"):
            fitness, total = self.exchange(scores)
        alpha = cfg.alpha_at(step)
        with clock.phase("update"):
            moved = self.strategy.update(fitness)
        tokens = cfg.population * cfg.tokens_per_update  # member-tokens evaluated by all ranks
        record = {"step": step + 1, "train_bpb": round(bits_per_byte(total, tokens), 5), "alpha": alpha,
                  "moved_fraction": round(moved, 6)}
        if self.model.has_proxy_loss:
            proxy = self.world.allgather_array(np.array([self.strategy.proxy_sum], np.int64)).sum()
            record["train_deggs_proxy"] = round(deggs_proxy(proxy, tokens), 5)
        return record, tokens

    def run(self, run_dir: Path) -> dict[str, Any]:
        val_bpb, seconds = run_steps(self, run_dir, "steps")
        return {"steps": self.steps_done(), "val_bpb": val_bpb, "best_val_bpb": self.best_val, "elapsed_s": seconds}
