"""prepare: sources -> split plan -> corpus file with metadata."""

import os

from eggnog.corpus.formats import output_paths
from eggnog.corpus.layout import plan_splits
from eggnog.corpus.sources import collect_files
from eggnog.corpus.writer import write_corpus
from eggnog.runtime.errors import BadInput

FORMAT_NAME = "eggnog-bytes"


def prepare(sources, out, val_fraction=0.02, separator=True, seed=0, force=False, min_split=1):
    """Join the documents named by `sources` into a corpus at `out`; returns its metadata. A split
    shorter than `min_split` bytes is refused."""
    out_paths = output_paths(out)  # rejects an unknown suffix before any work
    if not force:
        for p in out_paths:
            if p.exists():
                raise BadInput(f"output {str(p)!r} already exists; pass --force to replace it")
    files = collect_files(sources, exclude=out_paths)
    try:
        sizes = [os.path.getsize(f) for f in files]
    except OSError as e:
        raise BadInput(f"cannot read source file {e.filename!r}: {e.strerror}") from None
    sep = 0 if separator else None
    train, val = plan_splits(files, sizes, val_fraction, seed, sep, min_split)
    meta = {
        "format": FORMAT_NAME,
        "version": 1,
        "separator": sep,
        "val_fraction": val_fraction,
        "split_seed": seed,
        "documents": {"train": len(train.pieces), "val": len(val.pieces)},
        "sources": [str(f) for f in files],
    }
    return write_corpus(out, {"train": train, "val": val}, meta, force=force)
