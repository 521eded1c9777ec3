"""What a new user meets: a resumed run refused for the real problem (the model first, then each changed
field), an unreachable Hub refused in seconds, a too-small validation split named with its sizes, a run's
end set against the corpus's baselines, and a run ended by its time budget."""

import json
from dataclasses import asdict

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eggnog.corpus.reader import open_corpus
from eggnog.evolution.es_trainer import EsTrainer
from eggnog.kernels.core.backend import Backend
from eggnog.models.validation_sample import sample_shape, short_split_line
from eggnog.runtime.checkpoint import load_checkpoint, save_checkpoint
from eggnog.runtime.errors import BadInput
from eggnog.runtime.world import init_world
from eggnog.training.launch import against_baselines, best_validation
from eggnog.training.run.config import check_values
from eggnog.zorn.rge.run import RgeRunConfig
from tests.es_helpers import tiny_config, tiny_corpus
from tests.helpers import ROOT, assert_user_error, run_script


def egg_run(tmp_path):
    """A stored EGG run as train_es.py leaves it, with one checkpoint."""
    run_dir = tmp_path / "egg-run"
    cfg = tiny_config()
    save_checkpoint(run_dir / "checkpoints", 2, {"params": np.zeros(4, np.int8)},
                    {"model": "egg", "config": asdict(cfg)})
    (run_dir / "config.json").write_text(json.dumps({**asdict(cfg), "script": "train_es.py"}))
    return run_dir


def test_resuming_as_another_model_names_the_model_not_a_field(tmp_path):
    result = run_script("train_es.py", "--resume", egg_run(tmp_path), "--model", "mingru")
    assert_user_error(result, "trains --model egg, not mingru", "drop --model")


def test_resuming_with_changed_fields_names_each_before_their_own_checks(tmp_path):
    # --dim 9 alone would be refused for itself; on a resume the change is the problem
    result = run_script("train_es.py", "--resume", egg_run(tmp_path), "--depth", "2", "--dim", "9")
    assert_user_error(result, "continues with what it started with", "--depth 2 (it started with 1)",
                      "--dim 9 (it started with 8)")


def test_another_trainer_refuses_the_run_before_its_fields(tmp_path):
    result = run_script("train_bptt.py", "--resume", egg_run(tmp_path), "--dim", "16")
    assert_user_error(result, "is a train_es run; resume it with bin/train_es.py")


def test_an_unreachable_hub_is_refused_in_seconds_saying_how_to_prepare_elsewhere(tmp_path):
    pytest.importorskip("datasets")
    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "0", "HF_DATASETS_OFFLINE": "0",
           "HF_HOME": str(tmp_path / "hf")}  # port 9 (discard) refuses at once: no Hub, no cache
    result = run_script("prepare_data.py", "hf:eggnog-tests/no-such-dataset", "--out", tmp_path / "c.bin", env=env)
    # one line on stderr: datasets printed no "Retrying in 8s" lines before it
    assert_user_error(result, "cannot be reached from this machine", "copy the corpus here")
    assert not (tmp_path / "c.bin").exists()


@given(st.integers(2, 5000), st.integers(1, 80), st.integers(1, 600))
def test_a_small_split_keeps_long_rows_and_reads_fewer(split, rows, tokens):
    got_rows, got_tokens = sample_shape(split, rows, tokens)
    assert 1 <= got_tokens <= tokens and 0 <= got_rows <= rows
    assert got_rows * (got_tokens + 1) <= split  # every row lies in the split
    assert got_tokens == min(tokens, split - 1) and got_rows >= 1  # rows as long as the split allows
    assert (short_split_line(split, rows, tokens) is None) == ((got_rows, got_tokens) == (rows, tokens))


