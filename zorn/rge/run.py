"""The zero-order RNN training run behind bin/train_rge.py: a task, a model (LSTM, DNC or MinGRU),
and a solver (CD-RGE, FDRAS, or the BPTT baseline), logging per step the loss, eps, lr, seconds
per step and where they went (probes, exchange, update), probes and peak memory, with checkpoints,
exact resume and a stop on non-finite loss. Its steps run in the shared loop (training/run/loop.py),
which validates, saves and plots on the shared schedule (training/run/schedule.py).

Every --validate-every steps the unperturbed model scores held-out samples (zorn/validation.py; `best`
follows the validation loss) and the step's training batch (`clean_loss`); --curriculum-max raises the
training lengths as the loss falls (zorn/curriculum.py); --lr-search settles the learning rate by short
trials first (zorn/lr_search.py).
The chosen rate, the curriculum's state and the best validation loss travel in the checkpoints.

Losses are mask-weighted cross-entropy in bits per predicted token. In overfit mode (the paper's
Table 1 workload: one fixed batch) the run stops once the loss is below `target_loss`; the default
0.1443 bits is the authors' 0.1 nats.
"""

import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm import tqdm

from eggnog.kernels.core.placement import to_host
from eggnog.runtime.checkpoint import load_checkpoint, mark_best, save_checkpoint
from eggnog.runtime.errors import BadInput
from eggnog.runtime.files import write_atomic
from eggnog.runtime.rundir import JsonLog, check_resume
from eggnog.runtime.step_clock import UNTIMED, rounded
from eggnog.runtime.stop_signals import StopSignals, exit_if_signalled
from eggnog.training.memory import MemoryMeter
from eggnog.training.memory_plan import linear_in_depth
from eggnog.training.optimizers import checkpoint_arrays, state_from_checkpoint
from eggnog.training.run.config import RunConfig, described, flag, redefault
from eggnog.training.run.loop import run_steps
from eggnog.training.run.schedule import PLOTS_HELP, RunSchedule
from eggnog.zorn.curriculum import Curriculum
from eggnog.zorn.lr_search import parse_bracket, search_lr
from eggnog.zorn.rge.memory import check_rge_fits, with_probe_batch
from eggnog.zorn.rge.trainer import NonFiniteLoss, RgeConfig, RgeTrainer, step_optimizer
from eggnog.zorn.tasks import VOCAB, make_task, overfit_task
from eggnog.zorn.validation import MIN_PASS_TOKENS, Validation, validation_bounds

if TYPE_CHECKING:
    from eggnog.corpus.reader import ByteCorpus
    from eggnog.kernels.core.backend import Backend
    from eggnog.models.dnc import DncModel
    from eggnog.models.lstm import LstmModel
    from eggnog.runtime.step_clock import StepClock
    from eggnog.runtime.world import World
    from eggnog.training.optimizers import AdamW, Sgd
    from eggnog.zorn.batch import TaskBatch
    from eggnog.zorn.mingru_task import MinGruTaskModel
    from eggnog.zorn.tasks import CharLmTask, FixedBatchTask, SyntheticTask

MODELS = ("lstm", "dnc", "mingru")
SOLVERS = ("cdrge", "fdras", "bptt")


