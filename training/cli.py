"""Typer commands generated from run configs: one option per dataclass field, with the help, default
and older names of its `flag` metadata (so `--help` shows the default the code uses), a companion
per-rank option where a field has one, and the launcher's --run-dir, --resume and --backend.

`--rank` is refused on every training command: in an MPI program a rank is a process; the rank of a
perturbation is `--perturbation-rank`."""

import inspect
import typing
from dataclasses import fields
from pathlib import Path

import typer
from typer.core import TyperCommand

from eggnog.runtime.cli import user_errors
from eggnog.runtime.errors import BadInput
from eggnog.runtime.rundir import read_config
from eggnog.training.run.config import option_name

RANK_REFUSED = ("--rank is not a flag here: an MPI program's ranks are its processes; the rank of a "
                "perturbation is --perturbation-rank")
RUN_OPTIONS = ("run_dir", "resume", "backend", "threads")


def field_type(cls, name):
    """int, float, str or bool: the field's annotation without its `| None`."""
    hint = typing.get_type_hints(cls)[name]
    kinds = [t for t in typing.get_args(hint) if t is not type(None)] or [hint]
    return kinds[0]


def field_default(f):
    """A field's default as the option carries it: (value, None), or (None, text) where the default is
    None and `default_text` says what that means."""
    if f.default is None:
        if not f.metadata.get("default_text"):
            raise ValueError(f"field {f.name} defaults to None without a default_text saying what that means")
        return None, f.metadata["default_text"]
    return f.default, None


def config_options(configs):
    """{name: spec} of every option of the configs ({label: class}), fields in declaration order."""
    specs = {}
    for label, cls in configs.items():
        for f in fields(cls):
            meta = f.metadata
            if "help" not in meta:
                raise ValueError(f"{cls.__name__}.{f.name} has no flag metadata")
            spec = specs.setdefault(f.name, {"type": field_type(cls, f.name), "helps": {}, "aliases": (),
                                             "defaults": {}, "off": meta.get("off"), "metavar": meta.get("metavar")})
            spec["helps"][label] = meta["help"]
            spec["aliases"] += tuple(a for a in meta["aliases"] if a not in spec["aliases"])
            spec["defaults"][label] = field_default(f)
            if meta["per_rank"]:
                name, *aliases = meta["per_rank"]
                rank_spec = specs.setdefault(name, {"type": int, "aliases": tuple(aliases), "defaults": {},
                                                    "helps": {}, "metavar": None})
                rank_spec["helps"][label] = (f"{option_name(f.name)} per rank: sets it to this times the number "
                                             "of ranks.")
                rank_spec["defaults"][label] = None, f"{option_name(f.name)} / ranks"
    return specs


def default_of(spec):
    """(default, show_default) of an option: the one default of its configs, or text naming each."""
    defaults = spec["defaults"]
    if len(set(defaults.values())) == 1:
        value, text = next(iter(defaults.values()))
        return (value, True) if text is None else (None, text)
    return None, ", ".join(f"{label} {value if text is None else text}" for label, (value, text) in defaults.items())


def typer_option(name, spec, labels):
    if spec["type"] is bool:
        decls = (f"{option_name(name)}/{option_name(spec['off'] or 'no_' + name)}",)
    else:
        decls = (option_name(name),) + tuple(option_name(a) for a in spec["aliases"])
    helps = spec["helps"]
    if len(set(helps.values())) > 1:
        help = " ".join(f"{label}: {text}" for label, text in helps.items())
    else:
        help = next(iter(helps.values()))
        if len(helps) < len(labels):
            help = f"({', '.join(helps)} only) {help}"
    default, show = default_of(spec)
    return typer.Option(default, *decls, help=help, show_default=show, metavar=spec["metavar"])


def run_options(run_names):
    names = sorted(set(run_names))
    return {
        "run_dir": (Path, typer.Option(None, help="Run directory.", show_default=" or ".join(
            f"runs/{n}-<time>" for n in names))),
        "resume": (Path, typer.Option(None, help="Continue the run in this directory from its latest checkpoint.",
                                      show_default="a new run")),
        "backend": (str, typer.Option(None, help="auto, cpu or cuda.", show_default="EGGNOG_BACKEND or auto")),
        "threads": (int, typer.Option(None, help="CPU threads of the kernels in each rank.",
                                      show_default="the node's cores / its ranks")),
        "rank": (str, typer.Option(None, "--rank", hidden=True)),
    }


