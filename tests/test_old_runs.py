"""A run directory written when ES runs named their updates epochs (metrics lines with a 0-based
`epoch`, checkpoints with `data_position {"epoch": n}`) still plots and resumes, its lines then
logged as now: `step`, the count of steps done."""

import json

import numpy as np

from eggnog.runtime.checkpoint import META_KEY, load_checkpoint, save_checkpoint
from eggnog.runtime.rundir import read_jsonl
from eggnog.training.run.plots import run_series
from tests.es_helpers import tiny_corpus
from tests.helpers import run_script

ES = ["--dim", "8", "--depth", "1", "--population", "8", "--group-size", "2", "--tokens-per-update", "8",
      "--val-rows", "4", "--val-tokens", "8", "--validate-every", "2", "--backend", "cpu"]


def as_older_run(run):
    """Rewrite a run's metrics and latest checkpoint as ES runs logged them before."""
    lines = read_jsonl(run / "metrics.jsonl")
    older = [{"epoch": r["step"] - 1, **{k: v for k, v in r.items() if k != "step"}} for r in lines]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in older))
    arrays, record = load_checkpoint(run)
    meta = {**record["meta"], "data_position": {"epoch": record["step"]}}
    save_checkpoint(run / "checkpoints", record["step"], arrays, meta)
    with np.load(run / "checkpoints" / "latest") as npz:
        assert json.loads(npz[META_KEY].tobytes())["meta"]["data_position"] == {"epoch": record["step"]}
    return lines


def test_an_older_es_run_plots_and_resumes(tmp_path):
    corpus, run = tiny_corpus(tmp_path), tmp_path / "r"
    assert run_script("train_es.py", "--run-dir", run, "--steps", "2", "--data", corpus, *ES).returncode == 0
    logged = as_older_run(run)
    series = run_series(run)
    assert series["step"] == [1, 2] and series["val"] == [(2, logged[1]["elapsed_s"], logged[1]["val_bpb"])]
    assert load_checkpoint(run)[1]["meta"]["data_position"] == {"step": 2}
    more = run_script("train_es.py", "--resume", run, "--steps", "4")
    assert more.returncode == 0, more.stderr
    assert "resumed from step 2" in more.stdout
    after = read_jsonl(run / "metrics.jsonl")
    assert [r["step"] for r in after] == [1, 2, 3, 4] and not any("epoch" in r for r in after)
    assert after[:2] == logged
    assert load_checkpoint(run)[1]["meta"]["data_position"] == {"step": 4}
    drawn = run_script("plot.py", run)
    assert drawn.returncode == 0, drawn.stderr
    assert (run / "plots" / "loss.png").is_file()