@dataclass(frozen=True)
class RgeRunConfig(RunSchedule, RgeConfig, RunConfig):
    run_name = "rge"
    generates = False
    divergence_hint = "lower --lr or --sigma"
    validates = False

    # RgeConfig's fields as flags (their defaults live there, or here where the run's differ)
    solver: str = described(RgeConfig, "solver", "cdrge, fdras or bptt (the baseline).")
    probes: int = described(RgeConfig, "probes", "Probes per step over all ranks.",
                            per_rank=("probes_per_rank", "meta_perturbations"))
    lr: float = described(RgeConfig, "lr", "Learning rate.")
    sigma: float | None = described(RgeConfig, "sigma", "Perturbation size.",
                                    aliases=("epsilon",), default_text="tied to --lr, as the authors ran it")
    optimizer: str = described(RgeConfig, "optimizer", "sgd, momentum or adam on the estimate.")
    beta1: float = described(RgeConfig, "beta1", "Momentum / Adam first moment.")
    beta2: float = described(RgeConfig, "beta2", "Adam second moment.")
    distribution: str = described(RgeConfig, "distribution", "Probe directions: rademacher, normal or uniform.")
    antithetic: bool = described(RgeConfig, "antithetic", "Probes in +z/-z pairs.")
    dist_mode: str = described(RgeConfig, "dist_mode", "reduce (probe sums reduced to rank 0, which broadcasts the "
                               "parameters) or seeds (every rank applies every probe).")
    probe_batch: int = described(RgeConfig, "probe_batch", "Perturbed evaluations run in one pass of the model "
                                 "(LSTM: as extra heads); more amortise launches on a GPU and take that many times a "
                                 "forward's memory. 0: on a GPU as many as 1 GiB holds (LSTM), else 1.",
                                 changeable=True)
    model: str = flag("lstm", "lstm, dnc or mingru.")
    # defaults: a tiny LSTM that trains on a laptop; Table 1 sizes in bench/zorn_paper/table1_grid.py
    input_size: int = flag(16, "Embedding width E.")
    hidden_size: int = flag(32, "LSTM/DNC hidden width H.")
    num_heads: int = flag(4, "LSTM heads N (H divisible by N).")
    memory_size: int = flag(16, "DNC memory rows.")
    head_size: int = flag(16, "DNC memory row width.")
    num_reads: int = flag(1, "DNC read heads.")
    dim: int = flag(64, "MinGRU width.", aliases=("n_embd",))
    depth: int = flag(2, "MinGRU blocks.", aliases=("n_layer",))
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
    checkpoint_every: int = redefault(RunSchedule, "checkpoint_every", 50)
    data: str | None = flag(None, "Corpus for char_lm.", default_text="the embedded stdlib corpus", metavar="<path>")
    validate_every: int = redefault(RunSchedule, "validate_every", 50, help="Steps between validations (0: never).")
    plots: bool = redefault(RunSchedule, "plots", True, help=PLOTS_HELP)
    val_samples: int = flag(256, "Held-out samples scored at each validation.")
    val_min_len: int | None = flag(None, "Shortest validation sample.", default_text="the longest training sample + 1")
    val_max_len: int | None = flag(None, "Longest validation sample.", default_text="--val-min-len + 49")
    curriculum_max: int | None = flag(None, "Longest sample the curriculum may reach.", default_text="no curriculum")
    # the rule and the search may change on resume: the bound reached and the rate chosen travel in checkpoints
    curriculum_threshold: float = flag(1.0, "Curriculum: the fast EMA of the training loss (bits/token) must stay "
                                            "below this ...", changeable=True)
    curriculum_patience: int = flag(50, "... for this many consecutive steps ...", changeable=True)
    curriculum_step: int = flag(2, "... to raise --max-seq-len by this much.", changeable=True)
    lr_search: str | None = flag(None, "Bisect the learning rate in log space in this bracket by short trials, then "
                                       "train with the best.", default_text="no search", metavar="LO,HI",
                                 changeable=True)
    lr_search_steps: int = flag(20, "Steps of each learning-rate trial.", changeable=True)
    lr_search_rounds: int = flag(3, "Bisection rounds (two trials each).", changeable=True)

    def check(self, ranks: int = 1) -> None:
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
        for name in ("batch_size", "steps", "checkpoint_every", "keep_checkpoints", "val_samples",
                     "curriculum_patience", "curriculum_step", "lr_search_steps", "lr_search_rounds"):
            if getattr(self, name) < 1:
                raise BadInput(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        if self.validate_every < 0:
            raise BadInput(f"--validate-every must be 0 (never) or positive, got {self.validate_every}")
        self._check_lengths()
        if self.lr_search is not None:
            parse_bracket(self.lr_search)

    def _check_lengths(self) -> None:
        low, high = validation_bounds(self)
        if low < 1 or high < low:
            raise BadInput(f"validation lengths must satisfy 1 <= --val-min-len <= --val-max-len, got {low} and {high}")
        if self.curriculum_max is None:
            return
        if self.overfit:
            raise BadInput("--curriculum-max needs sampled batches; --overfit trains on one fixed batch")
        if self.curriculum_max <= self.max_seq_len:
            raise BadInput(f"--curriculum-max {self.curriculum_max} must exceed --max-seq-len {self.max_seq_len}")

    def host_memory(self, ranks: int) -> dict[str, int]:
        if self.model == "mingru":
            from eggnog.models.mingru import MinGruConfig

            model = MinGruConfig(self.dim, self.depth, self.expansion_factor, self.ff_mult).check()
            n = linear_in_depth(lambda depth: build_model(replace(self, depth=depth)).n_params, self.depth)
            width = 4 * model.dim + 3 * model.dim_inner + 2 * model.ff_inner + 2
        else:
            n = build_model(self).n_params
            width = 8 * self.hidden_size + self.input_size
        # a sample is its input and its answer; a validation pass holds no more (zorn/validation.py)
        tokens = self.batch_size * 2 * (self.curriculum_max or self.max_seq_len)
        if self.validate_every:
            tokens = max(tokens, MIN_PASS_TOKENS)
        return {"parameters, optimiser state and the estimate": 4 * 5 * n, "probe losses": 16 * self.probes,
                "batch and activations": 4 * tokens * (width + 2 * VOCAB) * 2 * max(1, self.probe_batch)}

    @property
    def uses_corpus(self) -> bool:
        return self.task == "char_lm"

    def layout(self, world: "World") -> str | None:
        return "series" if self.solver == "bptt" or world.size == 1 else self.dist_mode

    def describe(self, trainer: Any) -> list[str]:
        probes = "" if self.solver == "bptt" else f" with {self.probes} {self.distribution} probes, eps {self.eps}"
        return [f"{self.model}: {trainer.model.n_params:,} parameters; {self.solver}{probes}, lr {self.lr}, "
                f"{self.optimizer}; task {self.task}, batch {self.batch_size}"
                + (" (overfit one batch)" if self.overfit else "")] + self._schedule_lines() + \
            ([trainer.memory_line] if getattr(trainer, "memory_line", None) else [])

    def _schedule_lines(self) -> list[str]:
        lines = []
        if self.validate_every:
            where = ("windows of the val split" if self.task == "char_lm" else
                     "lengths {}..{}".format(*validation_bounds(self)))
            lines.append(f"validation every {self.validate_every} steps: {self.val_samples} held-out samples, {where}")
        if self.curriculum_max is not None:
            lines.append(f"curriculum: --max-seq-len {self.max_seq_len} -> {self.curriculum_max} by "
                         f"{self.curriculum_step} after {self.curriculum_patience} steps with the loss EMA below "
                         f"{self.curriculum_threshold} bits/token")
        if self.lr_search is not None:
            lines.append(f"lr search in [{self.lr_search}]: {self.lr_search_rounds} rounds of two "
                         f"{self.lr_search_steps}-step trials" + ("" if self.sigma is not None else ", eps = lr"))
        return lines

    def summarize(self, summary: dict[str, Any]) -> str:
        status = "reached the target loss" if summary["reached_target"] else "ran its step budget"
        line = f"done: {summary['steps']} steps, loss {summary['loss']:.4f} bits/token ({status})"
        if summary.get("clean_loss") is not None:
            line += f"; clean loss {summary['clean_loss']:.4f} at the last validation"
        if summary.get("val_loss") is not None:
            line += (f"; validation {summary['val_loss']:.4f} bits/token, accuracy {summary['val_accuracy']:.3f} "
                     f"(best {summary['best_val_loss']:.4f})")
            if self.overfit:  # the documented outcome, which reads as a failure without this
                line += (" (--overfit fits one fixed batch, as Table 1 times it: validation on fresh batches is not "
                         "expected to fall; the loss on the batch is the measure)")
        return line + (f"; lr {summary['lr']:.4g} from the search" if self.lr_search is not None else "")


RESUME_FIXED = RgeRunConfig.fixed_on_resume()


def build_model(cfg: RgeRunConfig) -> "LstmModel | DncModel | MinGruTaskModel":
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


def open_task_corpus(cfg: RgeRunConfig, world: "World") -> "ByteCorpus | None":
    """The byte corpus char_lm reads (--data, or the embedded default); None for synthetic tasks."""
    if cfg.task != "char_lm":
        return None
    from eggnog.corpus.default import default_corpus
    from eggnog.corpus.reader import open_corpus

    return open_corpus(cfg.data) if cfg.data else world.root_first(default_corpus)


def build_task(cfg: RgeRunConfig,
               corpus: "ByteCorpus | None") -> "SyntheticTask | CharLmTask | FixedBatchTask":
    task = make_task(cfg.task, cfg.min_seq_len, cfg.max_seq_len, cfg.seed, corpus)
    return overfit_task(task, cfg.batch_size) if cfg.overfit else task


class RgeRun:
    def __init__(self, cfg: RgeRunConfig, world: "World", backend: "Backend",
                 corpus: "ByteCorpus | None" = None) -> None:
        cfg.check(world.size)
        self.model = build_model(cfg)
        cfg = with_probe_batch(cfg, self.model.n_params, backend.name, world.size)
        self.cfg, self.world, self.backend, self.corpus = cfg, world, backend, corpus
        self.memory_line = check_rge_fits(cfg, self.model, backend)
        self.lr = cfg.lr  # the rate trained with: --lr, or the one --lr-search chose
        self.lr_settled = cfg.lr_search is None
        self.curriculum = (Curriculum(cfg.max_seq_len, cfg.curriculum_max, cfg.curriculum_step,
                                      cfg.curriculum_threshold, cfg.curriculum_patience)
                           if cfg.curriculum_max is not None else None)
        self.task = build_task(cfg, corpus)
        self.validation = Validation(cfg, corpus) if cfg.validate_every else None
        self.step, self.best_val = 0, None
        self.loss: float | None = None
        self._start(self.model.init_params(cfg.seed))

    @property
    def train_cfg(self) -> RgeRunConfig:
        """The config the estimator and optimiser run on: the chosen rate (eps follows it unless given)."""
        return replace(self.cfg, lr=self.lr)

    def _start(self, params: np.ndarray, opt_arrays: dict[str, np.ndarray] | None = None,
               opt_scalars: dict[str, Any] | None = None) -> None:
        cfg = self.train_cfg
        self.optimizer: AdamW | Sgd | None
        if cfg.solver == "bptt":
            self.rge = None
            self.optimizer = step_optimizer(cfg, self.backend.to_device(np.array(params, np.float32)))
        else:
            self.rge = RgeTrainer(self.model, cfg, self.backend, params, cfg.seed, self.step, self.world)
            self.optimizer = self.rge.optimizer
        if opt_arrays and self.optimizer is not None:
            self.optimizer.load_state(opt_arrays, opt_scalars)

    def _follow_curriculum(self) -> None:
        assert self.curriculum is not None  # called only where the run has one
        self.task = build_task(replace(self.cfg, max_seq_len=self.curriculum.max_seq_len), self.corpus)

    def own_optimizer(self) -> "AdamW | Sgd":
        """The optimiser of a BPTT run (a zero-order run's lives in its RgeTrainer)."""
        assert self.optimizer is not None
        return self.optimizer

    def host_params(self) -> np.ndarray:
        return to_host(self.own_optimizer().train_params()).copy() if self.rge is None else self.rge.host_params()

    # ---- checkpoints -------------------------------------------------------------------------
    def save(self, run_dir: Path, best: bool = False) -> None:
        if self.world.is_root:
            arrays, scalars = checkpoint_arrays(self.optimizer) if self.optimizer is not None else ({}, {})
            path = save_checkpoint(run_dir / "checkpoints", self.step, {"params": self.host_params(), **arrays},
                                   {"model": self.cfg.model, "trainer": "rge", "config": asdict(self.cfg),
                                    "optimizer_state": scalars, "lr": self.lr, "best_val_loss": self.best_val,
                                    "curriculum": self.curriculum.state() if self.curriculum else None})
            if best:
                mark_best(run_dir / "checkpoints", path)
        self.world.barrier()

    def restore(self, path: str | Path) -> None:
        arrays, record = load_checkpoint(path)
        meta = record.get("meta", {})
        if meta.get("trainer") != "rge" or meta.get("model") != self.cfg.model:
            raise BadInput(f"checkpoint {str(path)!r} holds a {meta.get('model')!r} model from "
                           f"{meta.get('trainer')!r} training, not a {self.cfg.model!r} zero-order run")
        # fields a run predates (validation, curriculum, lr search) stand at their defaults, as when it ran
        check_resume({**asdict(RgeRunConfig()), **meta.get("config", {})}, asdict(self.cfg), RESUME_FIXED)
        self.lr, self.lr_settled = float(meta.get("lr", self.cfg.lr)), True
        self.best_val = meta.get("best_val_loss")
        if self.curriculum is not None and meta.get("curriculum"):
            self.curriculum.load(meta["curriculum"])
            self._follow_curriculum()
        self._start(arrays["params"], state_from_checkpoint(arrays), meta.get("optimizer_state"))
        self.step = int(record["step"])

    # ---- training ------------------------------------------------------------------------------
    def train_step(self, batch: "TaskBatch", clock: Any = UNTIMED) -> float:
        name = self.backend.name
        if self.rge is not None:
            self.rge.step = self.step  # the run's counter: steps skipped by a curriculum or a search count too
            return self.rge.train_step(batch, clock)
        with clock.phase("eval"):
            loss, grad = self.model.loss_and_grad(name, self.own_optimizer().train_params(), batch, on_device=True)
        if not math.isfinite(loss):
            raise NonFiniteLoss(self.step)
        with clock.phase("update"):
            self.own_optimizer().step(grad)
        return loss

    def validate(self) -> dict[str, float]:
        """{"val_loss", "val_accuracy"} of the current parameters on the held-out samples, and their
        `clean_loss` on this step's training batch."""
        assert self.validation is not None  # called only where the run validates
        scores = self.validation.score(self.model, self.backend, self.host_params(), self.world)
        return {**scores, "clean_loss": self.clean_loss(self.batch)}

    def clean_loss(self, batch: "TaskBatch") -> float:
        """The loss (bits/token) of the unperturbed parameters on `batch`: the logged `loss` of a zero-order
        step is the probes' mean at theta +- eps z, which at a large eps lies well above it."""
        params = self.own_optimizer().train_params() if self.rge is None else self.rge.theta
        return float(self.model.loss(self.backend.name, params, batch))

    def search_lr(self, run_dir: Path) -> None:
        """Settle the rate by --lr-search: every trial from the initial weights over the first batches;
        each trial a line of lr_search.jsonl as it ends, then the choice; the run then starts from the
        initial weights at the chosen rate."""
        cfg, initial = self.cfg, self.host_params()
        steps = cfg.lr_search_steps

        def trial(lr: float) -> float:
            self.lr = lr
            self._start(initial)
            losses = []
            try:
                for self.step in range(steps):
                    losses.append(self.train_step(self.task.batch(self.step, cfg.batch_size)))
                    exit_if_signalled(signals, self.world, f"during the learning-rate search, before any training "
                                      f"step: nothing to keep; run it again (or --resume {run_dir}) to search again")
            except NonFiniteLoss:
                return math.inf
            return float(np.mean(losses[-max(1, steps // 4):]))  # the loss reached: the last quarter's mean

        path = run_dir / "lr_search.jsonl"
        if self.world.is_root:
            write_atomic(path, b"")
        log = JsonLog(path, enabled=self.world.is_root)
        try:
            with StopSignals() as signals:
                lo, hi = parse_bracket(cfg.lr_search)
                chosen, trials = search_lr(lo, hi, cfg.lr_search_rounds, trial,
                                           lambda record: log.write(**record, eps=cfg.sigma or record["lr"],
                                                                    steps=steps))
            log.write(chosen_lr=chosen, trials=len(trials))
        finally:
            log.close()
        self.lr, self.lr_settled, self.step = chosen, True, 0
        self._start(initial)
        if self.world.is_root:
            print(f"lr search: {len(trials)} trials of {steps} steps in [{cfg.lr_search}] chose lr {chosen:.4g} "
                  f"({path.name})")

    # ---- the run (training/run/loop.py's hooks) ----------------------------------------------------
    best_key, loss_key = "val_loss", "loss"

    def steps_done(self) -> int:
        return self.step

    def before_step(self) -> None:
        """Untimed: the step's batch, and a fresh window of the memory peaks."""
        self.batch = self.task.batch(self.step, self.cfg.batch_size)
        self.meter.reset()

    def loop_step(self, clock: "StepClock") -> tuple[dict[str, Any], None]:
        """One step and its record, timed here (step_s and its split, no throughput): tokens None."""
        cfg, world = self.cfg, self.world
        loss = self.train_step(self.batch, clock)
        timing = rounded(clock.split())
        self.step += 1
        self.loss, self.reached = loss, cfg.overfit and loss < cfg.target_loss
        record = dict(step=self.step, loss=round(loss, 6), eps=None if cfg.solver == "bptt" else self.train_cfg.eps,
                      lr=self.lr, **timing,
                      probes=0 if cfg.solver == "bptt" else cfg.probes, solver=cfg.solver, mode=cfg.layout(world),
                      ranks=world.size, **self.meter.peaks())
        if self.curriculum is not None:
            record["max_seq_len"] = self.curriculum.max_seq_len
            raised = self.curriculum.observe(loss)
            if raised is not None:
                record["curriculum_raised_to"] = raised
                self._follow_curriculum()
                if world.is_root:
                    tqdm.write(f"step {self.step}: curriculum raises --max-seq-len to {raised}")  # beside the bar
        return record, None

    def stop_reached(self) -> bool:
        return self.reached

    def run(self, run_dir: Path) -> dict[str, Any]:
        if not self.lr_settled:
            self.search_lr(run_dir)
        self.meter, self.loss, self.reached = MemoryMeter(self.backend), None, False
        try:
            scores, _ = run_steps(self, run_dir, "steps")
        except NonFiniteLoss as e:
            self.save(run_dir)
            raise BadInput(f"the loss became NaN or infinite at step {e.step + 1}; lower --lr (a checkpoint of "
                           f"the last good state, step {self.step}, was written)") from None
        finally:
            self.meter.stop()
        return {"steps": self.step, "loss": self.loss, "reached_target": self.reached, "lr": self.lr,
                **(scores or {}), "best_val_loss": self.best_val}