def stored_label(configs, resume):
    """The label whose config has every field of the run at `resume` and the fewest others, or None
    (then the default stands, and the launcher reports what does not match)."""
    try:
        stored = read_config(resume)
    except BadInput:
        return None
    # A config may extend another (the transformer's extends the EGG's): the closest fit wins.
    extra = {label: len({f.name for f in fields(cls)} - set(stored))
             for label, cls in configs.items() if set(stored) <= {f.name for f in fields(cls)}}
    closest = sorted(extra, key=extra.get)
    if not closest or (len(closest) > 1 and extra[closest[0]] == extra[closest[1]]):
        return None
    return closest[0]


def resumed_label(configs, resume, choose, label, given):
    """The label a resumed run keeps: its own. A different one given on the command line is refused
    first, before any field of the other config is read as this one's."""
    stored = stored_label(configs, resume)
    if stored is None:
        return label  # the launcher reports what does not match
    if given and stored != label:
        raise BadInput(f"run {str(resume)!r} trains {option_name(choose)} {stored}, not {label}: drop "
                       f"{option_name(choose)} to continue it, or start a new run")
    return stored


class ArgsKeepingCommand(TyperCommand):
    """Keeps the raw arguments (ctx.meta["raw_args"]): click lets the last of two names of one option
    win in silence, where they must be refused instead."""

    def parse_args(self, ctx, args):
        ctx.meta["raw_args"] = list(args)
        return super().parse_args(ctx, args)


def spellings(name, spec):
    """Every way of writing the option `name` on a command line."""
    names = [option_name(name)] + [option_name(a) for a in spec.get("aliases", ())]
    if spec.get("type") is bool:
        names.append(option_name(spec.get("off") or "no_" + name))
    return names


def check_no_conflicts(raw_args, specs):
    """BadInput when one setting is given under two of its names (`--steps 10 --epochs 20`), or with
    both --resume and --run-dir. The same name given twice is not refused: the last one wins, which
    the sbatch scripts' EGGNOG_ARGS rely on to override their own flags."""
    words = [a.split("=", 1)[0] for a in raw_args if a.startswith("--")]
    for name, spec in specs.items():
        used = list(dict.fromkeys(w for w in words if w in spellings(name, spec)))
        if len(used) > 1:
            raise BadInput(f"{' and '.join(used)} set the same thing: give one of them")
    if "--resume" in words and "--run-dir" in words:
        raise BadInput("--resume continues a run in its own folder: --run-dir does not apply with it (give one)")


def config_command(app, configs, choose=None, choose_help=None):
    """Decorator registering fn(config_cls, flags) as `app`'s command. `configs`: one run config class,
    or {label: class} with `choose` naming the option that picks one (the first by default). flags:
    the options given on the command line (fields, per-rank companions, run_dir, resume, backend), by
    name; an option left at its default is absent, so a resumed run keeps its stored value."""
    if not isinstance(configs, dict):
        configs = {configs.run_name: configs}
    labels = list(configs)
    specs = config_options(configs)
    members = {label: set(config_options({label: cls})) for label, cls in configs.items()}
    params = {}
    if choose:
        params[choose] = (str, typer.Option(labels[0], help=choose_help))
    params.update({name: (spec["type"], typer_option(name, spec, labels)) for name, spec in specs.items()})
    params.update(run_options(cls.run_name for cls in configs.values()))

    def register(fn):
        @user_errors
        def command(context, **options):
            if options.pop("rank") is not None:
                raise BadInput(RANK_REFUSED)
            check_no_conflicts(context.meta.get("raw_args", []), specs)
            label = options.pop(choose) if choose else labels[0]
            if label not in configs:
                raise BadInput(f"unknown {choose} {label!r}: choose {' or '.join(labels)}")
            if choose and options.get("resume") is not None:
                label = resumed_label(configs, options["resume"], choose, label,
                                      context.get_parameter_source(choose).name != "DEFAULT")
            given = {k: v for k, v in options.items() if context.get_parameter_source(k).name != "DEFAULT"}
            foreign = [k for k in given if k not in members[label] and k not in RUN_OPTIONS]
            if foreign:
                raise BadInput(f"{option_name(foreign[0])} does not apply to {option_name(choose)} {label}")
            return fn(configs[label], given)

        command.__signature__ = inspect.Signature(
            [inspect.Parameter("context", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)]
            + [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=kind)
               for name, (kind, option) in params.items()])
        command.__name__ = fn.__name__
        app.command(help=app.info.help, cls=ArgsKeepingCommand)(command)
        return fn

    return register
