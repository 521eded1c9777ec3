"""bin/plot.py draws a run's figures (loss against steps and wall time with the baselines, throughput,
ES alpha and moved fraction), overlays several runs, and a run redraws its own plots at the end."""

import struct

from tests.es_helpers import tiny_corpus
from tests.helpers import assert_user_error, run_script

ES = ["--dim", "8", "--population", "8", "--group-size", "2", "--tokens-per-update", "8", "--val-rows", "4",
      "--val-tokens", "8", "--validate-every", "2", "--backend", "cpu"]


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_a_run_draws_its_plots_and_plot_overlays_runs(tmp_path):
    corpus = tiny_corpus(tmp_path)
    for name, plots in (("a", "--plots"), ("b", "--no-plots")):
        result = run_script("train_es.py", "--run-dir", tmp_path / name, "--steps", "4", "--data", corpus, plots, *ES)
        assert result.returncode == 0, result.stderr
    drawn = sorted(p.name for p in (tmp_path / "a" / "plots").iterdir())
    assert drawn == ["alpha.png", "loss.png", "moved.png", "throughput.png"]
    assert not (tmp_path / "b" / "plots").exists()
    width, height = png_size(tmp_path / "a" / "plots" / "loss.png")
    assert width > 1000 and height > 400  # two panels side by side
    both = run_script("plot.py", tmp_path / "a", tmp_path / "b")
    assert both.returncode == 0, both.stderr
    listed = both.stdout.split()
    assert listed[0] == str(tmp_path / "a" / "plots" / "compare" / "loss.png") and len(listed) == 4


def test_the_loss_figure_has_both_axes_and_the_baselines(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from eggnog.training.run import plots as run_plots

    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "metrics.jsonl").write_text("".join(
        f'{{"epoch": {i}, "train_bpb": {8 - i / 10}, "elapsed_s": {i * 0.5}, "tokens_per_s": 100.0'
        + (f', "val_bpb": {7.9 - i / 10}' if i % 2 else "") + "}\n" for i in range(6)))
    figures = []
    saved = run_plots._save
    monkeypatch.setattr(run_plots, "baselines", lambda run_dir: (4.5, 3.4))
    monkeypatch.setattr(run_plots, "_save", lambda fig, path: figures.append(fig) or saved(fig, path))
    paths = run_plots.plot_runs([tmp_path / "r"], tmp_path / "out")
    assert [p.name for p in paths] == ["loss.png", "throughput.png"]
    by_step, by_time = figures[0].axes
    assert by_step.get_xlabel() == "step" and by_time.get_xlabel() == "wall time (s)"
    labels = [line.get_label() for line in by_step.get_lines()]
    assert labels == ["r train", "r val", "unigram baseline", "bigram baseline"]
    assert list(by_step.get_lines()[1].get_xdata()) == [2, 4, 6]
    plt.close("all")


def test_plot_refuses_a_folder_without_metrics(tmp_path):
    assert_user_error(run_script("plot.py", tmp_path), "is not a run directory with metrics")


def test_a_zero_order_run_s_validation_is_its_val_series(tmp_path):
    from eggnog.training.run.plots import run_series

    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": 6.5, "s_per_step": 0.5}\n'
                                            '{"step": 2, "loss": 6.1, "s_per_step": 0.5, "val_loss": 6.3}\n')
    series = run_series(tmp_path)
    assert series["train"] == [6.5, 6.1] and series["val"] == [(2, 1.0, 6.3)]


def test_a_cdrge_run_plots_the_probe_mean_and_the_clean_loss(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from eggnog.training.run import plots as run_plots

    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "metrics.jsonl").write_text("".join(
        f'{{"step": {i}, "loss": {7 - i / 10}, "s_per_step": 0.5, "solver": "cdrge"'
        + (f', "val_loss": {7.2 - i / 10}, "clean_loss": {6 - i / 10}' if i % 2 == 0 else "") + "}\n"
        for i in range(1, 7)))
    series = run_plots.run_series(tmp_path / "r")
    assert series["probed"] and series["clean"] == [(2, 1.0, 5.8), (4, 2.0, 5.6), (6, 3.0, 5.4)]
    figures = []
    saved = run_plots._save
    monkeypatch.setattr(run_plots, "baselines", lambda run_dir: None)
    monkeypatch.setattr(run_plots, "_save", lambda fig, path: figures.append(fig) or saved(fig, path))
    run_plots.plot_runs([tmp_path / "r"], tmp_path / "out")
    by_step, by_time = figures[0].axes
    assert [line.get_label() for line in by_step.get_lines()] == ["r probe mean (θ ± εz)", "r clean (θ)", "r val"]
    assert list(by_step.get_lines()[1].get_ydata()) == [5.8, 5.6, 5.4]
    assert len(by_time.get_lines()) == 3
    plt.close("all")


def test_a_zero_order_run_draws_its_plots(tmp_path):
    tiny = ["--hidden-size", "8", "--num-heads", "2", "--input-size", "4", "--probes", "4", "--steps", "4",
            "--validate-every", "2", "--val-samples", "8"]
    drawn = run_script("train_rge.py", "--run-dir", tmp_path / "a", *tiny)
    assert drawn.returncode == 0, drawn.stderr
    assert "loss.png" in {p.name for p in (tmp_path / "a" / "plots").iterdir()}
    assert f"plots: {tmp_path / 'a' / 'plots'}" in drawn.stdout
    assert run_script("train_rge.py", "--run-dir", tmp_path / "b", "--no-plots", *tiny).returncode == 0
    assert not (tmp_path / "b" / "plots").exists()


def test_a_synthetic_task_run_has_no_corpus_baselines(tmp_path):
    """A copy-task run's losses are bits per answer token: the corpus's baselines are not drawn beside
    them; a char_lm run (and a run whose config names no task) keeps them."""
    import json

    from eggnog.training.run import plots as run_plots

    corpus = str(tiny_corpus(tmp_path))
    for task, drawn in (("copy", False), ("char_lm", True), (None, True)):
        run = tmp_path / str(task)
        run.mkdir()
        config = {"data": corpus} if task is None else {"data": corpus, "task": task}
        (run / "config.json").write_text(json.dumps(config))
        got = run_plots.baselines(run)
        assert (got is not None and len(got) == 2) if drawn else got is None, (task, got)
