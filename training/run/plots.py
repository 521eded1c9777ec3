"""Plots of runs from their metrics.jsonl (matplotlib's Agg backend, imported only here): the loss
against steps and against wall time with the corpus's unigram and bigram baselines (a zero-order run:
the probes' mean and the clean loss of the unperturbed parameters), throughput, and
for ES runs alpha and the moved fraction; a gossip run adds its population view (every island's
fitness over time, its tournaments marked). Several runs overlay in one set of figures."""

import json
import time
from pathlib import Path

from eggnog.runtime.rundir import read_jsonl, read_metrics


def run_series(run_dir):
    """{x: step (1-based), elapsed, train, val and clean (step, clock, value), tokens_per_s, alpha, moved,
    probed} of a run; a zero-order run's loss and val_loss (bits/token) are its train and val series,
    clean_loss (the unperturbed parameters on the training batch, at validations) its clean series, its
    clock the summed step times; `probed`: its train series is the probes' mean at theta +- eps z."""
    records = read_metrics(Path(run_dir) / "metrics.jsonl") if (Path(run_dir) / "metrics.jsonl").is_file() else []
    out = {"step": [], "elapsed": [], "train": [], "val": [], "clean": [], "tokens_per_s": [], "alpha": [],
           "moved": [], "probed": False}
    clock = 0.0
    for r in records:
        step = r.get("step")
        if step is None:
            continue
        clock = r.get("elapsed_s", clock + r.get("s_per_step", 0.0))
        out["step"].append(step)
        out["elapsed"].append(clock)
        out["train"].append(r.get("train_bpb", r.get("loss")))
        val = r.get("val_bpb", r.get("val_loss"))  # a zero-order run validates in bits/token
        if val is not None:
            out["val"].append((step, clock, val))
        if r.get("clean_loss") is not None:
            out["clean"].append((step, clock, r["clean_loss"]))
        out["probed"] = out["probed"] or r.get("solver") in ("cdrge", "fdras")
        for key, name in (("tokens_per_s", "tokens_per_s"), ("alpha", "alpha"), ("moved_fraction", "moved")):
            if key in r:
                out[name].append((step, r[key]))
    return out


def baselines(run_dir):
    """(unigram, bigram) bits/byte of the run's validation split, or None where its corpus cannot be
    opened without building it, or where the run learns a synthetic task (no corpus: the baselines of
    the default corpus would mean nothing beside it)."""
    from eggnog.corpus.default import default_corpus_path
    from eggnog.corpus.reader import open_corpus
    from eggnog.runtime.errors import BadInput

    try:
        config = json.loads((Path(run_dir) / "config.json").read_text())
        if config.get("task", "char_lm") != "char_lm":
            return None
        path = config.get("data") or default_corpus_path()
        val = open_corpus(path).meta["splits"]["val"]
        return val["unigram_bpb"], val["bigram_bpb"]
    except (OSError, ValueError, KeyError, BadInput):
        return None


def islands(run_dir):
    return sorted(p for p in Path(run_dir).glob("rank-*") if (p / "metrics.jsonl").is_file())


def plot_runs(run_dirs, out_dir):
    """Draw the figures of `run_dirs` (overlaid) into `out_dir`; returns the PNG paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    series = {Path(r).name: run_series(r) for r in run_dirs}
    paths = []

    fig, (by_step, by_time) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, s in series.items():
        train = f"{name} probe mean (θ ± εz)" if s["probed"] else f"{name} train"
        line, = by_step.plot(s["step"], s["train"], lw=0.8, alpha=0.7, label=train)
        by_time.plot(s["elapsed"], s["train"], lw=0.8, alpha=0.7, color=line.get_color())
        if s["clean"]:  # the loss being minimised, which the probes' mean overstates at a large eps
            steps, clocks, values = zip(*s["clean"])
            by_step.plot(steps, values, "s--", ms=3, lw=1, color=line.get_color(), label=f"{name} clean (θ)")
            by_time.plot(clocks, values, "s--", ms=3, lw=1, color=line.get_color())
        if s["val"]:
            steps, clocks, values = zip(*s["val"])
            by_step.plot(steps, values, "o-", ms=3, color=line.get_color(), label=f"{name} val")
            by_time.plot(clocks, values, "o-", ms=3, color=line.get_color())
    lines = baselines(run_dirs[0])
    for value, label, style in zip(lines or (), ("unigram", "bigram"), (":", "--")):
        for ax in (by_step, by_time):
            ax.axhline(value, color="grey", ls=style, lw=1, label=f"{label} baseline" if ax is by_step else None)
    by_step.set(xlabel="step", ylabel="bits per byte (token)", title="loss against steps")
    by_time.set(xlabel="wall time (s)", ylabel="bits per byte (token)", title="loss against wall time")
    by_step.legend(fontsize=7)
    paths.append(_save(fig, out_dir / "loss.png"))

    for key, ylabel, file in (("tokens_per_s", "tokens per second", "throughput.png"),
                              ("alpha", "alpha (z-test level)", "alpha.png"),
                              ("moved", "fraction of parameters moved", "moved.png")):
        drawn = {name: s[key] for name, s in series.items() if s[key]}
        if not drawn:
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        for name, points in drawn.items():
            ax.plot(*zip(*points), lw=0.8, label=name)
        ax.set(xlabel="step", ylabel=ylabel)
        ax.legend(fontsize=7)
        paths.append(_save(fig, out_dir / file))

    for run in run_dirs:
        ranks = islands(run)
        if not ranks:
            continue
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for rank in ranks:
            records = read_jsonl(rank / "metrics.jsonl")
            clock = [r.get("elapsed_s", 0.0) for r in records]
            line, = ax.plot(clock, [r.get("fitness") for r in records], lw=0.8, label=rank.name)
            mixed = [(c, r.get("fitness")) for c, r in zip(clock, records) if r.get("tournament") not in (None, "won")]
            if mixed:
                ax.plot(*zip(*mixed), "x", color=line.get_color(), ms=5)
        ax.set(xlabel="wall time (s)", ylabel="fitness (-EMA of the training loss)",
               title=f"{Path(run).name}: islands (x: lost a tournament and merged)")
        ax.legend(fontsize=7, ncol=2)
        paths.append(_save(fig, out_dir / f"population-{Path(run).name}.png"))
    return paths


class PlotRefresh:
    """Redraws RUN/plots at a validation when a minute has passed since the last drawing, and at the
    last one, so plotting costs little however often a run validates."""

    def __init__(self, run_dir, enabled, every_s=60.0):
        self.run_dir, self.enabled, self.every_s = Path(run_dir), enabled, every_s
        self.drawn = time.monotonic()

    def validated(self, last):
        if self.enabled and (last or time.monotonic() - self.drawn >= self.every_s):
            plot_runs([self.run_dir], self.run_dir / "plots")
            self.drawn = time.monotonic()


def _save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
