"""EGGROLL training runs: stop-and-resume equals an uninterrupted run bit for bit, and the script
writes what it promises or refuses bad input with one sentence."""

import json

import numpy as np
import pytest

from eggnog.corpus.reader import open_corpus
from eggnog.evolution.eggroll import IntEggrollConfig
from eggnog.evolution.es_trainer import EsRunConfig, EsTrainer
from eggnog.kernels.core.backend import Backend
from eggnog.runtime.checkpoint import load_checkpoint, save_checkpoint
from eggnog.runtime.errors import BadInput
from eggnog.runtime.rundir import RENAMED, read_jsonl
from eggnog.runtime.world import init_world
from eggnog.training.launch import resolve
from tests.es_helpers import TINY, tiny_config, tiny_corpus
from tests.helpers import assert_user_error, run_script

CPU = Backend("cpu")


def train(tmp_path, name, steps, resume=False, **overrides):
    cfg = tiny_config(steps=steps, **overrides)
    run_dir = tmp_path / name
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    trainer = EsTrainer(cfg, init_world(), CPU, open_corpus(tiny_corpus(tmp_path)))
    if resume:
        trainer.restore(run_dir)
    trainer.run(run_dir)
    return load_checkpoint(run_dir)


# adaptive noise at a constant z-test level that leaves most weights still, so overlays fall below 64
@pytest.mark.parametrize("settings", [{}, {"optimizer": "adamw"}, {"adaptive_noise": True, "alpha": 0.2}],
                         ids=["ztest", "adamw", "adaptive-noise"])
def test_resume_equals_uninterrupted_run(tmp_path, settings):
    straight, _ = train(tmp_path, "straight", 6, **settings)
    train(tmp_path, "split", 3, **settings)
    resumed, record = train(tmp_path, "split", 6, resume=True, **settings)
    assert record["step"] == 6
    assert set(straight) == set(resumed) and all(np.array_equal(straight[k], resumed[k]) for k in straight)
    if settings:  # the extra state is in the checkpoint, was carried over the resume and changed the run
        plain = {k: v for k, v in settings.items() if k not in ("optimizer", "adaptive_noise")}
        ztest, _ = train(tmp_path, "ztest", 6, **plain)
        if "optimizer" in settings:
            assert {"opt_m", "opt_v", "opt_acc"} <= set(resumed) and np.any(resumed["opt_acc"] != 0)
            assert not np.array_equal(ztest["params"], resumed["params"])
        else:  # overlays below 64 scale the noise down: the members' losses differ from step 1 on
            assert resumed["noise_overlay"].dtype == np.int8 and len(set(resumed["noise_overlay"].tolist())) > 1
            losses = [[r["train_bpb"] for r in read_jsonl(tmp_path / name / "metrics.jsonl")]
                      for name in ("ztest", "straight")]
            assert losses[0][0] == losses[1][0] and losses[0][1:] != losses[1][1:]
    a, b = read_jsonl(tmp_path / "straight" / "metrics.jsonl"), read_jsonl(tmp_path / "split" / "metrics.jsonl")
    keep = ("step", "train_bpb", "alpha", "moved_fraction")
    assert [{k: r[k] for k in keep} for r in a] == [{k: r[k] for k in keep} for r in b]
    # the interrupted run also validated at its end (step 2); every validation both made agrees
    both = [(x["val_bpb"], y["val_bpb"]) for x, y in zip(a, b) if "val_bpb" in x and "val_bpb" in y]
    assert both and all(x == y for x, y in both), both


def test_a_run_written_under_the_older_config_names_resumes_exactly(tmp_path):
    straight, _ = train(tmp_path, "straight", 4)
    train(tmp_path, "split", 2)
    run_dir, older = tmp_path / "split", {now: old for old, now in RENAMED.items()}
    arrays, record = load_checkpoint(run_dir)
    record["meta"]["config"] = {older.get(k, k): v for k, v in record["meta"]["config"].items()}
    assert {"n_layer", "n_embd", "epochs", "rank"} <= set(record["meta"]["config"])
    save_checkpoint(run_dir / "checkpoints", record["step"], arrays, record["meta"])
    (run_dir / "config.json").write_text(json.dumps(record["meta"]["config"]))
    cfg = resolve(EsRunConfig, {"steps": 4}, ranks=1, resume=run_dir)
    trainer = EsTrainer(cfg, init_world(), CPU, open_corpus(tiny_corpus(tmp_path)))
    trainer.restore(run_dir)
    trainer.run(run_dir)
    resumed, record = load_checkpoint(run_dir)
    assert record["step"] == 4 and np.array_equal(straight["params"], resumed["params"])
    assert np.array_equal(straight["states"], resumed["states"])


def test_training_moves_parameters_and_states(tmp_path):
    arrays, record = train(tmp_path, "run", 3)
    cfg = tiny_config()
    from eggnog.models.egg import EggModel

    initial = EggModel(cfg.model()).init_params(cfg.seed)
    assert np.count_nonzero(arrays["params"] != initial) > 0
    assert arrays["states"].shape == (8, 1, 8) and np.any(arrays["states"] != 0)


