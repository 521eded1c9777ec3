"""Join files, directories or globs, or the texts of a Hugging Face dataset, into a byte corpus (.bin, .h5
or .zarr) with a validation split.

    python bin/prepare_data.py ~/texts/ 'more/**/*.md' --out corpus.h5
    python bin/prepare_data.py hf:JeanKaddour/minipile --val-split validation --out minipile.bin
    python bin/prepare_data.py hf:saved_folder --split train --text-field text --out c.bin
    python bin/prepare_data.py hf:data.parquet --out c.bin
"""

from pathlib import Path

import typer

from eggnog.corpus.layout import MIN_SPLIT_BYTES
from eggnog.corpus.prepare_hf import prepare_sources
from eggnog.models.validation_sample import EGG_SAMPLE, short_split_line
from eggnog.runtime.cli import cli_help, user_errors

# plain click help: rich truncates long flag names at 80 columns
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


@app.command(help=cli_help(__doc__))
@user_errors
def main(
    sources: list[str] = typer.Argument(..., metavar="SRC...",
                                        help="Files, directories (read recursively) or glob patterns; or one "
                                             "hf:NAME[:CONFIG] (Hugging Face Hub, streamed) or hf:PATH (a folder "
                                             "written by save_to_disk, or .parquet/.arrow files)."),
    out: Path = typer.Option(..., "--out", help="Output path ending in .bin, .h5 or .zarr."),
    val_fraction: float = typer.Option(None, help="Fraction of bytes held out for validation, by document "
                                                  "[default: 0.02, unless --val-split]."),
    separator: bool = typer.Option(True, "--separator/--no-separator", help="Join documents with byte 0."),
    seed: int = typer.Option(0, help="Seed of the deterministic validation choice."),
    force: bool = typer.Option(False, "--force", help="Replace an existing output."),
    split: str = typer.Option(None, help="hf: the dataset split to read [default: train]."),
    val_split: str = typer.Option(None, help="hf: the dataset split that becomes the validation split "
                                             "(instead of --val-fraction of --split)."),
    text_field: str = typer.Option(None, help="hf: the field holding each row's text [default: text]."),
):
    meta = prepare_sources(sources, out, val_fraction, separator, seed, force, split, val_split, text_field,
                           min_split=MIN_SPLIT_BYTES)
    if "hf" in meta:
        hf = meta["hf"]
        skipped = sum(hf["empty_rows_skipped"].values())
        print(f"wrote {out}: {sum(meta['documents'].values())} texts from {meta['sources'][0]} (split "
              f"{hf['split']}" + (f", validation split {hf['val_split']}" if hf["val_split"] else "")
              + f"; {skipped} empty rows skipped)")
    else:
        print(f"wrote {out}: {len(meta['sources'])} files")
    print(f"{'split':<6} {'documents':>9} {'bytes':>13} {'unigram bpb':>12} {'bigram bpb':>11}  sha256")
    for name, split_meta in meta["splits"].items():
        print(f"{name:<6} {meta['documents'][name]:>9} {split_meta['bytes']:>13,} {split_meta['unigram_bpb']:>12.4f} "
              f"{split_meta['bigram_bpb']:>11.4f}  {split_meta['sha256'][:16]}")
    val_bytes = meta["splits"].get("val", {}).get("bytes", 0)
    short = short_split_line(val_bytes, *EGG_SAMPLE) if val_bytes >= 2 else None
    if short:
        print(f"note: {short} (the EGG's defaults)")


if __name__ == "__main__":
    app()
