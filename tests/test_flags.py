"""One flag vocabulary across the training scripts: options generated from the run configs show the
defaults the code uses, older names still reach their fields, per-rank counts become totals, `--rank`
is refused, and run directories written under the older config names still resume."""

import importlib.util
import json
import os
import re
from dataclasses import asdict, fields, replace

import pytest
from typer.testing import CliRunner

from eggnog.evolution.egg_island import GossipEggRunConfig
from eggnog.evolution.es_trainer import EsRunConfig
from eggnog.evolution.float_es_trainer import FloatEsRunConfig
from eggnog.evolution.transformer_es_config import TransformerEsRunConfig
from eggnog.runtime.errors import BadInput
from eggnog.runtime.rundir import RENAMED, check_resume
from eggnog.training.launch import given_fields, resolve
from eggnog.training.mingru.bptt import BpttRunConfig
from eggnog.training.mingru.island import GossipRunConfig
from eggnog.zorn.rge.island import GossipRgeRunConfig
from eggnog.zorn.rge.run import RgeRunConfig
from tests.helpers import ROOT, assert_user_error, run_script

SCRIPTS = {
    "train_es.py": {"egg": EsRunConfig, "transformer": TransformerEsRunConfig, "mingru": FloatEsRunConfig},
    "train_bptt.py": {"bptt": BpttRunConfig},
    "train_rge.py": {"rge": RgeRunConfig},
    "train_gossip.py": {"bptt": GossipRunConfig, "egg": GossipEggRunConfig, "rge": GossipRgeRunConfig},
}
RUN_OPTIONS = {"--run-dir", "--resume", "--backend", "--threads"}

# (script, arguments, config field, value it must get on 2 ranks): every older or per-rank name
ALIASES = [
    ("train_es.py", ["--epochs", "7"], "steps", 7),
    ("train_es.py", ["--n-layer", "3"], "depth", 3),
    ("train_es.py", ["--n-embd", "16"], "dim", 16),
    ("train_es.py", ["--parallel-generations-per-gpu", "4"], "population", 8),
    ("train_es.py", ["--population-per-rank", "4"], "population", 8),
    ("train_es.py", ["--model", "mingru", "--epochs", "7"], "steps", 7),
    ("train_es.py", ["--model", "mingru", "--n-layer", "3"], "depth", 3),
    ("train_es.py", ["--model", "mingru", "--n-embd", "16"], "dim", 16),
    ("train_es.py", ["--model", "mingru", "--parallel-generations-per-gpu", "4"], "population", 8),
    ("train_es.py", ["--model", "mingru", "--population-per-rank", "4"], "population", 8),
    ("train_rge.py", ["--epsilon", "0.02"], "sigma", 0.02),
    ("train_rge.py", ["--meta-perturbations", "3"], "probes", 6),
    ("train_rge.py", ["--probes-per-rank", "3"], "probes", 6),
]


