"""The start of every training run, whatever its script: turn per-rank flags into totals, merge the
flags with a resumed run's config, check everything before anything is written, pick the backend and
corpus, create (or reopen) the run directory and open its --log loggers, print the header, run, print the
closing line."""

from dataclasses import asdict, fields
from pathlib import Path

from eggnog.corpus.default import default_corpus
from eggnog.kernels.core.backend import select_backend
from eggnog.kernels.core.first_compile import compile_notice
from eggnog.models.validation_sample import short_split_line
from eggnog.runtime.checkpoint import checkpoint_model, checkpoint_step
from eggnog.runtime.commands import command
from eggnog.runtime.errors import BadInput
from eggnog.runtime.loggers import chosen_loggers, close_run, open_run
from eggnog.runtime.run_lock import release_lock
from eggnog.runtime.rundir import check_script, config_from, create_run_dir, current_names, read_config
from eggnog.runtime.threads import set_threads
from eggnog.runtime.world import init_world
from eggnog.training.memory_plan import check_host_fits
from eggnog.training.run.config import check_values, option_name


def given_fields(config_cls, flags, ranks):
    """The config fields set by `flags` (by name, only those given), per-rank values made totals; a
    total and a per-rank value that disagree are refused."""
    names = {f.name for f in fields(config_cls)}
    given = {k: v for k, v in flags.items() if k in names and v is not None}
    for f in fields(config_cls):
        per_rank = f.metadata.get("per_rank")
        if not per_rank or flags.get(per_rank[0]) is None:
            continue
        value = flags[per_rank[0]]
        if given.get(f.name, value * ranks) != value * ranks:
            raise BadInput(f"{option_name(f.name)} {given[f.name]} disagrees with {option_name(per_rank[0])} "
                           f"{value} on {ranks} rank(s)")
        given[f.name] = value * ranks
    return given


def refuse_other_model(config_cls, resume):
    """A run resumed as another model is refused first, whatever else its flags say."""
    expected = getattr(config_cls, "model_name", None)
    held = checkpoint_model(resume) if isinstance(expected, str) else None
    if held is not None and held != expected:
        raise BadInput(f"run {str(resume)!r} holds a {held!r} model, not a {expected!r} one: continue it with the "
                       "script and --model it was started with, or start a new run")


def refuse_changed_fields(config_cls, stored, given, resume):
    """A resumed run keeps the fields it started with: flags that change any are refused, each named,
    before a changed value could be refused for itself."""
    stored = current_names(stored)
    changed = [f"{option_name(k)} {given[k]} (it started with {stored[k]})" for k in config_cls.fixed_on_resume()
               if k in given and k in stored and given[k] != stored[k]]
    if changed:
        raise BadInput(f"run {str(resume)!r} continues with what it started with: drop {', '.join(changed)}, or "
                       "start a new run")


def resolve(config_cls, flags, ranks, resume=None):
    """The run's checked config: the flags over the resumed run's stored config. (Whether a resumed
    run keeps what it must is checked against its checkpoint too, which also knows the model.)"""
    stored = read_config(resume) if resume is not None else {}
    given = given_fields(config_cls, flags, ranks)
    if resume is not None:
        refuse_other_model(config_cls, resume)
        refuse_changed_fields(config_cls, stored, given, resume)
    cfg = config_from(config_cls, stored, given)
    check_values(cfg)
    chosen_loggers(getattr(cfg, "log", None))  # an unknown --log is refused before anything is written
    cfg = cfg.resolved()
    cfg.check(ranks)
    check_host_fits(cfg.host_memory(ranks))
    return cfg


def open_run_corpus(cfg, world):
    """--data, or the embedded default corpus (built once, by rank 0 first)."""
    return cfg.open_data(cfg.data) if cfg.data else world.root_first(default_corpus)


def split_resume(resume):
    """(run folder, what to restore from) of --resume: a run folder (its `latest`), or one of its
    checkpoint files, RUN/checkpoints/step-*.npz (the run then continues from that step)."""
    path = Path(resume)
    if path.is_file() and path.parent.name == "checkpoints" and (path.parent.parent / "config.json").is_file():
        return path.parent.parent, path
    return path, path


def resume_point(trainer, cfg, resume):
    """Restore the trainer from the run at `resume`. A run that never saved starts from step 0 with
    its stored config; a finished run is refused unless --steps gives it more to do. Trainers whose
    islands keep their own checkpoints (`island_checkpoints`) restore themselves."""
    if getattr(trainer, "island_checkpoints", False):
        trainer.restore(resume)
        return "resumed"
    if Path(resume).is_dir() and not (Path(resume) / "checkpoints" / "latest").is_file():
        return "no checkpoint yet: starting it from step 0 with its stored configuration"
    trainer.restore(resume)  # first: it refuses changed fields, and writes nothing
    step = checkpoint_step(resume)
    if step >= cfg.steps:
        raise BadInput(f"run {str(resume)!r} already finished at step {step}; pass --steps N with N > {step} to "
                       "continue it")
    return f"resumed from step {step}" + (f" ({Path(resume).name})" if Path(resume).is_file() else "")


def short_validation(cfg, corpus):
    """The line naming a validation split too small for the run's sample, or None."""
    if not cfg.validates or corpus is None or getattr(cfg, "val_rows", None) is None or len(corpus.val) < 2:
        return None
    return short_split_line(len(corpus.val), cfg.val_rows, cfg.val_tokens)