def test_a_tiny_validation_split_is_named_with_its_sizes_when_prepared_and_when_run(tmp_path):
    corpus = tmp_path / "c.bin"
    prepared = run_script("prepare_data.py", f"{ROOT}/README.md", "--out", corpus)
    assert prepared.returncode == 0, prepared.stderr
    val_bytes = json.loads((tmp_path / "c.bin.json").read_text())["splits"]["val"]["bytes"]
    assert f"note: the validation split holds {val_bytes:,} bytes" in prepared.stdout
    run = run_script("train_es.py", "--data", corpus, "--run-dir", tmp_path / "run", "--steps", "1", "--dim", "8",
                     "--population", "8", "--group-size", "2", "--tokens-per-update", "8", "--no-plots",
                     env={"EGGNOG_PROGRESS": "0"})
    assert run.returncode == 0, run.stderr
    assert f"the validation split holds {val_bytes:,} bytes, fewer than --val-rows 64" in run.stdout
    assert "each validation scores 1 row(s) of 256 bytes" in run.stdout


def test_the_end_of_a_run_sets_its_best_validation_against_the_baselines():
    val = {"unigram_bpb": 4.5, "bigram_bpb": 3.4}
    above = against_baselines(4.0, val)
    assert "best validation 4.000" in above[0] and "unigram 4.500, bigram 3.400" in above[0]
    assert above[1].startswith("0.600 bits/byte above the bigram baseline") and "docs/training.md" in above[1]
    assert against_baselines(3.0, val)[1] == "below the bigram baseline by 0.400 bits/byte"
    assert best_validation({"best_val_bpb": 4.1}) == 4.1
    assert best_validation({"best_val_loss": 2.5}) == 2.5  # a CD-RGE char_lm run, bits/token = bits/byte
    assert best_validation({"final": {"val_bpb": [None, 4.2, 3.9]}}) == 3.9  # gossip islands
    assert best_validation({}) is None


def test_the_overfit_run_says_why_its_validation_does_not_fall():
    summary = {"steps": 5, "loss": 0.09, "reached_target": True, "lr": 0.3, "val_loss": 8.76, "val_accuracy": 0.0,
               "best_val_loss": 7.03}
    assert "--overfit fits one fixed batch" in RgeRunConfig(overfit=True).summarize(summary)
    assert "--overfit" not in RgeRunConfig().summarize(summary)


def test_a_time_budget_ends_the_run_after_the_step_that_passes_it(tmp_path):
    cfg = tiny_config(steps=50, max_minutes=1e-9)  # every step ends past it: the first is the last
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    trainer = EsTrainer(cfg, init_world(), Backend("cpu"), open_corpus(tiny_corpus(tmp_path)))
    summary = trainer.run(run_dir)
    _, record = load_checkpoint(run_dir)
    assert record["step"] == 1 and summary["steps"] == 1 and summary["val_bpb"] is not None
    with pytest.raises(BadInput, match="--max-minutes must be 0"):
        check_values(tiny_config(max_minutes=-1.0))


def test_gossip_islands_refuse_a_time_budget(tmp_path):
    result = run_script("train_gossip.py", "--max-minutes", "5", "--run-dir", tmp_path / "g")
    assert_user_error(result, "--max-minutes is not for gossip runs")


def test_the_closing_lines_point_at_a_section_that_exists():
    assert "### The main job against its baselines" in open(f"{ROOT}/docs/training.md").read()
    assert "'The main job against its baselines'" in against_baselines(4.0, {"unigram_bpb": 4.5, "bigram_bpb": 3.4})[1]


def test_the_cpu_hour_preset_is_the_measured_setting():
    from eggnog.evolution.es_trainer import EsRunConfig
    from eggnog.evolution.transformer_es_config import with_preset
    from eggnog.training.launch import resolve

    result = json.load(open(f"{ROOT}/bench/results/main_job_search-cpu-2026-12-02.json"))
    long = next(r for r in result["rows"] if r["stage"] == "long")
    argv = with_preset(["--preset", "cpu-hour"])
    flags = dict(zip(argv[2::2], argv[3::2]))
    assert argv[:2] == ["--model", "egg"] and flags["--steps"] == str(long["budget_steps"])
    assert " ".join(f"{k} {v}" for k, v in flags.items() if k in ("--population", "--group-size")) == long["flags"]
    cfg = resolve(EsRunConfig, {"population": 2048, "group_size": 256, "steps": 21192}, ranks=1)
    assert cfg.population == 2048 and cfg.group_size == 256