def test_alpha_schedule_and_thresholds():
    cfg = IntEggrollConfig()
    assert cfg.alpha_at(0) == 1.0 and cfg.threshold_at(0) == 0
    assert cfg.alpha_at(1000) == pytest.approx(1 / 16) and cfg.threshold_at(1000) == 29
    assert IntEggrollConfig(alpha=0.125).threshold_at(5) == 24
    assert IntEggrollConfig(alpha=0.25).threshold_at(0) == 18
    assert IntEggrollConfig(alpha=0.25, fast_fitness=False).threshold_at(0) == 18 * 16
    assert IntEggrollConfig(noise_reuse=3).noise_epoch(7) == 2 and IntEggrollConfig(noise_reuse=0).noise_epoch(7) == 0


@pytest.mark.parametrize("changes,ranks,message", [
    (dict(group_size=3), 1, "group size must be even"),
    (dict(population=10, group_size=4), 1, "multiple of the group size"),
    (dict(population=12, group_size=2), 8, "equal slices of whole antithetic pairs"),
    (dict(perturbation_rank=2), 1, "rank-1"),
])
def test_impossible_populations(changes, ranks, message):
    with pytest.raises(BadInput, match=message):
        IntEggrollConfig(**changes).check(ranks)


def flags(**overrides):
    args = []
    for key, value in {**TINY, **overrides}.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    return args


def test_script_end_to_end_and_resume(tmp_path):
    corpus = tiny_corpus(tmp_path)
    run_dir = tmp_path / "run"
    first = run_script("train_es.py", "--data", corpus, "--run-dir", run_dir, "--backend", "cpu", *flags(steps=4))
    assert first.returncode == 0, first.stderr
    assert "validation baselines: unigram" in first.stdout and "done: 4 steps" in first.stdout
    config = json.loads((run_dir / "config.json").read_text())
    assert config["population"] == 8 and config["data"] == str(corpus)
    records = read_jsonl(run_dir / "metrics.jsonl")
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    assert set(records[0]) == {"step", "train_bpb", "alpha", "moved_fraction", "tokens_per_s", "step_s", "eval_s",
                               "exchange_s", "update_s", "elapsed_s"}
    assert "val_bpb" in records[1] and "val_bpb" in records[3]
    assert (run_dir / "checkpoints" / "latest").exists() and (run_dir / "checkpoints" / "best").exists()
    more = run_script("train_es.py", "--resume", run_dir, "--steps", "6", "--backend", "cpu")
    assert more.returncode == 0, more.stderr
    assert [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2, 3, 4, 5, 6]
    text = run_script("generate.py", run_dir, "--prompt", "import ", "--length", "20")
    assert text.returncode == 0 and text.stdout.startswith("import ") and len(text.stdout) >= 28
    changed = run_script("train_es.py", "--resume", run_dir, "--seed", "4", "--dim", "16", "--backend", "cpu")
    assert_user_error(changed, "continues with what it started with", "--seed 4 (it started with 3)",
                      "--dim 16 (it started with 8)")


@pytest.mark.parametrize("extra,message", [
    (["--population", "10", "--group-size", "4"], "multiple of the group size"),
    (["--group-size", "3", "--population", "6"], "group size must be even"),
    (["--tokens-per-update", "100000"], "shorter than one window"),
    (["--backend", "tpu"], "unknown backend 'tpu'"),
    (["--optimizer", "sgd"], "unknown --optimizer 'sgd' for the EGG"),
    (["--optimizer", "adamw", "--beta2", "1"], "--beta1, --beta2 in [0, 1)"),
    (["--population", "8", "--parallel-generations-per-gpu", "2"], "disagrees"),
])
def test_script_bad_input(tmp_path, extra, message):
    corpus = tiny_corpus(tmp_path)
    args = flags()
    result = run_script("train_es.py", "--data", corpus, "--run-dir", tmp_path / "run", *args, *extra)
    assert_user_error(result, message)
    assert not (tmp_path / "run").exists()


def test_generate_refuses_other_checkpoints(tmp_path):
    from eggnog.runtime.checkpoint import save_checkpoint

    save_checkpoint(tmp_path, 1, {"params": np.zeros(3, np.int8)}, {"model": "lstm"})
    assert_user_error(run_script("generate.py", tmp_path), "holds a 'lstm' model")
    save_checkpoint(tmp_path, 2, {"params": np.zeros(3, np.float32)}, {"model": "mingru"})
    assert_user_error(run_script("generate.py", tmp_path), "MinGRU model configuration is missing")
    assert_user_error(run_script("generate.py", tmp_path / "none"), "no checkpoint")


def test_print_arch():
    table = run_script("print_arch.py", "egg", "--depth", "6", "--dim", "256")
    assert table.returncode == 0 and "4,856,064" in table.stdout and "layers.5.mlp.down" in table.stdout
    as_json = run_script("print_arch.py", "egg", "--n-layer", "6", "--n-embd", "256", "--json")  # nano-egg's names
    arch = json.loads(as_json.stdout)
    assert arch["total_params"] == 4_856_064 and arch["config"]["depth"] == 6 and arch["config"]["dim"] == 256
    assert {"name": "head", "shape": [256, 256], "kind": "matrix", "params": 65536} in arch["tensors"]
    assert_user_error(run_script("print_arch.py", "gpt"), "unknown model 'gpt'")
    assert_user_error(run_script("print_arch.py", "egg", "--dim", "0"), "--depth and --dim must be positive")