def best_validation(summary):
    """The run's best validation in bits/byte from its summary, or None where it has none."""
    for key in ("best_val_bpb", "best_val_loss"):  # a char_lm CD-RGE run's bits/token are bits/byte
        if summary.get(key) is not None:
            return summary[key]
    islands = [v for v in (summary.get("final") or {}).get("val_bpb", []) if v is not None]  # gossip
    return min(islands) if islands else None


def against_baselines(best, val):
    """The run's best validation beside the validation split's baselines, and what passing the bigram takes."""
    unigram, bigram = val["unigram_bpb"], val["bigram_bpb"]
    if best is None:
        return [f"baselines of the validation split: unigram {unigram:.3f}, bigram {bigram:.3f} bits/byte"]
    lines = [f"best validation {best:.3f} bits/byte; the validation split's baselines: unigram {unigram:.3f}, "
             f"bigram {bigram:.3f}"]
    if best < bigram:
        lines.append(f"below the bigram baseline by {bigram - best:.3f} bits/byte")
    else:
        lines.append(f"{best - bigram:.3f} bits/byte above the bigram baseline: passing it takes more steps or "
                     "a larger setting (docs/training.md, 'The main job against its baselines')")
    return lines


def closing_lines(cfg, path, script, corpus, summary=None):
    """The run's best validation beside the corpus's baselines, where its checkpoints are and the
    commands that come next."""
    lines = []
    val = corpus.meta.get("splits", {}).get("val", {}) if cfg.validates and corpus is not None else {}
    if val:
        lines += against_baselines(best_validation(summary or {}), val)
    for link in ("latest", "best"):
        target = path / "checkpoints" / link
        if target.exists():
            lines.append(f"{link}: {target.resolve()}")
    if (path / "plots" / "loss.png").exists():
        lines.append(f"plots: {path / 'plots'} (redraw or compare runs: {command('plot.py')} {path})")
    if cfg.generates:
        lines.append(f"generate: {command('generate.py')} {path} --length 300")
        data = f" --data {cfg.data}" if getattr(cfg, "data", None) else ""
        lines.append(f"evaluate: {command('evaluate.py')} {path}{data}")
    lines.append(f"continue: {command(script)} --resume {path} --steps N")
    loggers = chosen_loggers(getattr(cfg, "log", None))
    if "tensorboard" in loggers and (path / "tb").is_dir():
        lines.append(f"tensorboard: tensorboard --logdir {path / 'tb'}")
    if "wandb" in loggers and any(path.glob("wandb/offline-run-*")):
        lines.append(f"wandb (offline): wandb sync {path / 'wandb'}/offline-run-*")
    return lines


def launch(config_cls, trainer_cls, flags, script):
    """Run `trainer_cls(cfg, world, backend, corpus)` on the config the flags give; flags: fields and
    their per-rank companions by name, and run_dir, resume, backend; `script`: the bin/ file name,
    recorded in the run's config.json. Returns the trainer's summary."""
    world = init_world()
    resume, run_dir = flags.get("resume"), flags.get("run_dir")
    checkpoint = None
    if resume is not None:
        resume, checkpoint = split_resume(resume)
        check_script(resume, script)
    cfg = resolve(config_cls, flags, world.size, resume)
    chosen = select_backend(flags.get("backend"), world.local_rank)
    threads = set_threads(flags.get("threads"), world)
    corpus = open_run_corpus(cfg, world) if cfg.uses_corpus else None
    notice = compile_notice(type(cfg).__name__) if world.is_root else None
    if notice:
        print(notice, flush=True)
    trainer = trainer_cls(cfg, world, chosen, corpus)
    start = resume_point(trainer, cfg, checkpoint) if resume is not None else None
    path = create_run_dir(world, resume or run_dir, asdict(cfg), resume=resume is not None, name=cfg.run_name,
                          script=script)
    try:
        open_run(world, path, {**asdict(cfg), "script": script})  # --log: W&B, TensorBoard (rank 0)
        if world.is_root:
            mode = cfg.layout(world)
            print(f"run: {path}  backend: {chosen.name} ({chosen.device_name})  ranks: {world.size}  "
                  f"threads: {threads}"
                  + (f"  mode: {mode}" if mode else "") + (f"  ({start})" if start else ""))
            for line in cfg.describe(trainer):
                print(line)
            val = corpus.meta.get("splits", {}).get("val", {}) if cfg.validates and corpus is not None else {}
            if val:
                print(f"validation baselines: unigram {val['unigram_bpb']:.3f}, bigram {val['bigram_bpb']:.3f} "
                      "bits/byte")
            short = short_validation(cfg, corpus)
            if short:
                print(short)
            # now, not at the end: a rank killed from outside ends the whole MPI job before anyone can print
            print(f"if it stops, continue with: {command(script)} --resume {path}", flush=True)
        summary = trainer.run(path)
        if world.is_root:
            print(cfg.summarize(summary))
            for line in closing_lines(cfg, path, script, corpus, summary):
                print(line)
        return summary
    finally:
        close_run(path)  # the plots at the end, then the loggers closed
        if world.is_root:
            release_lock(path)
