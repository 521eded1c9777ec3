"""Join files, directories or globs into a byte corpus (.bin, .h5 or .zarr) with a validation split."""

from pathlib import Path

import typer

from eggnog.corpus.prepare import prepare
from eggnog.runtime.cli import cli_help, user_errors

# plain click help: rich truncates long flag names at 80 columns
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


@app.command(help=cli_help(__doc__))
@user_errors
def main(
    sources: list[str] = typer.Argument(..., metavar="SRC...",
                                        help="Files, directories (read recursively) or glob patterns."),
    out: Path = typer.Option(..., "--out", help="Output path ending in .bin, .h5 or .zarr."),
    val_fraction: float = typer.Option(0.02, help="Fraction of bytes held out for validation, by document."),
    separator: bool = typer.Option(True, "--separator/--no-separator", help="Join documents with byte 0."),
    seed: int = typer.Option(0, help="Seed of the deterministic validation choice."),
    force: bool = typer.Option(False, "--force", help="Replace an existing output."),
):
    meta = prepare(sources, out, val_fraction=val_fraction, separator=separator, seed=seed, force=force)
    print(f"wrote {out}: {len(meta['sources'])} files")
    print(f"{'split':<6} {'documents':>9} {'bytes':>13} {'unigram bpb':>12} {'bigram bpb':>11}  sha256")
    for name, split in meta["splits"].items():
        print(f"{name:<6} {meta['documents'][name]:>9} {split['bytes']:>13,} {split['unigram_bpb']:>12.4f} "
              f"{split['bigram_bpb']:>11.4f}  {split['sha256'][:16]}")


if __name__ == "__main__":
    app()
