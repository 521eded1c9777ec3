"""Plot runs from their metrics.jsonl: loss against steps and wall time with the corpus's baselines
(a zero-order run: the probes' mean and the clean loss), throughput, ES alpha and moved fraction, and
a gossip run's islands. Writes RUN/plots/*.png for one run; several runs are overlaid into the first
one's plots/compare/ (or --out).

    python bin/plot.py runs/es-20261122-101500
    python bin/plot.py runs/es-a runs/es-b --out comparison
"""

from pathlib import Path

import typer

from eggnog.runtime.cli import cli_help, user_errors

# plain click help: rich truncates long flag names at 80 columns
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


@app.command(help=cli_help(__doc__))
@user_errors
def main(runs: list[Path] = typer.Argument(..., help="Run directories."),
         out: Path = typer.Option(None, help="Folder of the figures.", show_default="RUN/plots")):
    from eggnog.runtime.errors import BadInput
    from eggnog.training.run.plots import islands, plot_runs

    for run in runs:
        if not (run / "metrics.jsonl").is_file() and not islands(run):
            raise BadInput(f"{str(run)!r} is not a run directory with metrics (no metrics.jsonl)")
    target = out or (runs[0] / "plots" if len(runs) == 1 else runs[0] / "plots" / "compare")
    for path in plot_runs(runs, target):
        print(path)


if __name__ == "__main__":
    app()
