"""prepare for an `hf:` source: a Hugging Face dataset -> the same byte corpus as files give.

The rows' texts stream once, as UTF-8 bytes, into a spool file beside the output (so a dataset the
size of minipile is never held in memory; the spool takes as much disk as the corpus, until the
corpus is written). Each non-empty text is a document: the validation split is chosen over them
exactly as over files (`layout.plan_splits`: whole documents, in an order fixed by the seed, until it
holds --val-fraction of the bytes), or is the dataset's own split named by --val-split. The writer
then reads the spool, documents joined by the separator byte, to temporary names renamed at the end.
"""

import os
from array import array
from dataclasses import dataclass
from pathlib import Path

from eggnog.corpus.formats import output_paths
from eggnog.corpus.hf_source import (
    datasets_package,
    documents,
    is_hf_source,
    offline_unless_reachable,
    open_splits,
    parse_source,
)
from eggnog.corpus.layout import READ_BLOCK, Piece, SplitPlan, plan_splits
from eggnog.corpus.prepare import FORMAT_NAME, prepare
from eggnog.corpus.writer import write_corpus
from eggnog.runtime.errors import BadInput
from eggnog.runtime.files import temp_name

DEFAULT_VAL_FRACTION = 0.02


@dataclass
class SpoolPlan(SplitPlan):
    """A split whose pieces lie in one spool file; read through one handle in large blocks (a dataset
    has many small documents, and each block costs the statistics a pass over 64k bigram counts)."""

    spool: str = ""

    def blocks(self):
        buffer, position = bytearray(), 0
        with open(self.spool, "rb") as f:
            for i, piece in enumerate(self.pieces):
                if i and self.separator is not None:
                    buffer.append(self.separator)
                if piece.offset != position:
                    f.seek(piece.offset)
                left = piece.length
                while left:
                    chunk = f.read(min(READ_BLOCK, left))
                    if not chunk:
                        raise BadInput(f"the spool file {self.spool!r} shrank while it was being read")
                    buffer += chunk
                    left -= len(chunk)
                    if len(buffer) >= READ_BLOCK:
                        yield bytes(buffer)
                        buffer = bytearray()
                position = piece.offset + piece.length
        if buffer:
            yield bytes(buffer)


def _spool(texts, f, sizes):
    """Append each document to the open spool `f` and its length to `sizes`; returns how many."""
    count = 0
    for data in texts:
        f.write(data)
        sizes.append(len(data))
        count += 1
    return count


def _plans(spool, sizes, n_train, val_fraction, seed, sep):
    offsets = array("q", [0])
    for size in sizes:
        offsets.append(offsets[-1] + size)

    def in_spool(pieces):
        return SpoolPlan([Piece(spool, offsets[int(p.path)] + p.offset, p.length) for p in pieces], sep, spool)

    if n_train < len(sizes):  # the dataset's own validation split follows the training documents
        return (SpoolPlan([Piece(spool, offsets[i], sizes[i]) for i in range(n_train)], sep, spool),
                SpoolPlan([Piece(spool, offsets[i], sizes[i]) for i in range(n_train, len(sizes))], sep, spool))
    train, val = plan_splits(range(n_train), sizes, val_fraction, seed, sep)  # a piece's path is its index
    return in_spool(train.pieces), in_spool(val.pieces)


def prepare_hf(source, out, split=None, val_split=None, text_field=None, val_fraction=None, separator=True, seed=0,
               force=False):
    """Write the texts of a Hugging Face dataset as a corpus at `out`; returns its metadata."""
    split, text_field = split or "train", text_field or "text"
    if val_split is not None and val_fraction is not None:
        raise BadInput("--val-split and --val-fraction both choose the validation split: give one of them")
    if val_split is not None and val_split == split:
        raise BadInput(f"--val-split {val_split!r} is the --split itself: name another split")
    fraction = DEFAULT_VAL_FRACTION if val_fraction is None and val_split is None else val_fraction
    if fraction is not None and not 0.0 <= fraction < 1.0:
        raise BadInput(f"--val-fraction must be in [0, 1), got {fraction}")
    out_paths = output_paths(out)  # rejects an unknown suffix before any work
    if not force:
        for p in out_paths:
            if p.exists():
                raise BadInput(f"output {str(p)!r} already exists; pass --force to replace it")
    if not Path(out).parent.is_dir():
        raise BadInput(f"output directory {str(Path(out).parent)!r} does not exist")
    hf = parse_source(source)
    if hf.kind == "hub":
        offline_unless_reachable()  # before datasets is imported: it reads the setting then
    datasets = datasets_package()
    train_set, val_set = open_splits(hf, split, val_split, text_field, datasets)
    sep = 0 if separator else None
    spool = temp_name(Path(out).with_name(Path(out).name + ".spool"))
    sizes, skipped = array("q"), {}
    try:
        with open(spool, "wb") as f:
            n_train = _spool(documents(hf, train_set, split, text_field, skipped), f, sizes)
            if not n_train:
                raise BadInput(f"{source!r} split {split!r} holds no text in its field {text_field!r}")
            if val_set is not None and not _spool(documents(hf, val_set, val_split, text_field, skipped), f, sizes):
                raise BadInput(f"{source!r} split {val_split!r} (--val-split) holds no text in its field "
                               f"{text_field!r}")
        train, val = _plans(str(spool), sizes, n_train, fraction, seed, sep)
        meta = {
            "format": FORMAT_NAME,
            "version": 1,
            "separator": sep,
            "val_fraction": fraction,
            "split_seed": seed,
            "documents": {"train": len(train.pieces), "val": len(val.pieces)},
            "sources": [str(source)],
            "hf": {"source": hf.name, "kind": hf.kind, "config": hf.config, "split": split, "val_split": val_split,
                   "text_field": text_field, "empty_rows_skipped": skipped},
        }
        return write_corpus(out, {"train": train, "val": val}, meta, force=force)
    finally:
        if spool.exists():
            os.unlink(spool)


def prepare_sources(sources, out, val_fraction=None, separator=True, seed=0, force=False, split=None, val_split=None,
                    text_field=None, min_split=1):
    """prepare_data's dispatch: files, directories and globs (`prepare`), or one hf: source (`prepare_hf`)."""
    if any(is_hf_source(s) for s in sources):
        if len(sources) > 1:
            raise BadInput("an hf: source must be the only source")
        return prepare_hf(sources[0], out, split=split, val_split=val_split, text_field=text_field,
                          val_fraction=val_fraction, separator=separator, seed=seed, force=force)
    if split is not None or val_split is not None or text_field is not None:
        raise BadInput("--split, --val-split and --text-field apply to hf: sources only")
    fraction = DEFAULT_VAL_FRACTION if val_fraction is None else val_fraction
    return prepare(sources, out, val_fraction=fraction, separator=separator, seed=seed, force=force,
                   min_split=min_split)