def load_script(name):
    spec = importlib.util.spec_from_file_location(f"script_{name[:-3]}", os.path.join(ROOT, "bin", name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parsed(script, args):
    """(config class, flags) the script hands to the launcher for `args`."""
    module = load_script(script)
    calls = []
    module.launch = lambda config_cls, trainer_cls, flags, script: calls.append((config_cls, flags))
    result = CliRunner().invoke(module.app, args)
    assert result.exit_code == 0, result.output
    [call] = calls
    return call


@pytest.mark.parametrize("script,args,name,value", ALIASES, ids=[" ".join([a[0], *a[1]]) for a in ALIASES])
def test_each_older_name_reaches_its_field(script, args, name, value):
    config_cls, flags = parsed(script, args)
    assert given_fields(config_cls, flags, ranks=2) == {name: value}


def test_options_left_alone_are_not_given():
    config_cls, flags = parsed("train_es.py", ["--model", "mingru", "--steps", "600"])
    assert config_cls is FloatEsRunConfig and flags == {"steps": 600}  # given even when it equals the default


def shown(f):
    """A field's default as --help must show it."""
    if f.default is None:
        return f.metadata["default_text"]
    if isinstance(f.default, bool):
        return (f.name if f.default else f.metadata["off"] or "no_" + f.name).replace("_", "-")
    return str(f.default)


def expected_defaults(configs):
    """{option: the default its --help line must show}, from the dataclass fields alone."""
    per_option = {}
    for label, cls in configs.items():
        for f in fields(cls):
            per_option.setdefault(f.name, {})[label] = f
            if f.metadata["per_rank"]:
                per_option.setdefault(f.metadata["per_rank"][0], {})[label] = f"--{f.name.replace('_', '-')} / ranks"
    expected = {}
    for name, found in per_option.items():
        texts = {label: f if isinstance(f, str) else shown(f) for label, f in found.items()}
        plain = [f for f in found.values() if not isinstance(f, str) and f.default is not None]
        if len(set(texts.values())) > 1:
            expected[name] = "(" + ", ".join(f"{label} {text}" for label, text in texts.items()) + ")"
        elif len(plain) == len(found):
            expected[name] = texts.popitem()[1]
        else:
            expected[name] = f"({texts.popitem()[1]})"
    return {"--" + name.replace("_", "-"): text for name, text in expected.items()}


def help_defaults(script):
    """{option: shown default} read from the script's --help (click's plain layout: an option's help
    may continue on the lines below it)."""
    result = run_script(script, "--help", env={"COLUMNS": "1000"})
    assert result.returncode == 0, result.stderr
    entries = []
    for line in result.stdout.split("Options:", 1)[1].splitlines():
        if re.match(r"^  --", line):
            entries.append(line)
        elif entries and line.startswith("   "):  # click breaks lines after hyphens too
            entries[-1] += ("" if entries[-1].endswith("-") else " ") + line.strip()
    found = {}
    for entry in entries:
        option = entry.split()[0].split(",")[0]
        if option != "--help":
            default = re.search(r"\[default: (.*)\]\s*$", entry)
            assert default, entry
            found[option] = default.group(1)
    return found


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_shows_every_field_with_its_dataclass_default(script):
    shown_in_help = help_defaults(script)
    expected = expected_defaults(SCRIPTS[script])
    run_level = set(shown_in_help) - set(expected)
    chooser = {"train_es.py": {"--model"}, "train_gossip.py": {"--trainer"}}.get(script, set())
    assert run_level == RUN_OPTIONS | chooser
    assert {k: shown_in_help[k] for k in expected} == expected


@pytest.mark.parametrize("script", SCRIPTS)
def test_rank_is_refused_naming_the_new_flag(tmp_path, script):
    result = run_script(script, "--rank", "2", "--run-dir", tmp_path / "run")
    assert_user_error(result, "--rank is not a flag", "--perturbation-rank")
    assert not (tmp_path / "run").exists()


def test_a_total_and_a_per_rank_count_that_disagree_are_refused():
    with pytest.raises(BadInput, match=r"--probes 8 disagrees with --probes-per-rank 3 on 2 rank\(s\)"):
        given_fields(RgeRunConfig, {"probes": 8, "probes_per_rank": 3}, ranks=2)
    assert given_fields(RgeRunConfig, {"probes": 6, "probes_per_rank": 3}, ranks=2) == {"probes": 6}


@pytest.mark.parametrize("config_cls,settings", [
    (EsRunConfig, {"depth": 2, "dim": 16, "population": 8, "group_size": 2}),
    (FloatEsRunConfig, {"dim": 16, "depth": 1, "perturbation_rank": 2, "population": 8, "group_size": 2}),
    (RgeRunConfig, {"sigma": 0.02, "probes": 4}),
])
def test_a_run_written_under_the_older_names_resumes(tmp_path, config_cls, settings):
    older = {now: old for old, now in RENAMED.items()}
    stored = asdict(config_cls(**settings, steps=3))
    old_names = {older.get(k, k): v for k, v in stored.items()}
    assert set(old_names) & set(RENAMED)
    (tmp_path / "config.json").write_text(json.dumps(old_names))
    cfg = resolve(config_cls, {"steps": 9}, ranks=1, resume=tmp_path)
    assert asdict(cfg) == {**stored, "steps": 9}
    check_resume(old_names, asdict(cfg), config_cls.fixed_on_resume())  # as a checkpoint's config
    with pytest.raises(BadInput, match=r"cannot resume with a different seed \(0 -> 5\)"):
        check_resume(old_names, asdict(replace(cfg, seed=5)), config_cls.fixed_on_resume())


def test_a_resumed_run_keeps_the_model_or_trainer_it_was_started_with(tmp_path):
    from eggnog.training.cli import stored_label

    configs = SCRIPTS["train_es.py"]
    for label, cls in configs.items():
        run = tmp_path / label
        run.mkdir()
        (run / "config.json").write_text(json.dumps(asdict(cls())))
        assert stored_label(configs, run) == label
    assert stored_label(configs, tmp_path / "missing") is None
    gossip = SCRIPTS["train_gossip.py"]
    (tmp_path / "egg" / "config.json").write_text(json.dumps(asdict(gossip["egg"]())))
    assert stored_label(gossip, tmp_path / "egg") == "egg"
